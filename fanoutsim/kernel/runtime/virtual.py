"""The virtual-clock runtime: one SimPy runtime for every design.

:class:`VirtualRuntime` owns the clock (virtual seconds since ``start``; the
store sees epoch microseconds), the store, the metrics, the trace, the bound
fault plan, the incarnations (restart, crash, restart after a downtime) and
the guarded engine step ``_call(engine.step, ...)``. A design's SimPy class
subclasses it and implements the :mod:`.binding` hooks. :class:`VirtualCrashes`
turns a plan's ``CrashAt`` and ``CrashRandomly`` into processes that crash the
runtime if it is up.
"""
from __future__ import annotations

import math

import simpy

from fanoutsim.kernel.faults import Crash, CrashAt, CrashRandomly, bind
from fanoutsim.kernel.faults.plan import check_faults
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.runtime.binding import check_downtime
from fanoutsim.kernel.store import open_store
from fanoutsim.kernel.store.record import open_claimed
from fanoutsim.kernel.timeutil import LAST_US, US, parse_start, past_the_clock
from fanoutsim.kernel.trace import NullTrace, Trace
from fanoutsim.kernel.validate import is_real


def until_ok(env, until) -> bool:
    """Check ``run(until=...)``: a finite number of virtual seconds, not in the
    past. False: already there. Required: the loops tick forever, so a run
    without an end would never return."""
    if until is None:
        raise ValueError(f"until is required: the engine's loops tick forever, so run(until=...) needs "
                         f"an end in virtual seconds (now={env.now})")
    if not is_real(until):
        raise TypeError(f"until must be a number of virtual seconds, got {until!r}")
    if not math.isfinite(until):
        raise ValueError(f"until must be a finite number of virtual seconds, got {until!r}")
    if until < env.now:
        raise ValueError(f"until={until} is earlier than now={env.now}")
    return until != env.now


def delay_to(now: float, at: float) -> float:
    """The delay whose timeout fires at exactly ``at``: SimPy schedules at
    ``now + delay``, and ``now + (at - now)`` can miss ``at`` by an ulp."""
    delay = at - now
    while now + delay < at:
        delay = math.nextafter(delay, math.inf)
    while now + delay > at:
        delay = math.nextafter(delay, -math.inf)
    return delay


class VirtualCrashes:
    def _schedule_crashes(self) -> None:
        """Start a process for each crash the plan puts at a time or a rate."""
        if self.plan is None:
            return
        for spec in self.plan.of(CrashAt):
            self.env.process(self._crash_at(spec))
        for spec in self.plan.of(CrashRandomly):
            self.env.process(self._crash_randomly(spec))

    def _restart_after(self, downtime: float, incarnation: int):
        yield self.env.timeout(downtime)
        # only the incarnation that crashed: one restarted by hand meanwhile (and
        # perhaps crashed again, to stay down) is not revived by this old timer
        if self.incarnation == incarnation:
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
    """The SimPy runtime every design's virtual-clock class subclasses; the
    design implements the :class:`~.binding.Binding` hooks (``_new_engine``,
    ``_start_loops``, ``_crashed``) and sets ``_noun`` ("runner", "dispatcher",
    "node": what the down message calls the process)."""

    _noun = "runtime"
    # the fault kinds and crash points the design has (None: any), checked at construction
    fault_kinds: tuple[str, ...] | None = None
    crash_points: tuple[str, ...] | None = None

    def _open(self, seed: int, store, start, faults, trace: bool, opener=open_store) -> None:
        """What every seeded SimPy run starts with: the clock, the store
        (``opener(store)``: the design's, with every registered design's
        tables), the metrics, the trace and the bound fault plan; no
        incarnation yet (the first :meth:`restart` makes incarnation 0)."""
        check_faults(faults, design=getattr(self, "design", type(self).__name__),
                     kinds=self.fault_kinds, points=self.crash_points)
        self.start_us = parse_start(start)
        self.env = simpy.Environment()
        # recorded as this design's; a store of another design is refused by name
        self.store = open_claimed(opener, store, getattr(self, "design", None))
        self.metrics_registry = Metrics()
        self._trace = Trace() if trace else NullTrace()
        self.plan, self.faults = bind(faults, seed=seed, start_us=self.start_us, trace=self._trace)
        self.engine = None
        self.incarnation = -1
        self._procs: list[simpy.Process] = []
        self._sleepers: list = []  # (event, ready) of loops asleep until a write (_until_written)
        self._slept_at = 0         # store.writes when the sleepers were last asked

    @property
    def traced(self) -> bool:
        """Whether this run records its trace (``trace=True``): what a checker reads."""
        return not isinstance(self._trace, NullTrace)

    # -- clock ----------------------------------------------------------------
    @property
    def now(self) -> float:
        """Virtual seconds since ``start``."""
        return self.env.now

    def now_us(self) -> int:
        return self.start_us + round(self.env.now * US)

    def _at(self, seconds: float | None) -> int | None:
        return None if seconds is None else self.start_us + round(seconds * US)

    # -- life cycle -----------------------------------------------------------
    @property
    def up(self) -> bool:
        return self.engine is not None

    def restart(self) -> None:
        """Start a new incarnation over the same store (a no-op while up).
        Every in-memory object of the last one is gone; the tables are not."""
        self._refuse_closed()
        if self.engine is not None:
            return
        self.incarnation += 1
        self._trace.attempt = self.incarnation
        self.engine = self._new_engine(self.incarnation)
        if self.incarnation:
            self._trace.add(self.now_us(), "restarted", "runtime")
        self._procs = []
        self._start_loops(self.engine)

    def _spawn(self, loop) -> simpy.Process:
        """A loop (a generator) of the live incarnation, as a SimPy process a crash interrupts."""
        proc = self.env.process(loop)
        self._procs.append(proc)
        return proc

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        """The process dies now: every loop stops, the engine (and what it held in
        memory) is thrown away; a new one starts after ``downtime`` (None: at restart())."""
        check_downtime(downtime)
        if self.engine is None:
            return
        self.engine = None
        self._sleepers = []  # their loops die with the process
        self._crashed()
        self._trace.add(self.now_us(), "crashed", "runtime", detail=point)
        self.metrics_registry.inc("fanoutsim_runner_crashes_total")
        active = self.env.active_process
        for proc in self._procs:
            if proc.is_alive and proc is not active:
                proc.interrupt("crash")
        self._procs = []
        if downtime is not None:
            self.env.process(self._restart_after(float(downtime), self.incarnation))

    # -- closing --------------------------------------------------------------------
    _closed = False

    def close(self) -> None:
        """Release what the run holds: its loops stop and its store closes (a
        DuckDB file is free again; a PostgreSQL connection, and the throwaway
        server of ``store="postgres"``, end). Frames read before stay; the run
        goes no further (``run`` and the API raise). A second close does nothing."""
        if self._closed:
            return
        self._closed = True
        if self.engine is not None:  # the process ends, as at a crash, but nothing is traced
            self.engine, self._sleepers = None, []
            self._crashed()
            for proc in self._procs:
                if proc.is_alive and proc is not self.env.active_process:
                    proc.interrupt("close")
            self._procs = []
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _refuse_closed(self) -> None:
        if self._closed:
            raise RuntimeError(f"the {type(self).__name__} is closed: its store is released; make a new one")

    # -- the binding's defaults ---------------------------------------------------
    def _new_engine(self, incarnation: int):
        raise NotImplementedError(f"{type(self).__name__} must implement _new_engine(incarnation)")

    def _start_loops(self, engine) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _start_loops(engine)")

    def _crashed(self) -> None:
        """A hook: what else dies with the process (a listener's connection)."""

    def _live(self, engine) -> bool:
        """Whether ``engine`` belongs to the live incarnation (replicas may too)."""
        return engine is self.engine

    def _down_message(self) -> str:
        return f"the {self._noun} is down (crashed); call restart() first"

    # -- engine steps -------------------------------------------------------------
    def _call(self, step, *args, **kwargs):
        """One engine step now, ``step`` a bound method (``engine.fetch``); None if
        its engine is not the live incarnation, or if a Crash inside it took
        the process down."""
        if not self._live(step.__self__):
            return None
        try:
            out = step(self.now_us(), *args, **kwargs)
        except Crash as c:
            self.crash(c.point, c.downtime)
            return None
        if self._sleepers and self.store.writes != self._slept_at:
            self._wake_sleepers()
        return out

    def _advance(self, until: float) -> None:
        """``env.run(until)``, once the sleepers have seen rows written around
        the steps since the last run (straight to the store).

        Again while short of ``until``: a run that an error ended left its stop
        in SimPy's queue, and that stop ends the next run early. Stopping and
        going on changes no order of events."""
        self._refuse_closed()
        until = float(until)
        if self.start_us + until * US > LAST_US:  # a stamp past it would overflow mid-run
            raise ValueError(past_the_clock(self.start_us, until))
        if self._sleepers and self.store.writes != self._slept_at:
            self._wake_sleepers()
        self.env.run(until=until)
        while self.env.now < until:
            self.env.run(until=until)

    # -- sleeping until a write ------------------------------------------------------
    def _until_written(self, ready) -> simpy.Event:
        """An event that fires once a step has committed a write after which
        ``ready()`` is true: a loop whose every pass would find nothing until
        then waits on it instead of ticking (it must then resume on the grid
        it would have kept, so that the trace stays the same). ``ready`` is
        asked only after steps that wrote (``store.writes`` moved)."""
        event = self.env.event()
        if not self._sleepers:  # others may not have seen the writes since they were last asked
            self._slept_at = self.store.writes
        self._sleepers.append((event, ready))
        return event

    def _wake_sleepers(self) -> None:
        self._slept_at = self.store.writes
        waiting = []
        for event, ready in self._sleepers:
            if ready():
                event.succeed()
            else:
                waiting.append((event, ready))
        self._sleepers = waiting

    def _api(self, step, *args, **kwargs):
        """A step asked for from outside the loops: ``step`` is the engine
        class's function (``OutboxEngine.commit``), run on the live engine; an
        error while the process is down."""
        engine = self.engine
        if engine is None:
            self._refuse_closed()
            raise RuntimeError(self._down_message())
        return self._call(step.__get__(engine), *args, **kwargs)
