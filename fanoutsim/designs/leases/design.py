"""The leased-consumer design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""

from __future__ import annotations

from fanoutsim.kernel.design import Design

from .config import LeaseConfig

DESIGN = Design.from_package(
    __package__,
    name="leases",
    title="leased durable consumers with ack/nack, dead letters and retention fences (RiffDB)",
    config_type=LeaseConfig,
)
