"""The reactor design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""

from __future__ import annotations

from fanoutsim.kernel.design import Design

from .config import SchedulerConfig

DESIGN = Design.from_package(
    __package__,
    name="reactor",
    title="reactor -> workflow subscriptions with timestamp watermarks (Cloacina)",
    config_type=SchedulerConfig,
)
