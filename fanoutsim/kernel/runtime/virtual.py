"""Planned crashes on the virtual clock, for every SimPy runtime.

A runtime that mixes this in needs ``env`` (a SimPy environment), ``plan``,
``engine`` (None while down), ``faults`` (an Injector), ``_trace``, ``now_us()``,
``crash(point, downtime)`` and ``restart()``. :class:`VirtualRuntime` adds the
clock, the crash and the guarded engine steps the outbox and leases runtimes
share; it needs ``start_us``, ``metrics_registry``, ``_procs`` (the processes
a crash stops) and ``_noun``.
"""
from __future__ import annotations

import simpy

from fanoutsim.kernel.faults import Crash, CrashAt, CrashRandomly, bind
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.store import open_store
from fanoutsim.kernel.timeutil import US, parse_start
from fanoutsim.kernel.trace import NullTrace, Trace


def until_ok(env, until) -> bool:
    """Check ``run(until=...)``: a number, not in the past. False: already there."""
    if until is None:
        return True
    if isinstance(until, bool) or not isinstance(until, (int, float)):
        raise TypeError(f"until must be a number of virtual seconds, got {until!r}")
    if until < env.now:
        raise ValueError(f"until={until} is earlier than now={env.now}")
    return until != env.now


class VirtualCrashes:
    def _schedule_crashes(self) -> None:
        """Start a process for each crash the plan puts at a time or a rate."""
        if self.plan is None:
            return
        for spec in self.plan.of(CrashAt):
            self.env.process(self._crash_at(spec))
        for spec in self.plan.of(CrashRandomly):
            self.env.process(self._crash_randomly(spec))

    def _restart_after(self, downtime: float):
        yield self.env.timeout(downtime)
        self.restart()

    def _crash_at(self, spec: CrashAt):
        if spec.at > self.env.now:
            yield self.env.timeout(spec.at - self.env.now)
        if self.engine is not None:
            self._trace.add(self.now_us(), "fault", "faults", detail=f"crash at t={spec.at}")
            self.crash("time", spec.downtime.sample(self.faults.rng(spec)))

    def _crash_randomly(self, spec: CrashRandomly):
        rng = self.faults.rng(spec)
        window = spec.window or (0.0, float("inf"))
        if window[0] > self.env.now:
            yield self.env.timeout(window[0] - self.env.now)
        while True:
            yield self.env.timeout(rng.expovariate(1.0 / spec.mean_gap))
            if self.env.now >= window[1]:
                return
            if self.engine is not None:
                self._trace.add(self.now_us(), "fault", "faults", detail="random crash")
                self.crash("random", spec.downtime.sample(rng))


class VirtualRuntime(VirtualCrashes):
    _noun = "runtime"

    def _open(self, seed: int, store, start, faults, trace: bool) -> None:
        """What every seeded SimPy run starts with: the clock, the store, the
        metrics, the trace and the bound fault plan."""
        self.start_us = parse_start(start)
        self.env = simpy.Environment()
        self.store = open_store(store)
        self.metrics_registry = Metrics()
        self._trace = Trace() if trace else NullTrace()
        self.plan, self.faults = bind(faults, seed=seed, start_us=self.start_us, trace=self._trace)

    # -- clock ----------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.env.now

    def now_us(self) -> int:
        return self.start_us + round(self.env.now * US)

    def _at(self, seconds: float | None) -> int | None:
        return None if seconds is None else self.start_us + round(seconds * US)

    # -- life cycle -----------------------------------------------------------
    @property
    def up(self) -> bool:
        return self.engine is not None

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        """The process dies now: every loop stops, the engine (and what it held in
        memory) is thrown away; a new one starts after ``downtime`` (None: at restart())."""
        if self.engine is None:
            return
        self.engine = None
        self._crashed()
        self._trace.add(self.now_us(), "crashed", "runtime", detail=point)
        self.metrics_registry.inc("fanoutsim_runner_crashes_total")
        active = self.env.active_process
        for proc in self._procs:
            if proc.is_alive and proc is not active:
                proc.interrupt("crash")
        self._procs = []
        if downtime is not None:
            self.env.process(self._restart_after(downtime))

    def _crashed(self) -> None:
        """A hook: what else dies with the process (a listener's connection)."""

    def _call(self, method: str, *args, engine=None, **kwargs):
        """One engine step now; a Crash inside it takes the process down (returns None)."""
        engine = engine or self.engine
        if engine is None or engine is not self.engine:
            return None
        try:
            return getattr(engine, method)(self.now_us(), *args, **kwargs)
        except Crash as c:
            self.crash(c.point, c.downtime)
            return None

    def _api(self, method: str, *args, **kwargs):
        if self.engine is None:
            raise RuntimeError(f"the {self._noun} is down (crashed); call restart() first")
        return self._call(method, *args, **kwargs)
