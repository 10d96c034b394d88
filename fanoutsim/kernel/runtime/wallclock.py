"""The wall-clock driver: the same loops on threads, in real time.

:class:`SteppedWallRuntime` is the counterpart of :class:`~.virtual.VirtualRuntime`:
each loop of a design (a generator yielding the requests of :mod:`.loops`)
runs on a thread of its own, and :meth:`SteppedWallRuntime._drive` answers its
requests with real waits — ``Sleep`` and ``Until`` on the loop's ``halt``
event (a stop or a crash ends them), ``Work`` on the incarnation's ``killed``
event (a stop lets the work in hand finish; a crash ends it), ``Wait`` on the
wake itself. Every store step holds one lock, ``_proc``, as does
:meth:`~SteppedWallRuntime.crash`: a crash falls *between* two steps, never
inside one. ``_later`` is one timer thread per runtime.

What only the wall clock has plugs in beside the loops: a thread of the
design's own (``_spawn_thread``: PostgreSQL's LISTEN connection), the
life cycle (``start``, ``stop``, ``close``, ``with``) and the ``runner_log``
rows that tell a later process how this one ended.
"""

from __future__ import annotations

import heapq
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from fanoutsim.kernel.faults import Crash
from fanoutsim.kernel.ids import FreshIdSource
from fanoutsim.kernel.metrics import LockedMetrics
from fanoutsim.kernel.runtime.binding import check_downtime
from fanoutsim.kernel.runtime.driver import Driver, Loop
from fanoutsim.kernel.runtime.loops import Sleep, Until, Wait, Work
from fanoutsim.kernel.store import Store, open_store
from fanoutsim.kernel.store.record import forget_end
from fanoutsim.kernel.timeutil import US
from fanoutsim.kernel.trace import LockedTrace
from fanoutsim.kernel.validate import is_real


def wall_us() -> int:
    """The wall clock, UTC microseconds since the epoch."""
    return time.time_ns() // 1000


T = TypeVar("T")


class _Thread:
    """A loop's thread and its ``halt`` event (set: stop waiting, end)."""

    __slots__ = ("name", "halt", "thread")

    def __init__(self, name: str, halt: threading.Event) -> None:
        self.name, self.halt = name, halt
        self.thread: threading.Thread | None = None

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class _Timers:
    """One thread that calls each ``fn`` at its time: the wall clock's ``_later``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._heap: list[tuple[float, int, Callable[[], object]]] = []
        self._cond = threading.Condition(threading.Lock())
        self._count = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, delay: float, fn: Callable[[], object]) -> None:
        with self._cond:
            if self._closed:
                return
            self._count += 1
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay), self._count, fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    if self._heap:
                        wait = self._heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                fn = heapq.heappop(self._heap)[2]
            try:
                fn()
            except Exception as exc:  # one failed callback must not stop the others
                # told as a thread's uncaught error is (threading.excepthook, which
                # prints it by default), so that a process can take it: serve ends
                # in one line on a lost database, whichever thread meets it first
                threading.excepthook(threading.ExceptHookArgs((type(exc), exc, exc.__traceback__, self._thread)))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify_all()


class SteppedWallRuntime(Driver):
    """The threaded driver every design's wall-clock face subclasses. It owns
    the life cycle — :meth:`start`, a crash's restart after its downtime,
    :meth:`restart`, :meth:`stop` (graceful and bounded), :meth:`close` — and
    each incarnation's ``runner_log`` row, its ``_stop`` event (take no new
    work) and ``_killed`` event (abandon the work in hand: a crash, or a stop
    past ``stop_timeout``). The design implements the :mod:`.binding` hooks
    and makes incarnation 0's engine in its ``__init__``
    (``self.engine = self._new_engine(0)``), so the API works before start."""

    _due_slack = 0.05  # seconds: a due time read from ``now`` just before the call is "now"
    zero_time_together = False  # another thread may run between two rows: a step ends at each
    #: Seconds :meth:`stop` waits for the work in hand before it abandons it.
    stop_timeout: float
    #: Where the run's ids come from: the OS's entropy, so no id repeats an earlier process's.
    ids: FreshIdSource

    def _open(
        self,
        seed: int,
        store: str | Store,
        faults: object,
        trace: bool,
        stop_timeout: float,
        opener: Callable[[Any], Store] = open_store,
    ) -> None:
        """What every threaded runtime starts with: the file (``opener(store)``:
        the design's, with every registered design's tables; a bad, newer or
        locked one fails here, untouched), the count of earlier starts on it (so
        no RNG stream repeats an earlier process's), the clock, locked metrics
        and trace, the bound fault plan and the life cycle's locks and events."""
        if not is_real(stop_timeout) or not stop_timeout >= 0:
            raise ValueError(f"stop_timeout must be seconds >= 0, got {stop_timeout!r}")
        if not isinstance(trace, bool):  # a folder to spill to is the virtual clock's (SpilledTrace)
            raise TypeError(f"trace must be True or False on the wall clock, got {trace!r}")
        self.stop_timeout = float(stop_timeout)
        self._check_faults(faults)
        self.store = self._claim(opener, store)
        self.store.clock = wall_us  # a row lock granted after a wait is read on this clock (Tx.after_locks)
        self._starts = sum(1 for r in self.store.rows("runner_log") if r["event"] == "start")
        self.start_us = wall_us()
        self._observe(seed, faults, LockedMetrics(), LockedTrace if trace else None)
        self.engine = None
        self.incarnation = 0
        self._state = "created"
        # Lock order: _lifecycle, then _proc (then the design's own, the store's and
        # the trace's). _proc is held for every store step and by crash().
        self._lifecycle = threading.RLock()
        self._proc = threading.RLock()
        self._stop = threading.Event()  # this incarnation's loops: take no new work
        self._killed = threading.Event()  # ... and abandon the work in hand (a crash)
        self._looping = False  # the incarnation's loops run (spawn more now)
        self._loops: list[_Thread] = []  # the incarnation's threads (a stop joins them)
        self._named: dict[Any, _Thread] = {}
        self._services: list[_Thread] = []  # the runtime's own loops (workloads, timers)
        self._queued: list[tuple[Loop, str]] = []  # services asked for before start()
        self._armed: dict[Any, threading.Event] = {}
        self._sleepers: list[tuple[threading.Event, Callable[[], bool]]] = []
        self._slept_at = 0
        self._timers = _Timers(f"fanoutsim-{getattr(self, 'design', 'runtime')}-timers")
        # ids must not repeat those of an earlier process on this file, nor of any
        # other wall-clock run: drawn from the OS's entropy, not from the seed
        self.ids = FreshIdSource()

    def _rng(self, name: str, *parts: object) -> random.Random:
        """The stream ``name`` of this process. On a fresh file it is the seed's,
        as under SimPy (the same scenario and seed draw the same workload on
        both clocks); after ``starts`` earlier starts on the file,
        ``fanoutsim:name:seed:starts:parts``, so no stream repeats an earlier process's."""
        head = ("fanoutsim", name, str(self.seed)) + ((str(self._starts),) if self._starts else ())
        return random.Random(":".join(head + tuple(map(str, parts))))

    # -- clock ------------------------------------------------------------------
    _as_of: int | None = None  # the moment a reader of a stopped run measures against (see as_of)

    def now_us(self) -> int:
        """Now as the store stamps it: the wall clock, in epoch microseconds
        (inside :meth:`as_of`, the moment it gives)."""
        return wall_us() if self._as_of is None else self._as_of

    @contextmanager
    def as_of(self, at_us: int) -> Iterator[None]:
        """Read the store as of ``at_us`` (epoch microseconds): inside the block
        :meth:`now_us` is ``at_us``, so an age measured against now (a lag) is
        measured against it — the end of the virtual run that stamped the rows.
        Refused while running: a live process's now is the wall clock."""
        if self.running:
            raise RuntimeError(f"the {self._noun} is running: its now is the wall clock")
        self._as_of = int(at_us)
        try:
            yield
        finally:
            self._as_of = None

    @property
    def now(self) -> float:
        """Seconds since :meth:`start` (before it: since the runtime was made)."""
        return (wall_us() - self.start_us) / US

    @staticmethod
    def clock() -> float:
        """A mark for ``Work(seconds, since=mark)``: the time a step took counts."""
        return time.monotonic()

    @property
    def running(self) -> bool:
        """Whether :meth:`start` has run and :meth:`stop` has not (a crashed process
        that will restart is still running)."""
        return self._state == "running"

    # -- life cycle -------------------------------------------------------------
    def start(self) -> Self:
        """Start the threads in the background and return at once."""
        with self._lifecycle:
            if self._state == "running":
                raise RuntimeError(f"the {self._noun} is already running")
            if self._state in ("stopped", "closed"):
                raise RuntimeError(
                    f"the {self._noun} was {self._state}; make a new {type(self).__name__} over the same store"
                )
            # windows and times are seconds since now; the injector keeps its pass counts
            self.start_us = wall_us()
            self._started(self.start_us)
            faults: Any = self.faults  # an Injector, or a hand-written plan that may keep the time
            if hasattr(faults, "start_us"):
                faults.start_us = self.start_us
            self._state = "running"
            self._schedule_crashes()
            queued, self._queued = self._queued, []
            for loop, name in queued:
                self._service(loop, name)
            forget_end(self.store)  # the run goes on on the wall clock: status measures against it again
            self._boot()
        return self

    def workload_origin(self) -> float | None:
        """Now, or the start for a workload added before it: a writer's thread
        that wakes late catches up on its schedule rather than shifting it."""
        return self.now if self.running else 0.0

    def _started(self, start_us: int) -> None:
        """A hook: at :meth:`start`, before anything runs (clocks of its own; checks)."""

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
            self._loops, self._named, self._armed, self._sleepers = [], {}, {}, []
            self._looping = True
            self._start_loops(self.engine)

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
            self._looping = False
            self._crashed()
            self._trace.add(wall_us(), "crashed", "runtime", detail=point)
            self.metrics_registry.inc("fanoutsim_runner_crashes_total")
            self._stop.set()
            self._halt_loops()
            self._killed.set()
            if downtime is not None and self._state == "running":
                self._service(self._restart_after(float(downtime), self.incarnation), "restart")

    def restart(self) -> None:
        """Restart after a crash now (a no-op while it is up or not running)."""
        with self._lifecycle:
            if self._state == "running" and self.engine is None:
                self._boot()

    def stop(self) -> None:
        """Stop the threads: no new work; the work in hand finishes (up to
        ``stop_timeout`` seconds; what still runs then is abandoned), nothing is
        half-written. A no-op if not running."""
        with self._lifecycle:
            with self._proc:
                if self._state != "running":
                    return
                self._state = "stopped"
                self._looping = False
                self._stop.set()  # under _proc: no step is half way through spawning
                self._halt_loops()
                threads = list(self._loops)
                for service in self._services:
                    service.halt.set()
            self._timers.close()
            deadline = time.monotonic() + self.stop_timeout
            me = threading.current_thread()
            for t in threads:
                if t.thread is not None and t.thread is not me:
                    t.thread.join(max(0.0, deadline - time.monotonic()))
            self._killed.set()
            with self._proc:  # a straggler past stop_timeout touches nothing from here on
                if self.engine is not None:
                    self.engine = None
                    self._crashed()
            with self.store.transaction() as tx:
                tx.log_runner(wall_us(), "stop")

    def close(self) -> None:
        """Stop, then release the store (and its file)."""
        self.stop()
        with self._lifecycle:
            if self._state != "closed":
                self._state = "closed"
                self.store.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self, seconds: float) -> None:
        """Let the runtime run for ``seconds`` of wall time (a plain sleep)."""
        if not is_real(seconds) or not 0 <= seconds < float("inf"):
            raise ValueError(f"wait(seconds): must be a finite number of seconds >= 0, got {seconds!r}")
        time.sleep(seconds)

    # what a stopped process's message says needs it running ("commit and the API"); None: say nothing of it
    _api_words: str | None = None

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            if self._api_words is not None:
                return (
                    f"the {self._noun} is {self._state}; {self._api_words} need a running (or not yet started) "
                    f"{type(self).__name__}: make a new one over the same store"
                )
            return f"the {self._noun} is {self._state}; make a new {type(self).__name__} over the same store"
        return f"the {self._noun} is down (crashed); it restarts after its downtime, or call restart()"

    def _engine_or_raise(self) -> Any:
        engine = self.engine
        if engine is None or self._state in ("stopped", "closed"):
            raise RuntimeError(self._down_message())
        return engine

    # -- loops ------------------------------------------------------------------
    def _drive(self, loop: Loop, halt: threading.Event, killed: threading.Event) -> None:
        """The thread of one loop: each request answered with a real wait."""
        try:
            request = next(loop)
            while True:
                kind = type(request)
                if kind is Work:
                    since = request.since
                    rest = request.seconds if since is None else request.seconds - (time.monotonic() - since)
                    ended = rest > 0 and killed.wait(rest)
                elif kind is Sleep:
                    ended = halt.wait(max(0.0, request.seconds))
                elif kind is Until:
                    ended = halt.wait(max(0.0, request.at - self.now))
                elif kind is Wait:
                    if not halt.is_set():
                        request.wake.wait(None if request.timeout is None else max(0.0, request.timeout))
                    ended = halt.is_set()
                else:
                    raise TypeError(f"a loop yields Sleep, Until, Work or Wait, not {request!r}")
                if ended:
                    loop.close()
                    return
                request = next(loop)
        except StopIteration:
            return
        except Crash as c:  # a step the loop called without _call
            self.crash(c.point, c.downtime)

    def _thread(
        self, name: str, target: Callable[..., object], *args: Any, halt: threading.Event | None = None
    ) -> _Thread:
        handle = _Thread(name, halt or threading.Event())
        handle.thread = threading.Thread(
            target=target, args=args, daemon=True, name=f"fanoutsim-{getattr(self, 'design', 'runtime')}-{name}"
        )
        handle.thread.start()
        return handle

    def _spawn(self, loop: Loop, name: str = "loop", key: Any = None) -> _Thread:
        """A loop of the live incarnation on a thread of its own (a stop joins it,
        a crash ends it); callers hold ``_proc``."""
        halt = threading.Event()
        handle = self._thread(name, self._drive, loop, halt, self._killed, halt=halt)
        self._loops = [t for t in self._loops if t.alive()] + [handle]  # finished ones go
        if key is not None:
            self._named[key] = handle
        return handle

    def _spawn_task(self, loop: Loop, name: str = "task") -> _Thread:
        """A short loop of the live incarnation (a claimed execution's body): a
        thread of its own, as any loop (callers hold ``_proc``)."""
        return self._spawn(loop, name)

    def _spawn_thread(self, name: str, target: Callable[..., object], *args: Any) -> _Thread:
        """A thread of the incarnation that is no loop (an adapter's: PostgreSQL's
        LISTEN connection); it watches ``_stop`` itself. A stop joins it."""
        handle = self._thread(name, target, *args)
        self._loops = [t for t in self._loops if t.alive()] + [handle]
        return handle

    def _service(self, loop: Loop, name: str = "service") -> _Thread | None:
        """A loop of the runtime (no crash stops it; a stop does), on a thread;
        asked for before :meth:`start`, it starts then."""
        with self._proc:
            if self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            if self._state != "running":
                self._queued.append((loop, name))
                return None
            halt = threading.Event()
            handle = self._thread(name, self._drive, loop, halt, halt, halt=halt)
            self._services = [t for t in self._services if t.alive()] + [handle]
            return handle

    def _later(self, delay: float, fn: Callable[[], object]) -> None:
        """``fn()`` ``delay`` seconds from now, on the runtime's timer thread."""
        self._timers.add(delay, fn)

    def _loop_running(self, key: Any) -> bool:
        handle = self._named.get(key)
        return handle is not None and handle.alive()

    def _cancel(self, key: Any) -> None:
        """End the incarnation's loop named ``key`` at its next sleep."""
        handle = self._named.pop(key, None)
        if handle is not None:
            handle.halt.set()

    def _halt_loops(self) -> None:
        """Every loop of the incarnation stops waiting (``_proc`` held)."""
        for t in self._loops:
            t.halt.set()
        for event in list(self._armed.values()):
            event.set()
        for event, _ in self._sleepers:
            event.set()
        self._armed, self._sleepers, self._named = {}, [], {}

    # -- wakes ------------------------------------------------------------------
    def _arm(self, key: Any) -> threading.Event:
        """A new wake for ``key`` (the last one's signal no longer counts)."""
        event = threading.Event()
        with self._proc:
            if not self._looping:
                event.set()  # the incarnation is going: wake at once
            self._armed[key] = event
        return event

    @staticmethod
    def _fire(wake: threading.Event) -> None:
        wake.set()

    @staticmethod
    def _woken(wake: threading.Event) -> bool:
        return wake.is_set()

    def _until_written(self, ready: Callable[[], bool], since: int) -> threading.Event:
        """A wake that fires once a step of this process wrote and ``ready()`` is true;
        at once if the store was written after ``since``: another thread's step may
        have run between the loop's step that found nothing and this call, and its
        write would wake nobody."""
        event = threading.Event()
        with self._proc:
            if not self._looping or self.store.writes != since:
                event.set()
                return event
            if not self._sleepers:
                self._slept_at = self.store.writes
            self._sleepers.append((event, ready))
        return event

    # -- engine steps -------------------------------------------------------------
    def _running(self, engine: Any) -> bool:
        """Whether a loop of ``engine`` should take more work: its incarnation
        lives and is not stopping."""
        return engine is self.engine and not self._stop.is_set()

    def _call(self, step: Callable[..., T], *args: Any, _now: int | None = None, **kwargs: Any) -> T | None:
        """One store step now, ``step`` a bound method of an engine
        (``engine.fetch``), under the per-step lock: :meth:`_outside`'s step,
        then the loops asleep until a write hear of it. None if that
        incarnation is dead or a Crash inside the step took the runtime down."""
        with self._proc:
            out = self._outside(step, *args, _now=_now, **kwargs)
            if self._sleepers and self.store.writes != self._slept_at:  # none left after a crash
                self._wake_sleepers()
            return out

    def _outside(self, step: Callable[..., T], *args: Any, _now: int | None = None, **kwargs: Any) -> T | None:
        """A step that runs the user's own code (a consumer's ``fn``), outside the
        store lock so that consumers overlap; None if its incarnation is dead."""
        if not self._live(step.__self__):  # type: ignore[attr-defined]  # a bound method of an engine
            return None
        try:
            return step(wall_us() if _now is None else _now, *args, **kwargs)
        except Crash as c:
            self.crash(c.point, c.downtime)
            return None

    def _api(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        """A step asked for from outside the loops: ``step`` is the engine
        class's function (``OutboxEngine.commit``), run on the live engine; an
        error if the runtime is down."""
        with self._proc:
            return self._call(step.__get__(self._engine_or_raise()), *args, **kwargs)
