"""The outbox dispatcher's loops and public API, written once for both clocks.

:class:`OutboxRuntime` decides *when* the :class:`~fanoutsim.designs.outbox.OutboxEngine`'s
steps run; a driver decides how time passes (:class:`OutboxSimulation` on
SimPy's virtual clock, :class:`OutboxRealtime` on threads and the wall clock).
Its loops are generators that yield what they wait for (:mod:`fanoutsim.kernel.runtime.loops`):

* one loop per consumer — a slow consumer never holds up a fast one. It arms
  its wake, reads (rows past its cursor, and due deferred rows), handles them
  (due rows first) and reads again while the batch was full, due rows were
  handled, or a hint or the poll arrived meanwhile (the wake is armed before
  each read); otherwise it waits for a hint, the safety poll, or the next due
  (or settle, or gap) time. A short batch means everything visible at the
  read was taken, so no empty confirming read is spent (a commit during the
  batch sends its own hint, or waits for the poll like any row whose hint
  was lost). The consumer's ``fn`` runs outside the store lock, and the
  step's ``duration`` (a fault plan's slow or wedged durations included) is
  the loop's work: on the wall clock a ``timeout`` of 0.2 s really cuts a
  hung step off after 0.2 s;
* the safety poll: every ``safety_poll_interval`` it wakes every consumer, so
  a lost hint costs at most one interval, never a row;
* the rules real job queues' workers use, as options of the same loop (see
  :mod:`.config`; the defaults are the seed's loop above): the poll as each
  consumer's idle timeout (``poll_mode``), the wake flag cleared after each
  read instead of armed before it (``wake_mode``: procrastinate's lost
  wake-up), a read by every consumer when the listener connects again
  (``catch_up``), rounds that read until a read finds nothing
  (``read_until_empty``), reads that take time (``read_cost``, a ``Work``
  after each fetch), a quick re-poll for rows a round missed (``repoll``), and
  a consumer's status writes that wake it (``self_hint_every``);
* the retention loop; writers (workloads) that commit at Poisson times.
  ``LateCommit`` makes a writer reserve its seq now and commit ``delay``
  later (its ``reactor`` field, if set, matches the row's topic), in a loop of
  its own, so later commits overtake it.

Hints leave the writer through a :class:`~fanoutsim.designs.outbox.notify.NotificationChannel`
(which drops, coalesces and delays them as the plan's ``Notifications``
says) and reach the listener after their delay — or not: in a silent window,
or while the dispatcher is down, a hint is lost, as NOTIFY does not queue for
a listener that is not there. An arriving hint wakes every consumer. Over
PostgreSQL on the wall clock, :mod:`.pglisten` (an adapter) sends and hears
real NOTIFYs instead.

A crash — a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`crash` — stops every loop, disconnects the
listener and throws the engine away (bus subscribers, retry counts, gap
timers); a restart builds a new one over the same tables.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from fanoutsim.designs.faults import LateCommit, Notifications
from fanoutsim.designs.outbox.config import NO_COST, OutboxConfig, OutboxWorkload
from fanoutsim.designs.outbox.engine import TRACE, OutboxEngine, OutboxRegistry
from fanoutsim.designs.outbox.host import OutboxHost
from fanoutsim.designs.outbox.notify import NotificationChannel, listener_pool
from fanoutsim.designs.outbox.roles import BUS, CONSUMERS, RETENTION, ROLES
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.driver import Loop
from fanoutsim.kernel.runtime.loops import Sleep, Ticks, Until, Wait, Work
from fanoutsim.kernel.runtime.roles import WORKLOADS
from fanoutsim.kernel.scenario import checked_args
from fanoutsim.kernel.timeutil import US, to_us


class OutboxRuntime(OutboxHost):
    """The outbox design on either clock: its loops, hints and API. A face
    (``OutboxSimulation``, ``OutboxRealtime``) adds the driver and calls
    :meth:`_setup` once the driver's ``_open`` has run."""

    #: The design's name, its entry in :mod:`fanoutsim.designs`.
    design = "outbox"  # its entry in fanoutsim.designs
    _noun = "dispatcher"
    #: The outbox's names for the trace's columns: ``consumer``, ``seq``, ``topic``.
    trace_schema = TRACE
    _pg = None  # the PostgreSQL LISTEN/NOTIFY adapter, where the face has one
    #: The parts of the dispatcher one process may run (see :mod:`.roles`).
    roles = ROLES  # one part of the dispatcher per process (see .roles): _start_loops asks _runs
    # what the faces (fanoutsim.kernel.runtime.faces) build it from
    #: The config class the runtimes take (``config=None``: its defaults).
    config_class = OutboxConfig
    _opener = staticmethod(open_store)
    #: The wall clock's default store: a DuckDB file in the working directory.
    wall_store = "outbox.duckdb"  # the wall clock's default store

    #: The run's :class:`~fanoutsim.designs.outbox.config.OutboxConfig`.
    config: OutboxConfig
    engine: OutboxEngine | None
    #: The registered consumers' code and guardrails (code: they survive a crash).
    registry: OutboxRegistry
    #: The hints' channel from a commit to the dispatcher (``NOTIFY``; a fault plan's
    #: ``notifications`` drop, merge or delay them here).
    channel: NotificationChannel

    def _setup(self) -> None:
        self.registry = OutboxRegistry()
        spec = (self.plan.of(Notifications) or [None])[0] if self.plan else None
        self.channel = NotificationChannel(
            spec,
            rng=self._rng("notify"),
            start_us=self.start_us,
            trace=self._trace,
            pool=listener_pool(self.config, self.plan),
        )
        self._late = self.plan.of(LateCommit) if self.plan else []
        self._late_rng = self._rng("late")
        self._workloads = 0
        if self.config.catch_up and self._pg is None and self.channel.spec.silent:
            self._service(self._reconnects(), "reconnects")

    def _built(self) -> None:
        self._service(self._safety_poll(), "safety-poll")  # a loop of the runtime (wall clock: from start())

    # -- the binding --------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> OutboxEngine:
        pg = self._pg
        return OutboxEngine(
            self.store,
            self.config,
            self.registry,
            self.metrics_registry,
            self._trace,
            self.faults,
            self._rng("outbox", incarnation),
            notify=self._send_hints if pg is None else None,
            notify_in_tx=None if pg is None else pg.send,
        )

    def _start_loops(self, engine: OutboxEngine) -> None:
        # the groups of loops this process runs (every one, unless a role picks some)
        self.channel.connected = True
        if self._runs(BUS):
            self._call(engine.publish)  # the bus goes live at the end of the log
        if self._runs(RETENTION):
            self._spawn(self._retention_loop(engine), "retention")
        if self._runs(CONSUMERS):
            for name in list(self.registry.consumers):
                self._start_consumer(engine, name)

    def _crashed(self) -> None:
        self.channel.connected = False  # hints sent while down are lost

    # -- hints ------------------------------------------------------------------
    def _send_hints(self, now: int, payloads: list[str]) -> None:
        """The engine's notify: after a commit, in the writer's step."""
        for delay, payload in self.channel.send(now, payloads):
            if delay <= 0:
                self._hint(payload)
            else:
                self._later(delay, partial(self._hint, payload))

    def _hint(self, payload: str, waited: float = 0.0) -> None:
        """A hint reaches the listener now: if someone listens, every consumer wakes."""
        if self.engine is None:
            return
        now = self.now_us()
        if self.channel.connected:  # the listener's connection (a shared one may be taken)
            wait = self.channel.connection_wait(now, payload, waited)
            if wait is None:
                return
            if wait > 0:
                self._later(wait, partial(self._hint, payload, waited + wait))
                return
        if not self.channel.arrive(now, payload):
            return
        self._trace.add(now, "hint", "dispatcher", None, int(payload))
        self._wake_all()

    def _wake_all(self) -> None:
        engine = self.engine
        if engine is not None and self._runs(BUS):
            self._call(engine.publish)
        self._signal_all()

    def _safety_poll(self):
        """Every ``safety_poll_interval``: the bus catches up and, with the fixed-rate
        poll, every consumer wakes (with ``poll_mode = "idle"`` each consumer keeps its own)."""
        ticks = Ticks(self.now, self.config.safety_poll_interval)
        fixed = self.config.poll_mode == "fixed"
        while True:
            yield ticks.next(self.now)
            engine = self.engine
            if engine is None:
                continue
            if fixed:
                self._wake_all()
            elif self._runs(BUS):
                self._call(engine.publish)

    def _reconnects(self):
        """The listener connects again at the end of each silent window (a loop of the
        runtime, started only with ``catch_up``; over PostgreSQL :mod:`.pglisten` says so)."""
        for end in sorted({w[1] for w in self.channel.spec.silent}):
            if end > self.now:
                yield Until(end)
            self._listener_back()

    def _listener_back(self) -> None:
        """The listener connected again after a gap: with ``catch_up``, every consumer reads."""
        if self.config.catch_up and self.engine is not None:
            self._trace.add(self.now_us(), "catch_up", "dispatcher")
            self._wake_all()

    # -- the loops --------------------------------------------------------------
    def _start_consumer(self, engine: OutboxEngine, name: str) -> None:
        self._spawn(self._consumer_loop(engine, name), f"consumer-{name}", key=("consumer", name))
        if self.config.self_hint_every is not None:
            self._spawn(self._status_writes(engine, name), f"status-{name}")

    def _status_writes(self, engine: OutboxEngine, name: str):
        """``self_hint_every``: now and then the consumer writes down what it finished
        (pgqueuer's status-log flush), and that write's trigger sends a hint of its
        own, through the channel like any: the consumer wakes itself."""
        every, rng = self.config.self_hint_every, self._rng("outbox-status", name, self.incarnation)
        while self._running(engine):
            yield Sleep(every.sample(rng))
            seq = engine.unreported.pop(name, None)  # finished rows not written down die with the engine
            if seq is not None and self._live(engine):
                if self._pg is not None:
                    self._pg.notify(str(seq))  # a real NOTIFY, as the write's trigger sends
                else:
                    self._send_hints(self.now_us(), [str(seq)])

    def _consumer_loop(self, engine: OutboxEngine, name: str):
        """One consumer's loop: read (its due rows, then its new ones), handle
        each row, then drain again or sleep until a hint, the poll or a wait's end.
        The batch goes a step at a time (:class:`~.dispatcher.Batch`): one step
        from a wait to the next, so a batch whose rows take no time is one."""
        cfg = self.config
        limit, key = cfg.batch_limit, ("consumer", name)
        late_flag = cfg.wake_mode == "after_fetch"
        cost = self._read_cost(name)
        begin = cost is None and not late_flag  # nothing comes between the read and the first row
        read, advance, effect = engine.read, engine.advance, engine.effect  # the steps, bound once
        wake = None
        while self._running(engine):
            if not late_flag:
                wake = self._arm(key)  # armed before the read: a hint or poll from here on means "read again"
            if begin:
                batch = self._call(read, name, True, self.zero_time_together)
            else:
                batch, wake = yield from self._read_apart(engine, name, cost, wake)
            if batch is None:
                return  # the process died in the read
            while not batch.done:  # every wait of the batch, inline: this is the consumer's hot path
                since = None
                if batch.effect:  # the consumer's own code, outside the store lock: its time is the work's
                    since = self.clock()
                    if self._outside(effect, batch) is None:
                        return
                if batch.backoff is not None:
                    yield Sleep(batch.backoff)  # a retry's backoff, then the next attempt
                    if not self._running(engine):
                        return
                elif batch.duration > 0:
                    yield Work(batch.duration, since)
                # (a process that died meanwhile, with the row in hand, takes no step: it stays owed)
                if self._call(advance, batch) is None:
                    return
            if batch.due or batch.new >= limit or self._woken(wake) or (batch.new and cfg.read_until_empty):
                continue  # drain: a full batch, or woken while handling (or until a read finds nothing)
            # asleep until a hint, the safety poll, or a wait's end (due time, settle, gap).
            # A short batch read everything visible at the fetch; anything committed
            # since sent a hint (which would have signalled ``wake``) or waits for the poll.
            first_due = batch.first_due if not batch.deferred else self._call(engine.next_due, name)
            timeout = self._sleep_for(engine, name, first_due)
            if timeout is False:
                return
            yield Wait(wake, timeout)

    def _read_apart(self, engine: OutboxEngine, name: str, cost, wake):
        """A read whose first row waits for something: its cost in time (what
        commits meanwhile is not in it), and the wake flag cleared after it
        (``wake_mode = "after_fetch"``: a hint during the read is gone). The
        batch (None: the process died) and the wake."""
        batch = self._call(engine.read, name, False, self.zero_time_together)
        if batch is None:
            return None, wake
        if cost is not None:
            yield Work(cost(bool(batch.rows)))
            if not self._live(engine):
                return None, wake
        if self.config.wake_mode == "after_fetch":
            wake = self._arm(("consumer", name))
        return self._call(engine.advance, batch), wake

    def _read_cost(self, name: str) -> Callable[[bool], float] | None:
        """The draw of one read's cost (given whether it found rows), from the
        consumer's own stream; None when reads take no time (the default)."""
        cfg = self.config
        full, empty = cfg.read_cost, cfg.empty_read_cost or cfg.read_cost
        if full == NO_COST and empty == NO_COST:
            return None
        rng = self._rng("outbox-read", name, self.incarnation)
        return lambda found: (full if found else empty).sample(rng)

    def _sleep_for(self, engine: OutboxEngine, name: str, first_due: int | None) -> float | None | bool:
        """How long a consumer that found nothing more sleeps at most (None: until
        woken): until its next due row or the end of a wait (settle, gap); with
        the idle poll, at most the poll interval from now; with ``repoll``, that
        soon if rows are ready that its reads missed. False: the process died."""
        cfg = self.config
        until = engine.wake_at.pop(name, None)
        if first_due is not None and (until is None or first_due < until):
            until = first_due
        timeout = None if until is None else max(0.0, (until - self.now_us()) / US)
        if cfg.poll_mode == "idle" and (timeout is None or timeout > cfg.safety_poll_interval):
            timeout = cfg.safety_poll_interval
        if cfg.repoll is not None and (timeout is None or timeout > cfg.repoll):
            ready = self._call(engine.ready, name)
            if ready is None:
                return False
            if ready:
                timeout = cfg.repoll
        return timeout

    def _retention_loop(self, engine: OutboxEngine):
        ticks = Ticks(self.now, self.config.retention_interval)
        while self._running(engine):
            self._call(engine.prune_once)
            yield ticks.next(self.now)

    # -- writers ------------------------------------------------------------------
    def _workload(self, rate: float, pages: int, start: float, stop: float | None, topic: str | None, rng) -> Loop:
        """Poisson arrivals (:func:`~fanoutsim.kernel.runtime.loops.arrivals`): a
        commit that waits for the store lock delays that commit, never the next arrival."""
        committed = itertools.count(1)

        def commit(due: float) -> None:
            engine = self.engine
            if engine is None:  # a down process commits nothing
                return
            page = f"p{rng.randrange(pages)}"
            body, row_topic = f"v{next(committed)}", topic or f"page:{page}"
            delay = self._late_delay(row_topic) if self._late else 0.0
            if delay > 0:
                self._service(self._late_commit(page, body, row_topic, delay), "late-writer")
            else:
                self._call(engine.commit, page, body, topic=row_topic)

        return self.arrivals(rate, start, stop, rng, commit)

    def _late_commit(self, page: str, body: str, topic: str, delay: float):
        """A writer that takes its seq now and commits ``delay`` seconds later (stamped now)."""
        engine, stamp = self.engine, self.now_us()
        seq = None if engine is None else self._call(engine.reserve)
        if seq is None:
            return
        yield Sleep(delay)
        if engine is self.engine:  # else it died uncommitted: the seq stays a gap
            self._call(engine.commit, page, body, topic=topic, seq=seq, stamp=stamp)

    # -- the API --------------------------------------------------------------
    def register_consumer(
        self, name: str, fn: Callable[[dict], Any] | None = None, *, start="beginning", **guardrails
    ) -> int:
        """Register the consumer ``name`` and give it a cursor, from ``start``
        (``"beginning"``: the oldest retained row, ``"end"``, or a seq); a cursor the
        store already has is kept (a restarted process resumes; see
        :mod:`fanoutsim.designs.outbox.consumers`). Returns the cursor, the last seq
        it has handled. ``fn(row)`` handles one outbox row in the consumer's loop
        (raising: a failed attempt, retried). The guardrails are
        :class:`~.config.ConsumerSpec`'s fields: ``duration``, ``timeout``,
        ``backoff``, ``backoff_cap``, ``jitter``, ``retry_budget``, ``rebuild``
        (seconds of the runtime's clock). All or nothing: a refused call registers
        nothing — a bad guardrail or ``fn`` (ValueError or TypeError naming it), a
        ``start`` that is none of those, past the end of the log or before the
        retention horizon (ValueError); while the dispatcher is down, a RuntimeError."""
        with self._lifecycle:
            with self.registry.registering(name, fn, **guardrails):  # undone if refused
                cursor = self._api(OutboxEngine.add_consumer, name, start)
            with self._proc:
                engine = self.engine
                if (
                    self._looping
                    and engine is not None
                    and self._runs(CONSUMERS)
                    and not self._loop_running(("consumer", name))
                ):
                    self._start_consumer(engine, name)
        return cursor

    def set_cursor(self, name: str, seq) -> int:
        """Point the cursor of the registered consumer ``name`` at ``seq``
        (``"beginning"``, ``"end"`` or a seq, checked as a start is) and wake it: it
        reads from there on, again if it moved back. Returns the new cursor. Refuses
        an unregistered consumer or one without a cursor (KeyError), and a position
        past the end of the log or before the retention horizon (ValueError); while
        the dispatcher is down, a RuntimeError."""
        out = self._api(OutboxEngine.set_cursor, name, seq)
        self._signal(("consumer", name))
        return out

    def reset_consumer(self, name: str) -> int:
        """Rebuild the derived state of the consumer ``name`` from the base tables (its
        ``rebuild(pages)``), then move its cursor to the beginning, so that it replays
        the retained log. Returns the new cursor. Refuses a consumer without a
        ``rebuild`` (ValueError: use :meth:`set_cursor`) and an unregistered one
        (KeyError); while the dispatcher is down, a RuntimeError."""
        out = self._api(OutboxEngine.reset_consumer, name)
        self._wake_all()
        return out

    def _due_us(self, due_at, now: int) -> int | None:
        """``due_at`` (seconds since the start, on ``now``'s scale, or an aware
        datetime) in epoch microseconds; refused if in the past."""
        if due_at is None:
            return None
        if isinstance(due_at, datetime):
            if due_at.tzinfo is None:
                raise ValueError(f"due_at {due_at!r} has no timezone; use an aware datetime (UTC)")
            at = to_us(due_at)
        elif isinstance(due_at, bool) or not isinstance(due_at, numbers.Real):
            raise TypeError(f"due_at must be seconds since start (as now) or an aware datetime, got {due_at!r}")
        elif not math.isfinite(due_at):  # no microsecond stands for it
            raise ValueError(f"due_at must be a finite number of seconds since start, got {due_at!r}")
        else:
            at = self.start_us + round(due_at * US)
        if at < now - round(self._due_slack * US):
            raise ValueError(
                f"due_at {due_at!r} is in the past (now is {(now - self.start_us) / US:g} s "
                "since start); deferred work must be due now or later"
            )
        return max(at, now)

    def commit(
        self,
        page_id: str,
        body: str | None = None,
        *,
        topic: str | None = None,
        kind: str = "page.updated",
        due_at: float | datetime | None = None,
    ) -> int | None:
        """Commit a change to a page now: the page's ``body`` and its outbox row (of
        ``topic``, default ``"page:<page_id>"``, and ``kind``) in one transaction, then
        a hint to the dispatcher. Returns the row's seq (None if a crash took the
        writer down). ``due_at`` makes the row deferred work, handled no earlier:
        seconds since start, on :attr:`now`'s scale (``now + 3``: in three seconds),
        or an aware datetime. Refuses an empty page or topic name and a ``due_at`` in
        the past (ValueError), a ``due_at`` of another type (TypeError); while the
        dispatcher is down, a RuntimeError."""
        with self._proc:
            engine = self._engine_or_raise()
            now = self.now_us()
            due = self._due_us(due_at, now)
            return self._call(engine.commit, page_id, body, topic=topic, kind=kind, due_at=due, _now=now)

    def subscribe(self, topic: str, callback: Callable[[dict], None]) -> None:
        """Add ``callback(row)`` as a live subscriber of ``topic`` on the dispatcher's
        in-memory bus: it is called with each row of that topic the bus carries. It
        is not durable — a crash drops it, and what passed meanwhile is not replayed.
        The callback runs in the dispatcher's loops: keep it short. RuntimeError
        while the dispatcher is down."""
        with self._proc:
            self._engine_or_raise().bus.subscribe(topic, callback)

    def add_workload(
        self, rate: float, *, pages: int = 100, start: float = 0.0, stop: float | None = None, topic: str | None = None
    ) -> None:
        """Commit page changes at Poisson times, ``rate`` per second, to ``pages``
        distinct pages, from ``start`` to ``stop`` (seconds since the start; None: no
        end), each row of ``topic`` (None: ``"page:<id>"``). Returns nothing: the
        writer runs while the dispatcher runs. The arguments are checked as a
        scenario file's ``[[workload]]`` keys are (:class:`~.config.OutboxWorkload`):
        a bad one raises ValueError naming it, before anything runs; a process whose
        role runs no workloads refuses it too."""
        self._refuse_unless(WORKLOADS, "workload (commit with `fanoutsim write`)")
        w = checked_args(OutboxWorkload, rate=rate, pages=pages, start=start, stop=stop, topic=topic)
        rng = self._rng("outbox-workload", self._workloads)
        self._workloads += 1
        self._service(self._workload(w["rate"], w["pages"], w["start"], w["stop"], w["topic"], rng), "writer")
