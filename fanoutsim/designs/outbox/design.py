"""The outbox design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""

from __future__ import annotations

from fanoutsim.kernel.design import Design

from .config import OutboxConfig

DESIGN = Design.from_package(
    __package__,
    name="outbox",
    title="transactional outbox with NOTIFY hints, safety poll and per-consumer cursors (Subspace)",
    config_type=OutboxConfig,
)
