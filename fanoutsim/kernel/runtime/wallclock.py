"""Planned crashes and steady ticks on the wall clock, for every threaded runtime.

The wall-clock counterpart of :mod:`.virtual`: a fault plan's ``CrashAt`` and
``CrashRandomly`` say *when* the process dies in seconds since the run's
start, and here a thread per spec sleeps until then (``Event.wait``, so a stop
wakes it) and crashes the runtime if it is up. :func:`every` is the loop of a
periodic step (a safety poll, a retention pass) that skips the ticks a slow
step overran instead of bunching them.

A runtime that mixes :class:`WallCrashes` in needs ``plan`` (a FaultPlan or
None), ``faults`` (its Injector: seeded RNGs per spec), ``engine`` (None while
down), ``_trace``, ``now`` (seconds since start) and ``crash(point, downtime)``.
:class:`WallRuntime` adds what every threaded runtime's life cycle shares: the
clock, ``close`` and the ``with`` block; it needs ``start_us``, ``_state``,
``_lifecycle``, ``store``, ``start()``, ``stop()`` and ``_boot()``.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from fanoutsim.kernel.faults import Crash, CrashAt, CrashRandomly, bind
from fanoutsim.kernel.faults.plan import check_faults
from fanoutsim.kernel.ids import FreshIdSource
from fanoutsim.kernel.metrics import LockedMetrics
from fanoutsim.kernel.runtime.binding import check_downtime
from fanoutsim.kernel.store import open_store
from fanoutsim.kernel.store.record import open_claimed
from fanoutsim.kernel.timeutil import US
from fanoutsim.kernel.trace import LockedTrace, NullTrace
from fanoutsim.kernel.validate import is_real


def wall_us() -> int:
    """The wall clock, UTC microseconds since the epoch."""
    return time.time_ns() // 1000


def every(stop: threading.Event, interval: float, step: Callable[[], object],
          alive: Callable[[], bool] = lambda: True) -> None:
    """Call ``step`` now and then every ``interval`` seconds until ``stop`` is
    set or ``alive()`` is false; ticks a slow step overran are skipped, not bunched."""
    next_tick = time.monotonic()
    while not stop.is_set() and alive():
        step()
        next_tick += interval
        delay = next_tick - time.monotonic()
        if delay < 0:
            next_tick, delay = time.monotonic(), 0.0
        stop.wait(delay)


class WallCrashes:
    def _schedule_crashes(self, closing: threading.Event) -> list[threading.Thread]:
        """Start a daemon thread for each crash the plan puts at a time or a rate;
        they end when ``closing`` is set (the runtime stopped)."""
        if self.plan is None:
            return []
        jobs = [(self._crash_at, spec) for spec in self.plan.of(CrashAt)]
        jobs += [(self._crash_randomly, spec) for spec in self.plan.of(CrashRandomly)]
        threads = [threading.Thread(target=fn, args=(spec, closing), name=f"fanoutsim-{spec.kind}", daemon=True)
                   for fn, spec in jobs]
        for t in threads:
            t.start()
        return threads

    def _crash_now(self, point: str, detail: str, downtime: float) -> None:
        if self.engine is not None:  # a crash while down is no crash
            self._trace.add(wall_us(), "fault", "faults", detail=detail)
            self.crash(point, downtime)

    def _crash_at(self, spec: CrashAt, closing: threading.Event) -> None:
        if closing.wait(max(0.0, spec.at - self.now)):
            return
        self._crash_now("time", f"crash at t={spec.at}", spec.downtime.sample(self.faults.rng(spec)))

    def _crash_randomly(self, spec: CrashRandomly, closing: threading.Event) -> None:
        rng = self.faults.rng(spec)
        start, end = spec.window or (0.0, float("inf"))
        if start > self.now and closing.wait(start - self.now):
            return
        while not closing.wait(rng.expovariate(1.0 / spec.mean_gap)):
            if self.now >= end:
                return
            self._crash_now("random", "random crash", spec.downtime.sample(rng))


class WallRuntime(WallCrashes):
    # the fault kinds and crash points the design has (None: any), checked at construction
    fault_kinds: tuple[str, ...] | None = None
    crash_points: tuple[str, ...] | None = None

    # -- clock ------------------------------------------------------------------
    def now_us(self) -> int:
        return wall_us()

    @property
    def now(self) -> float:
        """Seconds since :meth:`start` (before it: since the runtime was made)."""
        return (wall_us() - self.start_us) / US

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def traced(self) -> bool:
        """Whether this run records its trace (``trace=True``): what a checker reads."""
        return not isinstance(self._trace, NullTrace)

    @property
    def up(self) -> bool:
        return self.engine is not None

    # -- life cycle -------------------------------------------------------------
    def close(self) -> None:
        """Stop, then release the store (and its file)."""
        self.stop()
        with self._lifecycle:
            if self._state != "closed":
                self._state = "closed"
                self.store.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _restart(self) -> None:
        """After a crash's downtime: a new incarnation, if the runtime still runs."""
        with self._lifecycle:
            if self._state == "running" and self.engine is None:
                self._boot()

    def wait(self, seconds: float) -> None:
        """Let the runtime run for ``seconds`` of wall time (a plain sleep)."""
        if not is_real(seconds) or not 0 <= seconds < float("inf"):
            raise ValueError(f"wait(seconds): must be a finite number of seconds >= 0, got {seconds!r}")
        time.sleep(seconds)


class SteppedWallRuntime(WallRuntime):
    """The threaded runtime every design's wall-clock class subclasses. Every
    store step holds one lock, ``_proc``, as does :meth:`crash`: a crash then
    falls *between* two steps, never inside one, and each step first checks
    that its incarnation is still the live one (``_call(engine.step, ...)``).

    It owns the life cycle — :meth:`start`, a crash's restart after its
    downtime, :meth:`restart`, :meth:`stop` (graceful and bounded), ``close``
    — and each incarnation's ``runner_log`` row, its ``_stop`` event (take no
    new work) and ``_killed`` event (abandon the work in hand: a crash, or a
    stop past ``stop_timeout``). The design implements the :mod:`.binding`
    hooks ``_new_engine(incarnation)``, ``_start_loops(engine)`` (threads via
    :meth:`_spawn`; ``_proc`` is held) and ``_crashed()`` (what dies with the
    process, at a crash or at the end of a stop), and may implement
    ``_wake_loops()`` (wake the loops' sleeps so that they see ``_stop``),
    ``_started(start_us)`` (clocks of its own, checks before the first start)
    and ``_down_message()``; it sets ``_noun`` ("runner", "dispatcher", "node")
    and makes incarnation 0's engine in its ``__init__``
    (``self.engine = self._new_engine(0)``), so the API works before start."""

    _noun = "runtime"

    def _open(self, seed: int, store, faults, trace: bool, stop_timeout, opener=open_store) -> None:
        """What every threaded runtime starts with: the file (``opener(store)``:
        the design's, with every registered design's tables; a bad, newer or
        locked one fails here, untouched), the count of earlier starts on it (so
        no RNG stream repeats an earlier process's), the clock, locked metrics
        and trace, the bound fault plan and the life cycle's locks and events."""
        if not is_real(stop_timeout) or not stop_timeout >= 0:
            raise ValueError(f"stop_timeout must be seconds >= 0, got {stop_timeout!r}")
        self.stop_timeout = float(stop_timeout)
        check_faults(faults, design=getattr(self, "design", type(self).__name__),
                     kinds=self.fault_kinds, points=self.crash_points)
        # recorded as this design's; a store of another design is refused by name
        self.store = open_claimed(opener, store, getattr(self, "design", None))
        self._starts = sum(1 for r in self.store.rows("runner_log") if r["event"] == "start")
        self.start_us = wall_us()
        self.metrics_registry = LockedMetrics()
        self._trace = LockedTrace() if trace else NullTrace()
        self.plan, self.faults = bind(faults, seed=seed, start_us=self.start_us, trace=self._trace)
        self.engine = None
        self.incarnation = 0
        self._state = "created"
        # Lock order: _lifecycle, then _proc (then the design's own, the store's and
        # the trace's). _proc is held for every store step and by crash().
        self._lifecycle = threading.RLock()
        self._proc = threading.RLock()
        self._stop = threading.Event()     # this incarnation's loops: take no new work
        self._killed = threading.Event()   # ... and abandon the work in hand (a crash)
        self._closing = threading.Event()  # the runtime's own threads (planned crashes)
        self._threads: list[threading.Thread] = []
        self._restart_timer: threading.Timer | None = None
        # ids must not repeat those of an earlier process on this file, nor of any
        # other wall-clock run: drawn from the OS's entropy, not from the seed
        self.ids = FreshIdSource()

    # -- life cycle ---------------------------------------------------------------
    def start(self):
        """Start the threads in the background and return at once."""
        with self._lifecycle:
            if self._state == "running":
                raise RuntimeError(f"the {self._noun} is already running")
            if self._state in ("stopped", "closed"):
                raise RuntimeError(f"the {self._noun} was {self._state}; "
                                   f"make a new {type(self).__name__} over the same store")
            # windows and times are seconds since now; the injector keeps its pass counts
            self.start_us = wall_us()
            self._started(self.start_us)
            if hasattr(self.faults, "start_us"):
                self.faults.start_us = self.start_us
            self._state = "running"
            self._closing = threading.Event()
            self._schedule_crashes(self._closing)
            self._boot()
        return self

    def _boot(self) -> None:
        """Start one incarnation: its log row, a new engine if the last one died,
        its loops."""
        with self.store.transaction() as tx:
            tx.log_runner(wall_us(), "start", f"pid {os.getpid()}")
        with self._proc:
            if self.engine is None:
                self.incarnation += 1
                self._trace.attempt = self.incarnation
                self.engine = self._new_engine(self.incarnation)
                self._trace.add(wall_us(), "restarted", "runtime")
            self._stop, self._killed = threading.Event(), threading.Event()
            self._threads = []
            self._start_loops(self.engine)

    def _spawn(self, name: str, fn, *args) -> threading.Thread:
        """A thread of this incarnation (a stop joins it); callers hold ``_proc``."""
        t = threading.Thread(target=fn, args=args, name=f"fanoutsim-{self.design}-{name}", daemon=True)
        self._threads = [x for x in self._threads if x.is_alive()] + [t]  # finished ones go
        t.start()
        return t

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        """The process dies now: loops stop without ceremony, the work in hand is
        abandoned, what it held in memory is gone. It restarts by itself after
        ``downtime`` seconds (None: at :meth:`restart`). A crash while a stop
        waits for its threads ends the wait, with no restart."""
        check_downtime(downtime)
        with self._proc:
            if self.engine is None:
                return
            self.engine = None
            self._crashed()
            self._trace.add(wall_us(), "crashed", "runtime", detail=point)
            self.metrics_registry.inc("fanoutsim_runner_crashes_total")
            self._stop.set()
            self._wake_loops()
            self._killed.set()
            self._restart_later(downtime)

    def _restart_later(self, downtime: float | None) -> None:
        """After a crash (``_proc`` held): a new incarnation ``downtime`` seconds on."""
        if downtime is not None and self._state == "running":
            self._restart_timer = threading.Timer(downtime, self._restart)
            self._restart_timer.daemon = True
            self._restart_timer.start()

    def restart(self) -> None:
        """Restart after a crash now (a no-op while it is up or not running)."""
        with self._lifecycle:
            if self._restart_timer is not None:
                self._restart_timer.cancel()
            self._restart()

    def stop(self) -> None:
        """Stop the threads: no new work; the work in hand finishes (up to
        ``stop_timeout`` seconds; what still runs then is abandoned), nothing is
        half-written. A no-op if not running."""
        with self._lifecycle:
            with self._proc:
                if self._restart_timer is not None:
                    self._restart_timer.cancel()
                if self._state != "running":
                    return
                self._state = "stopped"
                self._stop.set()  # under _proc: no step is half way through spawning
                self._wake_loops()
                threads = list(self._threads)
            self._closing.set()
            deadline = time.monotonic() + self.stop_timeout
            me = threading.current_thread()
            for t in threads:
                if t is not me:
                    t.join(max(0.0, deadline - time.monotonic()))
            self._killed.set()
            with self._proc:  # a straggler past stop_timeout touches nothing from here on
                if self.engine is not None:
                    self.engine = None
                    self._crashed()
            with self.store.transaction() as tx:
                tx.log_runner(wall_us(), "stop")

    # -- the binding's defaults ---------------------------------------------------
    def _new_engine(self, incarnation: int):
        raise NotImplementedError(f"{type(self).__name__} must implement _new_engine(incarnation)")

    def _start_loops(self, engine) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _start_loops(engine)")

    def _crashed(self) -> None:
        """A hook: what else dies with the process (a listener's connection)."""

    def _wake_loops(self) -> None:
        """A hook: wake the loops' sleeps, so that they see ``_stop`` (``_stop``
        and ``_killed`` are events they may wait on already)."""

    def _started(self, start_us: int) -> None:
        """A hook: at :meth:`start`, before anything runs (clocks of its own; checks)."""

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return (f"the {self._noun} is {self._state}; make a new {type(self).__name__} "
                    f"over the same store")
        return f"the {self._noun} is down (crashed); it restarts after its downtime, or call restart()"

    # -- engine steps -------------------------------------------------------------
    def _call(self, step, *args, _now: int | None = None, **kwargs):
        """One store step now, ``step`` a bound method of an engine
        (``engine.fetch``), unless that incarnation is dead (None); a Crash
        inside it takes the runtime down (None)."""
        with self._proc:
            if step.__self__ is not self.engine:
                return None
            try:
                return step(wall_us() if _now is None else _now, *args, **kwargs)
            except Crash as c:
                self.crash(c.point, c.downtime)
                return None

    def _api(self, step, *args, **kwargs):
        """A step asked for from outside the loops: ``step`` is the engine
        class's function (``OutboxEngine.commit``), run on the live engine; an
        error if the runtime is down."""
        with self._proc:
            engine = self.engine
            if engine is None or self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            return self._call(step.__get__(engine), *args, **kwargs)
