"""The virtual-clock driver: one SimPy runtime for every design.

:class:`VirtualRuntime` owns the clock (virtual seconds since ``start``; the
store sees epoch microseconds), the store, the metrics, the trace, the bound
fault plan, the incarnations (restart, crash, restart after a downtime) and
the guarded engine step ``_call(engine.step, ...)``. A design's loops are
generators that yield the requests of :mod:`.loops`; each runs as a SimPy
process of :meth:`VirtualRuntime._drive`, which answers a request with the
event it names (``Sleep`` and ``Work`` a timeout, ``Wait`` the wake or a
timeout, ``Until`` a timeout that lands on the very float asked for). The
process yields exactly the events the loop asks for, so a loop resumes in the
order SimPy gives it, as if it yielded the events itself.
"""

from __future__ import annotations

import math
import os
import random
import threading
from collections.abc import Callable, Generator
from contextlib import nullcontext, suppress
from datetime import datetime
from functools import partial
from typing import Any, Self, TypeVar

import simpy

from fanoutsim.kernel.faults import Crash
from fanoutsim.kernel.gcpause import run_frozen
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.runtime.binding import check_downtime
from fanoutsim.kernel.runtime.driver import Driver, Loop
from fanoutsim.kernel.runtime.loops import Sleep, Until, Wait, Work
from fanoutsim.kernel.store import Store, open_store
from fanoutsim.kernel.store.record import record_end
from fanoutsim.kernel.timeutil import LAST_US, US, parse_start, past_the_clock
from fanoutsim.kernel.trace import SpilledTrace, Trace, TraceSchema
from fanoutsim.kernel.validate import is_real

# no threads under SimPy: what the wall clock locks, nothing needs to here. A
# re-entrant lock of the run's own thread is never contended (so never waits)
# and, unlike contextlib.nullcontext, enters and exits in C: the executor and
# every workflow body pass through such a with-block.
_NO_LOCK = nullcontext()
T = TypeVar("T")


def until_ok(env: simpy.Environment, until: Any) -> bool:
    """Check ``run(until=...)``: a finite number of virtual seconds, not in the
    past. False: already there. Required: the loops tick forever, so a run
    without an end would never return."""
    if until is None:
        raise ValueError(
            f"until is required: the engine's loops tick forever, so run(until=...) needs "
            f"an end in virtual seconds (now={env.now})"
        )
    if not is_real(until):
        raise TypeError(f"until must be a number of virtual seconds, got {until!r}")
    if not math.isfinite(until):
        raise ValueError(f"until must be a finite number of virtual seconds, got {until!r}")
    if until < env.now:
        raise ValueError(f"until={until} is earlier than now={env.now}")
    return bool(until != env.now)


def _recorder(trace: object) -> Callable[[TraceSchema], Trace] | None:
    """What records a run's trace, from a face's ``trace`` argument."""
    if isinstance(trace, (str, os.PathLike)):
        return partial(SpilledTrace, path=trace)
    if not isinstance(trace, bool):
        raise TypeError(f"trace must be True, False or a folder to spill it to (str or path), got {trace!r}")
    return Trace if trace else None


def delay_to(now: float, at: float) -> float:
    """The delay whose timeout fires at exactly ``at``: SimPy schedules at
    ``now + delay``, and ``now + (at - now)`` can miss ``at`` by an ulp."""
    delay = at - now
    while now + delay < at:
        delay = math.nextafter(delay, math.inf)
    while now + delay > at:
        delay = math.nextafter(delay, -math.inf)
    return delay


class VirtualRuntime(Driver):
    """The SimPy driver every design's virtual-clock face subclasses; the
    design implements the :class:`~.binding.Binding` hooks (``_new_engine``,
    ``_start_loops``, ``_crashed``) and sets ``_noun`` ("runner", "dispatcher",
    "node": what the down message calls the process)."""

    _lifecycle = _NO_LOCK
    _proc: Any = _NO_LOCK  # each run's own RLock (see _open)
    #: SimPy's environment: the virtual clock and its event queue (``env.now`` is :attr:`now`).
    env: simpy.Environment

    def _open(
        self,
        seed: int,
        store: str | Store,
        start: str | datetime | None,
        faults: object,
        trace: bool | str | os.PathLike[str],
        opener: Callable[[Any], Store] = open_store,
    ) -> None:
        """What every seeded SimPy run starts with: the clock, the store
        (``opener(store)``: the design's, with every registered design's
        tables), the metrics, the trace and the bound fault plan; no
        incarnation yet (the first :meth:`restart` makes incarnation 0).
        ``trace``: True (kept in memory), False (none) or a folder to spill
        it to in Parquet chunks (:class:`~fanoutsim.kernel.trace.SpilledTrace`)."""
        self._check_faults(faults)
        self.start_us = parse_start(start)
        self._proc = threading.RLock()  # see _NO_LOCK
        self.env = simpy.Environment()
        self.store = self._claim(opener, store)
        self._keep_end()  # the store's clock is this one from now on
        self._observe(seed, faults, Metrics(), _recorder(trace))
        self.engine = None
        self.incarnation = -1
        self._looping = False  # the incarnation's loops run (spawn more now)
        self._procs: list[simpy.Process] = []
        self._procs_cap = 64
        self._soon: list[Loop] = []  # tasks spawned, to start once their spawner's wait is scheduled
        self._named: dict[Any, simpy.Process] = {}  # the incarnation's loops by key
        self._armed: dict[Any, simpy.Event] = {}  # the wakes loops armed, by key
        self._sleepers: list[
            tuple[simpy.Event, Callable[[], bool]]
        ] = []  # (event, ready) of loops asleep until a write (_until_written)
        self._slept_at = 0  # store.writes when the sleepers were last asked

    def _rng(self, name: str, *parts: object) -> random.Random:
        """The seeded stream ``name`` of this run (``fanoutsim:name:seed:parts``)."""
        return random.Random(":".join(("fanoutsim", name, str(self.seed), *map(str, parts))))

    # -- clock ----------------------------------------------------------------
    @property
    def now(self) -> float:
        """Virtual seconds since ``start``."""
        return self.env._now  # (SimPy's now is a property of its own: a call less)

    _stamped_at = math.nan  # the virtual time of the last stamp, and the stamp
    _stamp = 0

    def now_us(self) -> int:
        """Now as the store stamps it: epoch microseconds (:attr:`start_us` plus
        virtual time), the same int for every step of an instant (one object,
        however many rows and trace events keep it)."""
        now = self.env._now  # env.now is a property: a call per stamp
        if now != self._stamped_at:
            self._stamped_at, self._stamp = now, self.start_us + round(now * US)
        return self._stamp

    def clock(self) -> float:
        """A mark for ``Work(seconds, since=mark)``: no virtual time passes inside a step."""
        return self.env._now

    def _at(self, seconds: float | None) -> int | None:
        return None if seconds is None else self.start_us + round(seconds * US)

    # -- life cycle -----------------------------------------------------------
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
        self._named = {}
        self._looping = True
        self._start_loops(self.engine)

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        """The process dies now: every loop stops, the engine (and what it held in
        memory) is thrown away; a new one starts after ``downtime`` (None: at restart())."""
        check_downtime(downtime)
        if self.engine is None:
            return
        self.engine = None
        self._looping = False
        self._sleepers = []  # their loops die with the process
        self._soon = []
        self._armed = {}
        self._named = {}
        self._crashed()
        self._trace.add(self.now_us(), "crashed", "runtime", detail=point)
        self.metrics_registry.inc("fanoutsim_runner_crashes_total")
        active = self.env.active_process
        for proc in self._procs:
            if proc.is_alive and proc is not active:
                proc.interrupt("crash")
        self._procs = []
        if downtime is not None:
            self._service(self._restart_after(float(downtime), self.incarnation))

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
            self.engine, self._sleepers, self._soon, self._looping = None, [], [], False
            self._crashed()
            for proc in self._procs:
                if proc.is_alive and proc is not self.env.active_process:
                    proc.interrupt("close")
            self._procs = []
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refuse_closed(self) -> None:
        if self._closed:
            raise RuntimeError(f"the {type(self).__name__} is closed: its store is released; make a new one")

    # -- loops ------------------------------------------------------------------
    def _event(self, request: Any) -> simpy.Event:
        """The SimPy event that answers ``request``."""
        env = self.env
        kind = type(request)
        if kind is Sleep:
            return env.timeout(request.seconds)
        if kind is Wait:
            wake: simpy.Event = request.wake
            if request.timeout is None:
                return wake
            return env.any_of([wake, env.timeout(request.timeout)])
        if kind is Work:
            since = request.since
            return env.timeout(request.seconds if since is None else request.seconds - (env.now - since))
        if kind is Until:
            return env.timeout(delay_to(env.now, request.at) if request.at > env.now else 0.0)
        raise TypeError(f"a loop yields Sleep, Until, Work or Wait, not {request!r}")

    def _drive(self, loop: Loop) -> Generator[simpy.Event, Any, Any]:
        """The SimPy process of one loop: each request answered with its event.

        A wait of no time (``Sleep(0)``: a poll's fetch latency of 0) while
        nothing else is due at this instant and no task waits to start is
        answered at once: its timeout would be the very next event, so the
        loop would resume right here, in the same order, an event later."""
        env, event_of = self.env, self._event
        timeout, queue = env.timeout, env._queue
        try:
            request = next(loop)
            while True:
                kind = type(request)  # the common requests inline: this is every loop's hot path
                event: simpy.Event
                if kind is Sleep:
                    if request.seconds == 0 and not self._soon and (not queue or queue[0][0] > env._now):
                        request = next(loop)
                        continue
                    event = timeout(request.seconds)
                elif kind is Work:
                    since = request.since
                    event = timeout(request.seconds if since is None else request.seconds - (env.now - since))
                elif kind is Wait and request.timeout is None:
                    event = request.wake
                elif kind is Until:  # a tick of a loop's grid
                    at, now = request.at, env._now
                    delay = at - now
                    if delay <= 0:
                        delay = 0.0
                    elif now + delay != at:  # (most land exactly: delay_to only for those that miss)
                        delay = delay_to(now, at)
                    event = timeout(delay)
                else:
                    event = event_of(request)
                if self._soon:  # tasks the loop spawned start once its own wait is scheduled
                    self._start_soon()
                try:
                    yield event
                except simpy.Interrupt:  # its incarnation died
                    loop.close()
                    return
                request = next(loop)
        except StopIteration as end:
            return end.value  # the process's value, for whoever waits on it
        except Crash as c:  # a step the loop called without _call
            self.crash(c.point, c.downtime)

    # -- tasks: short loops spawned in numbers (a workflow body) --------------------
    def _spawn_task(self, loop: Loop, name: str = "task") -> None:
        """A short loop of the live incarnation (a claimed execution's body). Under
        SimPy it needs no process of its own: it starts as soon as the loop that
        spawned it has scheduled its own wait (where a process started for it
        would have begun, before anything else at this instant), runs on event
        callbacks, and ends at its next resume if its incarnation died."""
        self._soon.append(loop)

    def _start_soon(self) -> None:
        soon, self._soon = self._soon, []
        self._starting = True
        try:
            for loop in soon:
                self._step_task(loop, self.incarnation)
        finally:
            self._starting, self._shared = False, None

    # while tasks start together: the end, the queue's length after it was
    # scheduled, and the event of the last one's wait (see _task_event)
    _starting = False
    _shared: tuple[float, int, simpy.Event] | None = None

    def _step_task(self, loop: Loop, incarnation: int, _event: object = None) -> None:
        if incarnation != self.incarnation or self.engine is None:
            loop.close()  # its incarnation died meanwhile
            return
        try:
            request = next(loop)
        except StopIteration:
            return
        except Crash as c:
            self.crash(c.point, c.downtime)
            return
        self._task_event(request).callbacks.append(partial(self._step_task, loop, incarnation))

    def _task_event(self, request: Any) -> simpy.Event:
        """The event a task waits on. The tasks started together (a claim's
        workflow bodies) whose waits end at one instant share one timeout:
        theirs would have been consecutive events (nothing was scheduled
        between them), so one event whose callbacks resume each in turn runs
        them in the same order, at the same time — one event per batch."""
        env, shared = self.env, self._shared
        if type(request) is not Work:
            return self._event(request)
        since = request.since
        at = env._now + (request.seconds if since is None else request.seconds - (env._now - since))
        if shared is not None and shared[0] == at and shared[1] == len(env._queue):
            return shared[2]
        event = self._event(request)
        if self._starting:
            self._shared = (at, len(env._queue), event)
        return event

    def _spawn(self, loop: Loop, name: str = "loop", key: Any = None) -> simpy.Process:
        """A loop of the live incarnation, as a SimPy process a crash interrupts;
        ``key`` names it for :meth:`_loop_running` and :meth:`_cancel`."""
        proc = self.env.process(self._drive(loop))
        procs = self._procs
        procs.append(proc)
        if len(procs) > self._procs_cap:  # finished ones go, in amortized O(1)
            self._procs = [p for p in procs if p.is_alive]
            self._procs_cap = 2 * len(self._procs) + 64
        if key is not None:
            self._named[key] = proc
        return proc

    def _service(self, loop: Loop, name: str = "service") -> simpy.Process:
        """A loop of the runtime: no crash stops it."""
        return self.env.process(self._drive(loop))

    def _later(self, delay: float, fn: Callable[[], object]) -> None:
        """``fn()`` ``delay`` virtual seconds from now."""
        self._service(self._later_loop(delay, fn))

    def _loop_running(self, key: Any) -> bool:
        proc = self._named.get(key)
        return proc is not None and proc.is_alive

    def _cancel(self, key: Any) -> None:
        """Stop the incarnation's loop named ``key`` (if it runs)."""
        proc = self._named.pop(key, None)
        if proc is not None and proc.is_alive and proc is not self.env.active_process:
            proc.interrupt("cancelled")

    # -- wakes ------------------------------------------------------------------
    def _arm(self, key: Any) -> simpy.Event:
        """A new wake for ``key`` (the last one's signal no longer counts)."""
        event = self._armed[key] = self.env.event()
        return event

    @staticmethod
    def _fire(wake: simpy.Event) -> None:
        if not wake.triggered:
            wake.succeed()

    @staticmethod
    def _woken(wake: simpy.Event) -> bool:
        return wake.triggered

    def _until_written(self, ready: Callable[[], bool], since: int) -> simpy.Event:
        """A wake that fires once a step has committed a write after which
        ``ready()`` is true: a loop whose every pass would find nothing until
        then waits on it instead of ticking (it must then resume on the grid
        it would have kept, so that the trace stays the same). ``ready`` is
        asked only after steps that wrote (``store.writes`` moved). Fired at
        once if the store was written after ``since``, the ``store.writes``
        the loop saw in its step that found nothing (under SimPy nothing runs
        between that step and this call, so it never is)."""
        event = self.env.event()
        if self.store.writes != since:
            return event.succeed()
        if not self._sleepers:  # others may not have seen the writes since they were last asked
            self._slept_at = self.store.writes
        self._sleepers.append((event, ready))
        return event

    # -- engine steps -------------------------------------------------------------
    def _running(self, engine: Any) -> bool:
        """Whether a loop of ``engine`` should take more work: its incarnation lives."""
        return engine is self.engine or self._live(engine)

    def _call(self, step: Callable[..., T], *args: Any, _now: int | None = None, **kwargs: Any) -> T | None:
        """One engine step now, ``step`` a bound method (``engine.fetch``); None if
        its engine is not the live incarnation, or if a Crash inside it took
        the process down."""
        engine = step.__self__  # type: ignore[attr-defined]  # a bound method of an engine
        if engine is not self.engine and not self._live(engine):
            return None
        if _now is None:
            now = self.env._now
            if now != self._stamped_at:
                self._stamped_at, self._stamp = now, self.start_us + round(now * US)
            _now = self._stamp
        try:
            out = step(_now, *args, **kwargs)
        except Crash as c:
            self.crash(c.point, c.downtime)
            return None
        if self._sleepers and self.store.writes != self._slept_at:
            self._wake_sleepers()
        return out

    _outside = _call  # no lock to stay out of under SimPy

    def _api(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        """A step asked for from outside the loops: ``step`` is the engine
        class's function (``OutboxEngine.commit``), run on the live engine; an
        error while the process is down."""
        if self.engine is None:
            self._refuse_closed()
        return self._call(step.__get__(self._engine_or_raise()), *args, **kwargs)

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
        if self._soon:  # tasks spawned from outside a loop
            self._start_soon()
        try:
            with run_frozen():  # the collector's full passes skip what existed before the run
                self.env.run(until=until)
                while self.env.now < until:
                    self.env.run(until=until)
        except BaseException:
            with suppress(Exception):  # the run's own error is the one to raise
                self._keep_end()
            raise
        self._keep_end()

    def _keep_end(self) -> None:
        """Record in the store where the clock stopped: its rows are stamped on
        this clock, so ``status`` measures their ages (lags) as of then, as
        the run's report does, not against the wall clock."""
        record_end(self.store, self.now_us())  # (a memory store keeps nothing: record_end says so)
