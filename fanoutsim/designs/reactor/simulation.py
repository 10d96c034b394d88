"""The reactor runner under SimPy's virtual clock: a seeded, replayable run.

The loops and workloads are :class:`~.runtime.ReactorRuntime`'s, written once
for both clocks; this face picks the virtual driver
(:class:`~fanoutsim.kernel.runtime.virtual.VirtualRuntime`). Virtual time is
seconds since ``start`` (default 2026-01-01T00:00:00Z); the store sees epoch
microseconds; ids are seeded, so the same config and seed give the same trace.
"""

from __future__ import annotations

from typing import Any

from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.host import checked_config
from fanoutsim.designs.reactor.runtime import ReactorRuntime
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.ids import IdSource
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, until_ok
from fanoutsim.kernel.timeutil import from_us
from fanoutsim.kernel.validate import is_number


class Simulation(ReactorRuntime, VirtualRuntime):
    """One seeded run of the reactor subscription design under a virtual clock.

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

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        seed: int = 0,
        store: Any = "memory",
        *,
        start=None,
        faults=None,
        trace: bool = True,
        fetch_latency: float = 0.0,
    ) -> None:
        config = checked_config(config, seed)
        if not is_number(fetch_latency) or fetch_latency < 0:  # nan or inf: no drain would ever come
            raise ValueError(f"fetch_latency must be a finite number of seconds >= 0, got {fetch_latency!r}")
        self.config = config
        self.seed = seed
        self.fetch_latency = float(fetch_latency)
        self._open(seed, store, start, faults, trace, opener=open_store)
        self.ids = IdSource(seed)
        self._setup()
        self.restart()
        self._schedule_crashes()

    @property
    def clock_time(self):
        """The virtual wall time, a timezone-aware datetime."""
        return from_us(self.now_us())

    def run(self, until: float | None = None) -> None:
        """Advance the virtual clock to ``until`` seconds (absolute, >= now)."""
        if not until_ok(self.env, until):
            return
        if self.plan is not None and not self._checked:
            self.check_plan()
        self._advance(until)
