"""The reactor runner under SimPy's virtual clock: a seeded, replayable run.

The loops and workloads are :class:`~.runtime.ReactorRuntime`'s, written once
for both clocks; this face picks the virtual driver
(:class:`~fanoutsim.kernel.runtime.faces.VirtualFace`, whose constructor every
design shares). Virtual time is
seconds since ``start`` (default 2026-01-01T00:00:00Z); the store sees epoch
microseconds; ids are seeded, so the same config and seed give the same trace.
"""

from __future__ import annotations

from fanoutsim.designs.reactor.runtime import ReactorRuntime
from fanoutsim.kernel.ids import IdSource
from fanoutsim.kernel.runtime.faces import VirtualFace
from fanoutsim.kernel.timeutil import from_us
from fanoutsim.kernel.validate import is_number


class Simulation(ReactorRuntime, VirtualFace):
    """One seeded run of the reactor subscription design under a virtual clock:
    ``Simulation(config=None, seed=0, store="memory", *, start=None, faults=None,
    trace=True, fetch_latency=0.0)``.

    >>> sim = Simulation(seed=1)
    >>> sid = sim.runner.subscribe_workflow_to_reactor("r", "wf")
    >>> fid = sim.fire("r", {"x": 1})
    >>> sim.run(until=2.0)
    >>> len(sim.executions())
    1

    ``faults`` is a :class:`~fanoutsim.kernel.faults.FaultPlan` (or any object with the
    hooks of :class:`~fanoutsim.kernel.faults.NoFaults`). ``fetch_latency`` is the
    virtual time between a poll's fetch and its drain — a store round trip,
    during which other processes (other pollers, writers) run.
    """

    #: The run's ids, drawn from the seed: the same config and seed give the same ids.
    ids: IdSource

    def _options(self, *, fetch_latency: float = 0.0) -> None:
        if not is_number(fetch_latency) or fetch_latency < 0:  # nan or inf: no drain would ever come
            raise ValueError(f"fetch_latency must be a finite number of seconds >= 0, got {fetch_latency!r}")
        self.fetch_latency = float(fetch_latency)
        self.ids = IdSource(self.seed)  # seeded: the same config and seed give the same trace

    @property
    def clock_time(self):
        """The virtual wall time, a timezone-aware datetime."""
        return from_us(self.now_us())

    def _before_run(self) -> None:
        if self.plan is not None and not self._checked:
            self.check_plan()  # every workflow or subscription it names must exist
