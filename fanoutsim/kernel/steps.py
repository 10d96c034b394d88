"""What every design's engine steps read of their engine, whatever the design:
a typed port each design's own ``Engine`` Protocol extends with its store,
config and the rest of what its steps touch, and :class:`StepEngineBase`, the
concrete part every engine binds the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fanoutsim.kernel.faults import Faults, NoFaults
from fanoutsim.kernel.faults.plan import PointsOf

if TYPE_CHECKING:
    from fanoutsim.kernel.metrics import Metrics
    from fanoutsim.kernel.trace import Trace


class StepEngine(Protocol):
    """The metrics a step bumps, the trace it writes and the faults it asks
    (``points[name]``: the named point to pass, None where passing it does nothing)."""

    metrics: Metrics
    trace: Trace
    faults: Faults
    points: PointsOf


class StepEngineBase:
    """Binds what :class:`StepEngine` names, once for every engine: its
    metrics, its trace and its faults (none given: :class:`~.faults.NoFaults`)."""

    def __init__(self, metrics: Metrics, trace: Trace, faults: Faults | None = None) -> None:
        self.metrics = metrics
        self.trace = trace
        self.faults: Faults = faults or NoFaults()
        self.points = PointsOf(self.faults)
