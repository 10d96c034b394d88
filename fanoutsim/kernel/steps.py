"""What every design's engine steps read of their engine, whatever the design:
a typed port each design's own ``Engine`` Protocol extends with its store,
config and the rest of what its steps touch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fanoutsim.kernel.faults import Faults
    from fanoutsim.kernel.metrics import Metrics
    from fanoutsim.kernel.trace import Trace


class StepEngine(Protocol):
    """The metrics a step bumps, the trace it writes and the faults it asks."""

    metrics: Metrics
    trace: Trace
    faults: Faults
