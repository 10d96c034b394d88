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

import threading
import time
from typing import Callable

from fanoutsim.kernel.faults import Crash, CrashAt, CrashRandomly, bind
from fanoutsim.kernel.metrics import LockedMetrics
from fanoutsim.kernel.store import open_store
from fanoutsim.kernel.timeutil import US
from fanoutsim.kernel.trace import LockedTrace, NullTrace


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
        time.sleep(seconds)


class SteppedWallRuntime(WallRuntime):
    """A wall-clock runtime whose every store step holds one lock, ``_proc``, as
    does :meth:`crash`: a crash then falls *between* two steps, never inside one,
    and each step first checks that its incarnation is still the live one. Needs
    ``_noun`` ("dispatcher", "node"), ``_proc``, ``_restart_timer``,
    ``_down_message()`` and ``_boot()``; ``_started(start_us)`` is a hook for
    clocks of its own (a notification channel's silent windows)."""

    _noun = "runtime"

    def _open(self, seed: int, store, faults, trace: bool, stop_timeout) -> None:
        """What every threaded runtime starts with: the file (a bad, newer or
        locked one fails here, untouched), the count of earlier starts on it (so
        no RNG stream repeats an earlier process's), the clock, locked metrics
        and trace, and the bound fault plan."""
        if isinstance(stop_timeout, bool) or not isinstance(stop_timeout, (int, float)) or not stop_timeout >= 0:
            raise ValueError(f"stop_timeout must be seconds >= 0, got {stop_timeout!r}")
        self.stop_timeout = float(stop_timeout)
        self.store = open_store(store)
        self._starts = sum(1 for r in self.store.rows("runner_log") if r["event"] == "start")
        self.start_us = wall_us()
        self.metrics_registry = LockedMetrics()
        self._trace = LockedTrace() if trace else NullTrace()
        self.plan, self.faults = bind(faults, seed=seed, start_us=self.start_us, trace=self._trace)

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

    def _started(self, start_us: int) -> None:
        pass

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
