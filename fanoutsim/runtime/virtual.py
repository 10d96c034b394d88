"""Planned crashes on the virtual clock, for every SimPy runtime.

A runtime that mixes this in needs ``env`` (a SimPy environment), ``plan``,
``engine`` (None while down), ``faults`` (an Injector), ``_trace``, ``now_us()``,
``crash(point, downtime)`` and ``restart()``.
"""
from __future__ import annotations

from ..faults import CrashAt, CrashRandomly


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
