"""The outbox dispatcher on the wall clock: the same engine, threads, real time.

The counterpart of :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`, in the
style of :class:`~fanoutsim.designs.reactor.realtime.Realtime`. Nothing of the
delivery logic lives here: the threads below only decide *when* to call the
:class:`~fanoutsim.designs.outbox.OutboxEngine`'s steps, with ``time.time()`` (UTC
microseconds) as the clock and ``Event.wait`` as the sleep. The store is a
DuckDB file by default, so the outbox, the cursors, the parked and the
deferred rows outlive the process: a new ``OutboxRealtime`` over the same file
(after a stop, a crash or ``kill -9``) picks up where the cursors point.

Threads, one set per incarnation of the dispatcher process:

* one loop per consumer — a slow consumer never holds up a fast one. It arms
  its wake event, reads (rows past its cursor, and deferred rows now due),
  handles them (due rows first) and reads again while the batch was full, due
  rows were handled, or a hint or the poll arrived meanwhile; otherwise it
  sleeps until a hint, the safety poll, or the next due (or settle, or gap)
  time. The consumer's ``fn`` runs for real in this thread, and the step's
  ``duration`` (a fault plan's slow or wedged durations included) is slept
  out, so a ``timeout`` of 0.2 s really cuts a hung step off after 0.2 s;
* the listener: the one connection that LISTENs. Hints leave the writer through
  a :class:`~fanoutsim.designs.outbox.notify.NotificationChannel` (which drops,
  coalesces and delays them as the plan's ``Notifications`` says), wait in a
  delay queue and, at their time, reach the listener — or not: in a silent
  window, or while the dispatcher is down, a hint is lost, as NOTIFY does not
  queue for a listener that is not there. An arriving hint sets every
  consumer's wake event;
* the safety poll: every ``safety_poll_interval`` seconds it wakes every
  consumer, so a lost hint costs at most one interval, never a row;
* the retention loop, and one writer thread per workload. ``LateCommit``
  makes a writer reserve its seq now and commit ``delay`` seconds later, in a
  thread of its own (its ``reactor`` field, if set, matches the row's topic),
  so the workload keeps its rate and later commits overtake it.

Times a user passes — workload ``start``/``stop``, fault windows, silent
windows, ``CrashAt``, and a commit's ``due_at`` — are seconds since
:meth:`OutboxRealtime.start` (before it: since the runtime was made), the
scale of :attr:`OutboxRealtime.now`, as they are virtual seconds since the
start under SimPy: ``rt.commit("p", due_at=rt.now + 3)`` is due in three
seconds, on either clock. ``due_at`` also takes a timezone-aware ``datetime``.

A crash — a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`OutboxRealtime.crash` — is an instant: every store
step goes through one lock, and the crash takes the engine away under it, so
no thread of the dead incarnation touches the tables afterwards (each checks
``engine is self.engine`` before every step). The listener disconnects, hints
in flight are lost, in-memory state (bus subscribers, retry counts, gap
timers) dies; after the downtime a new engine starts over the same tables.

Life cycle, as ``Realtime``'s::

    rt = OutboxRealtime(OutboxConfig(safety_poll_interval=1.0), store="outbox.duckdb")
    rt.register_consumer("indexer", fn=index_row, timeout=2.0)
    rt.start()                 # threads run in the background; returns at once
    rt.commit("p1", "hello")   # any thread
    rt.stop()                  # graceful and bounded: the row in hand finishes
    rt.close()                 # releases the file

``start()`` twice raises; ``stop()`` twice is a no-op; ``commit()`` after
``stop()`` raises (reads work until ``close()``). Every start and every clean
stop is a row of ``runner_log``, so a start that follows no stop marks a kill.
"""
from __future__ import annotations

import heapq
import math
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable


from fanoutsim.kernel.faults import LateCommit, Notifications
from fanoutsim.designs.outbox import OutboxConfig, OutboxEngine, OutboxRegistry
from fanoutsim.designs.outbox.notify import NotificationChannel, listener_pool
from fanoutsim.kernel.timeutil import US, to_us
from fanoutsim.kernel.validate import is_number, is_real
from fanoutsim.designs.outbox.host import OutboxHost, checked_outbox_config
from fanoutsim.designs.outbox.config import OutboxWorkload
from fanoutsim.kernel.scenario import checked_args
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.wallclock import SteppedWallRuntime, every, wall_us

# a due_at read from ``rt.now`` just before the call is "now", not the past
DUE_SLACK = 0.05  # seconds


@dataclass
class _Writer:
    """One workload: its settings, its seeded RNG and how many it committed."""

    rate: float
    pages: int
    start: float
    stop: float | None
    topic: str | None
    rng: random.Random
    k: int = 0


class OutboxRealtime(OutboxHost, SteppedWallRuntime):
    """The outbox dispatcher running for real, on the wall clock."""

    design = "outbox"  # its entry in fanoutsim.designs

    _noun = "dispatcher"

    def __init__(self, config: OutboxConfig | None = None, store: Any = "outbox.duckdb", faults=None,
                 *, seed: int = 0, trace: bool = True, stop_timeout: float = 10.0) -> None:
        self.config = checked_outbox_config(config, seed)
        self.seed = seed
        self._open(seed, store, faults, trace, stop_timeout, opener=open_store)
        self.registry = OutboxRegistry()
        spec = (self.plan.of(Notifications) or [None])[0] if self.plan else None
        self.channel = NotificationChannel(spec, rng=random.Random(f"fanoutsim:notify:{seed}:{self._starts}"),
                                           start_us=self.start_us, trace=self._trace,
                                           pool=listener_pool(self.config, self.plan))
        self.channel.connected = False  # nobody LISTENs until start()
        self._pg = None  # over PostgreSQL: real LISTEN/NOTIFY instead of the channel (pglisten.py)
        if callable(getattr(self.store, "channel", None)):
            from fanoutsim.designs.outbox import pglisten

            pglisten.check_spec(spec)
            self._pg = pglisten.PgListener(self)
        self._late = self.plan.of(LateCommit) if self.plan else []
        self._late_rng = random.Random(f"fanoutsim:late:{seed}:{self._starts}")
        # Lock order: the runtime's (_lifecycle, then _proc), then _hints.
        self._hints = threading.Condition(threading.Lock())
        self._pending: list[tuple] = []  # (deliver at, order, payload, waited s): the delay queue
        self._sent = 0
        self._wakes: dict[str, threading.Event] = {}
        self._writers: list[_Writer] = []
        self.engine: OutboxEngine | None = self._new_engine(0)

    # -- the binding ------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> OutboxEngine:
        rng = random.Random(f"fanoutsim:outbox-realtime:{self.seed}:{self._starts}:{incarnation}")
        pg = self._pg
        return OutboxEngine(self.store, self.config, self.registry, self.metrics_registry, self._trace,
                            self.faults, rng, notify=self._send_hints if pg is None else None,
                            notify_in_tx=None if pg is None else pg.send)

    def _started(self, start_us: int) -> None:
        self.channel.start_us = start_us  # silent windows are seconds since start too

    def _start_loops(self, engine: OutboxEngine) -> None:
        """One incarnation's listener and loops (``_proc`` held)."""
        self._drop_pending()  # hints queued while nobody listened are lost
        self.channel.connected = True
        self._wakes = {}
        self._call(engine.publish)  # the bus goes live at the end of the log
        stop = self._stop
        self._spawn("listener", self._listener if self._pg is None else self._pg.run, engine, stop)
        self._spawn("safety-poll", self._safety_poll, engine, stop)
        self._spawn("retention", self._retention_loop, engine, stop)
        for name in list(self.registry.consumers):
            self._start_consumer(engine, name)
        for w in self._writers:
            self._spawn("writer", self._workload, engine, stop, w)

    def _start_consumer(self, engine: OutboxEngine, name: str) -> None:
        self._wakes[name] = threading.Event()
        self._spawn(f"consumer-{name}", self._consumer_loop, engine, self._stop, self._killed, name)

    def _crashed(self) -> None:
        self.channel.connected = False  # hints sent while down are lost
        self._drop_pending()
        if self._pg is not None:
            self._pg.disconnect()  # the listener's connection dies with the process

    def _wake_loops(self) -> None:
        for ev in list(self._wakes.values()):
            ev.set()
        with self._hints:
            self._hints.notify_all()

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return (f"the dispatcher is {self._state}; commit and the consumer API need a running (or "
                    f"not yet started) OutboxRealtime: make a new one over the same store")
        return "the dispatcher is down (crashed); it restarts after its downtime, or call restart()"

    # -- hints ------------------------------------------------------------------
    def _send_hints(self, now: int, payloads: list[str]) -> None:
        """The engine's notify: after a commit, in the writer's thread."""
        with self._hints:
            for delay, payload in self.channel.send(now, payloads):
                self._sent += 1
                heapq.heappush(self._pending, (now + round(delay * US), self._sent, payload, 0.0))
            self._hints.notify_all()

    def _drop_pending(self) -> None:
        """Hints in flight when the listener goes (or before it came) never arrive."""
        with self._hints:
            now = wall_us()
            for _, _, payload, _ in sorted(self._pending):
                self.channel.arrive(now, payload)  # disconnected: counted and traced as missed
            self._pending.clear()

    def _listener(self, engine: OutboxEngine, stop: threading.Event) -> None:
        """The LISTEN connection: take each hint at its time; if someone is
        listening then (not a silent window), wake every consumer."""
        while True:
            with self._hints:
                while True:
                    if stop.is_set() or engine is not self.engine:
                        return
                    if self._pending:
                        wait = (self._pending[0][0] - wall_us()) / US
                        if wait <= 0:
                            break
                        self._hints.wait(wait)
                    else:
                        self._hints.wait()
                _, order, payload, waited = heapq.heappop(self._pending)
                now = wall_us()
                wait = self.channel.connection_wait(now, payload, waited)  # a shared connection may be taken
                if wait is None:
                    continue
                if wait > 0:  # again once a connection is free
                    heapq.heappush(self._pending, (now + round(wait * US), order, payload, waited + wait))
                    continue
                heard = self.channel.arrive(now, payload)
            if heard:
                self._trace.add(now, "hint", "dispatcher", firing=int(payload))
                self._wake_all(engine)

    def _wake_all(self, engine: OutboxEngine) -> None:
        self._call(engine.publish)
        for ev in list(self._wakes.values()):
            ev.set()

    def _safety_poll(self, engine: OutboxEngine, stop: threading.Event) -> None:
        interval = self.config.safety_poll_interval
        if not stop.wait(interval):  # the consumers read at boot anyway
            every(stop, interval, lambda: self._wake_all(engine), lambda: engine is self.engine)

    def _retention_loop(self, engine: OutboxEngine, stop: threading.Event) -> None:
        every(stop, self.config.retention_interval, lambda: self._call(engine.prune_once),
              lambda: engine is self.engine)

    # -- one consumer -------------------------------------------------------------
    def _consumer_loop(self, engine: OutboxEngine, stop: threading.Event, killed: threading.Event,
                       name: str) -> None:
        wake = self._wakes[name]
        limit = self.config.batch_limit
        while not stop.is_set() and engine is self.engine:
            wake.clear()  # armed before the read: a hint or poll from here on means "read again"
            rows = self._call(engine.fetch, name) or []
            first_due = engine.due_at_fetch.get(name)
            due = (self._call(engine.fetch_due, name) or []
                   if first_due is not None and first_due <= wall_us() else [])
            deferred = False
            for row in due:  # due rows first
                if self._handle(engine, stop, killed, name, row, True) is None:
                    return  # stopped or crashed with this row in hand: it stays owed
            for row in rows:
                kind = self._handle(engine, stop, killed, name, row, False)
                if kind is None:
                    return  # ... and nothing after it may pass the cursor
                deferred |= kind == "deferred"
            if stop.is_set() or engine is not self.engine:
                return
            if due or len(rows) >= limit or wake.is_set():
                continue  # drain: a full batch, or woken while handling
            # asleep until a hint, the safety poll, or a wait's end (due time, settle, gap).
            # A short batch read everything visible at the fetch; anything committed
            # since sent a hint (which set ``wake``) or waits for the poll.
            next_due = self._call(engine.next_due, name) if deferred else first_due
            until = [t for t in (next_due, engine.wake_at.pop(name, None)) if t is not None]
            wake.wait(max(0.0, (min(until) - wall_us()) / US) if until else None)

    def _handle(self, engine: OutboxEngine, stop: threading.Event, killed: threading.Event,
                name: str, row: dict, due: bool):
        """One row through its attempts; the outcome's kind, or None if the
        dispatcher stopped or died before the row was behind the consumer."""
        attempt = 0
        while not stop.is_set() and engine is self.engine:
            started = time.monotonic()
            # begin runs the consumer's fn: outside the store lock, so consumers overlap
            step = engine.begin(wall_us(), name, row, due)
            rest = step.duration - (time.monotonic() - started)
            if rest > 0 and killed.wait(rest):
                return None  # died (or a stop ran out of time) with the step in hand
            attempt += 1
            out = self._call(engine.finish, step, attempt)
            if out is None or out.kind != "retry":
                return None if out is None else out.kind
            if stop.wait(out.delay):
                return None  # stopped while backing off: the row is retried next run
        return None

    # -- writers ------------------------------------------------------------------
    def _workload(self, engine: OutboxEngine, stop: threading.Event, w: _Writer) -> None:
        if w.start > self.now and stop.wait(w.start - self.now):
            return
        while not stop.wait(w.rng.expovariate(w.rate)):
            if engine is not self.engine or (w.stop is not None and self.now >= w.stop):
                return
            page = f"p{w.rng.randrange(w.pages)}"
            w.k += 1
            topic = w.topic or f"page:{page}"
            delay = self._late_delay(topic) if self._late else 0.0
            if delay > 0:
                # its own thread, so the workload keeps its rate and later commits
                # can overtake this one, as they do between concurrent requests
                self._spawn("late-writer", self._late_commit, engine, stop, page, f"v{w.k}", topic, delay)
            else:
                self._call(engine.commit, page, f"v{w.k}", topic=topic)

    def _late_commit(self, engine, stop, page: str, body: str, topic: str, delay: float) -> None:
        """A slow writer: takes its seq now, commits ``delay`` seconds later (stamped now)."""
        stamp = wall_us()
        seq = self._call(engine.reserve)
        if seq is None or stop.wait(delay):
            return  # the writer died with its transaction open: the seq stays a gap
        self._call(engine.commit, page, body, topic=topic, seq=seq, stamp=stamp)

    # -- the API ------------------------------------------------------------------
    def register_consumer(self, name: str, fn: Callable[[dict], Any] | None = None, *,
                          start="beginning", **guardrails) -> int:
        """Register a consumer and give it a cursor (kept if the store has one:
        a restarted process resumes); returns the cursor. Guardrails: duration,
        timeout, backoff, backoff_cap, jitter, retry_budget, rebuild (seconds are
        wall seconds). ``fn(row)`` runs in the consumer's own thread."""
        with self._lifecycle:
            if self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            with self.registry.registering(name, fn, **guardrails):  # undone if refused
                cursor = self._api(OutboxEngine.add_consumer, name, start)
            with self._proc:
                engine = self.engine
                if self._state == "running" and engine is not None and name not in self._wakes:
                    self._start_consumer(engine, name)
            return cursor

    def set_cursor(self, name: str, seq) -> int:
        out = self._api(OutboxEngine.set_cursor, name, seq)
        self._wake(name)
        return out

    def reset_consumer(self, name: str) -> int:
        """Rebuild a rebuildable consumer from the pages, then replay the retained log."""
        out = self._api(OutboxEngine.reset_consumer, name)
        self._wake(name)
        return out

    def _wake(self, name: str) -> None:
        ev = self._wakes.get(name)
        if ev is not None:
            ev.set()

    def _due_us(self, due_at, now: int) -> int | None:
        if due_at is None:
            return None
        if isinstance(due_at, datetime):
            if due_at.tzinfo is None:
                raise ValueError(f"due_at {due_at!r} has no timezone; use an aware datetime (UTC)")
            at = to_us(due_at)
        elif not is_real(due_at) or not math.isfinite(due_at):
            raise TypeError(f"due_at must be seconds since start (as rt.now) or an aware datetime, got {due_at!r}")
        else:
            at = self.start_us + round(due_at * US)
        if at < now - round(DUE_SLACK * US):
            raise ValueError(f"due_at {due_at!r} is in the past (now is {(now - self.start_us) / US:.3f} s "
                             "since start); deferred work must be due now or later")
        return max(at, now)

    def commit(self, page_id: str, body: str | None = None, *, topic: str | None = None,
               kind: str = "page.updated", due_at: float | datetime | None = None) -> int | None:
        """Commit a change to a page now; returns its seq (None if a crash took the
        writer down). ``due_at``: seconds since start, on :attr:`now`'s scale
        (``rt.now + 3``: in three seconds), or an aware datetime; not in the past."""
        with self._proc:
            if self.engine is None or self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            now = wall_us()
            due = self._due_us(due_at, now)
            return self._call(self.engine.commit, page_id, body, topic=topic, kind=kind, due_at=due, _now=now)

    # -- PostgreSQL's LISTEN/NOTIFY, for real (pglisten.py) ----------------------------
    def _pg_listener(self):
        if self._pg is None:
            raise RuntimeError("the listener's faults are PostgreSQL's: open the runtime over a PostgreSQL store")
        return self._pg

    def kill_listener(self) -> int | None:
        """Terminate the LISTEN connection's backend (``pg_terminate_backend``):
        every hint until it reconnects is lost. Its pid, or None if not connected."""
        return self._pg_listener().kill()

    def pause_listener(self, seconds: float) -> None:
        """The listener reads nothing for ``seconds``; PostgreSQL queues the hints meanwhile."""
        self._pg_listener().pause(seconds)

    def hold_commit(self, page_id: str, body: str | None = None, *, hold: float,
                    topic: str | None = None) -> int:
        """Commit a page change whose transaction (its own connection; seq taken
        at insert) stays open ``hold`` seconds; blocks the caller that long."""
        pg = self._pg_listener()
        with self._proc:
            if self.engine is None or self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            engine = self.engine
        return pg.hold_commit(engine, page_id, body, hold, topic=topic)

    def subscribe(self, topic: str, callback: Callable[[dict], None]) -> None:
        """A live topic-bus subscriber (gone with the process on a crash). The
        callback runs in the dispatcher's threads: keep it short."""
        with self._proc:
            if self.engine is None or self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            self.engine.bus.subscribe(topic, callback)

    def add_workload(self, rate: float, *, pages: int = 100, start: float = 0.0,
                     stop: float | None = None, topic: str | None = None) -> None:
        """Commit page changes at Poisson times, ``rate`` per second, from
        ``start`` to ``stop`` (seconds since start), while running."""
        if not is_real(rate) or not rate > 0 or not math.isfinite(rate):
            raise ValueError(f"rate must be commits per second > 0, got {rate!r}")
        # the rest as a scenario file's [[workload]] keys are (rate and stop here: wall seconds)
        a = checked_args(OutboxWorkload, pages=pages, start=start, topic=topic)
        if stop is not None and (not is_number(stop) or stop <= a["start"]):
            raise ValueError(f"stop must be a finite number of seconds after start ({a['start']:g}), got {stop!r}")
        rng = random.Random(f"fanoutsim:outbox-workload:{self.seed}:{self._starts}:{len(self._writers)}")
        w = _Writer(float(rate), a["pages"], a["start"], stop, a["topic"], rng)
        with self._lifecycle:
            if self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            with self._proc:
                self._writers.append(w)
                engine = self.engine
                if self._state == "running" and engine is not None:
                    self._spawn("writer", self._workload, engine, self._stop, w)
