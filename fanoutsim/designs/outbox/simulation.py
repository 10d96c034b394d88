"""The virtual-clock runtime of the outbox design.

SimPy processes decide *when* the :class:`~fanoutsim.designs.outbox.OutboxEngine`'s
steps run, as :mod:`.simulation` does for the reactor design:

* one loop per consumer — a slow consumer never holds up a fast one. It reads
  (rows past its cursor, and due deferred rows), handles them (due rows first)
  and reads again while the batch was full, due rows were handled, or a hint or
  the poll arrived meanwhile (its wake event is armed before each read);
  otherwise it sleeps until a hint, the safety poll, or the next due time. A
  short batch means everything visible at the read was taken, so no empty
  confirming read is spent (a commit during the batch sends its own hint, or
  waits for the poll like any row whose hint was lost);
* the safety poll: every ``safety_poll_interval`` it wakes every consumer;
* the retention loop; writers (workloads) that commit at Poisson times.

Hints travel through a :class:`~fanoutsim.designs.outbox.notify.NotificationChannel`
shaped by the plan's ``Notifications`` spec. A crash (a
:class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`OutboxSimulation.crash`) stops every loop,
disconnects the listener and throws the engine away (bus subscribers, retry
counts, gap timers); :meth:`restart` builds a new one over the same tables.
``LateCommit`` makes a writer reserve its seq now and commit ``delay`` later
(its ``reactor`` field, if set, matches the row's topic).
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable

import simpy

from fanoutsim.kernel.faults import Crash, LateCommit, Notifications
from fanoutsim.designs.outbox import OutboxConfig, OutboxEngine, OutboxRegistry
from fanoutsim.designs.outbox.dispatcher import DEFERRED
from fanoutsim.designs.outbox.notify import NotificationChannel, listener_pool
from fanoutsim.kernel.timeutil import US
from fanoutsim.designs.outbox.host import OutboxHost, checked_outbox_config
from fanoutsim.designs.outbox.config import OutboxWorkload
from fanoutsim.kernel.scenario import checked_args
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, until_ok
from fanoutsim.kernel.validate import is_real


class OutboxSimulation(OutboxHost, VirtualRuntime):
    """One seeded run of the outbox dispatcher under a virtual clock.

    >>> sim = OutboxSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> seq = sim.commit("p1", "hello")
    >>> sim.run(until=1.0)
    >>> sim.cursors()["seq"].tolist()
    [1]
    """

    design = "outbox"  # its entry in fanoutsim.designs

    _noun = "dispatcher"

    def __init__(self, config: OutboxConfig | None = None, seed: int = 0, store: Any = "memory",
                 *, start=None, faults=None, trace: bool = True) -> None:
        self.config, self.seed = checked_outbox_config(config, seed), seed
        self._open(seed, store, start, faults, trace, opener=open_store)
        self.registry = OutboxRegistry()
        spec = (self.plan.of(Notifications) or [None])[0] if self.plan else None
        self.channel = NotificationChannel(spec, rng=random.Random(f"fanoutsim:notify:{seed}"),
                                           start_us=self.start_us, trace=self._trace,
                                           pool=listener_pool(self.config, self.plan))
        self._late = self.plan.of(LateCommit) if self.plan else []
        self._late_rng = random.Random(f"fanoutsim:late:{seed}")
        self._writer_rng = random.Random(f"fanoutsim:writer:{seed}")
        self._wakes: dict[str, simpy.Event] = {}
        self._workloads = 0
        self.restart()
        self._schedule_crashes()
        self.env.process(self._safety_poll())

    # -- the binding --------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> OutboxEngine:
        return OutboxEngine(
            self.store, self.config, self.registry, self.metrics_registry, self._trace, self.faults,
            random.Random(f"fanoutsim:outbox:{self.seed}:{incarnation}"), notify=self._send_hints)

    def _start_loops(self, engine: OutboxEngine) -> None:
        self.channel.connected = True
        self._call(engine.publish)  # the bus goes live at the end of the log
        self._spawn(self._retention_loop(engine))
        for name in self.registry.consumers:
            self._start_consumer(name)

    def _crashed(self) -> None:
        self.channel.connected = False  # hints sent while down are lost
        self._wakes = {}

    # -- hints ------------------------------------------------------------------
    def _send_hints(self, now: int, payloads: list[str]) -> None:
        for delay, payload in self.channel.send(now, payloads):
            if delay <= 0:
                self._hint(payload)
            else:
                self.env.process(self._hint_later(delay, payload))

    def _hint_later(self, delay: float, payload: str, waited: float = 0.0):
        yield self.env.timeout(delay)
        self._hint(payload, waited)

    def _hint(self, payload: str, waited: float = 0.0) -> None:
        if self.engine is None:
            return
        if self.channel.connected:  # the listener's connection (a shared one may be taken)
            wait = self.channel.connection_wait(self.now_us(), payload, waited)
            if wait is None:
                return
            if wait > 0:
                self.env.process(self._hint_later(wait, payload, waited + wait))
                return
        if not self.channel.arrive(self.now_us(), payload):
            return
        self._trace.add(self.now_us(), "hint", "dispatcher", firing=int(payload))
        self._wake_all()

    def _wake_all(self) -> None:
        if self.engine is not None:
            self._call(self.engine.publish)
        for ev in self._wakes.values():
            if not ev.triggered:
                ev.succeed()

    def _safety_poll(self):
        while True:
            yield self.env.timeout(self.config.safety_poll_interval)
            if self.engine is not None:
                self._wake_all()

    # -- the loops --------------------------------------------------------------
    def _start_consumer(self, name: str) -> None:
        self._wakes[name] = self.env.event()
        self._spawn(self._consumer_loop(self.engine, name))

    def _consumer_loop(self, engine: OutboxEngine, name: str):
        # The engine's steps are called directly, not through ``_call``: this is
        # the hot path, and one ``except Crash`` around the loop does the same.
        env, config = self.env, self.config
        fetch, fetch_due, next_due = engine.fetch, engine.fetch_due, engine.next_due
        begin, finish = engine.begin, engine.finish
        try:
            while engine is self.engine:
                # armed before the read: a hint or poll from here on means "read again"
                wake = self._wakes[name] = env.event()
                # both reads happen at this same instant; due rows are still handled first
                now = self.now_us()
                rows = fetch(now, name)
                first_due = engine.due_at_fetch.get(name)
                due = fetch_due(now, name) if first_due is not None and first_due <= now else ()
                deferred = False
                for row in due:
                    yield from self._handle(engine, name, row, True)
                if due:
                    now = self.now_us()
                for row in rows:
                    # the first attempt inline (nearly every row needs no other)
                    step = begin(now, name, row, False)
                    if step.duration > 0:
                        yield env.timeout(step.duration)
                        if engine is not self.engine:
                            return
                        now = self.now_us()
                    out = finish(now, step, 1)
                    if out.kind == "retry":
                        out = yield from self._handle(engine, name, row, False, out)
                        if out is None:  # the process died meanwhile
                            return
                        now = self.now_us()
                    deferred |= out is DEFERRED
                if engine is not self.engine:
                    return
                if due or len(rows) >= config.batch_limit or wake.triggered:
                    continue  # drain: a full batch, or woken while handling
                # asleep until a hint, the safety poll, or a wait's end (due time, settle, gap).
                # A short batch read everything visible at the fetch; anything committed
                # since sent a hint (which would have triggered ``wake``) or waits for the poll.
                if deferred:
                    first_due = next_due(self.now_us(), name)
                until = engine.wake_at.pop(name, None)
                if first_due is not None and (until is None or first_due < until):
                    until = first_due
                if until is None:
                    yield wake
                else:
                    yield env.any_of([wake, env.timeout(max(0.0, (until - self.now_us()) / US))])
        except Crash as c:
            if engine is self.engine:
                self.crash(c.point, c.downtime)
        except simpy.Interrupt:
            return

    def _handle(self, engine: OutboxEngine, name: str, row: dict, due: bool, failed=None):
        """Begin, wait out the step, finish; again after a backoff while it is retried
        (``failed``: the first attempt's retry outcome, when that ran already).
        The outcome, or None if the engine is gone. A Crash propagates to the loop."""
        attempt = 0 if failed is None else 1
        env = self.env
        if failed is not None:
            yield env.timeout(failed.delay)
        while engine is self.engine:
            step = engine.begin(self.now_us(), name, row, due)
            if step.duration > 0:
                yield env.timeout(step.duration)
                if engine is not self.engine:
                    return None
            attempt += 1
            out = engine.finish(self.now_us(), step, attempt)
            if out.kind != "retry":
                return out
            yield env.timeout(out.delay)
        return None

    def _retention_loop(self, engine: OutboxEngine):
        try:
            while engine is self.engine:
                self._call(engine.prune_once)
                yield self.env.timeout(self.config.retention_interval)
        except simpy.Interrupt:
            return

    # -- the API --------------------------------------------------------------
    def register_consumer(self, name: str, fn: Callable[[dict], Any] | None = None, *,
                          start="beginning", **guardrails) -> int:
        """Register a consumer and give it a cursor (see :mod:`fanoutsim.designs.outbox.consumers`);
        returns the cursor. Guardrails: duration, timeout, backoff, backoff_cap,
        jitter, retry_budget, rebuild. All or nothing: a refused call registers nothing."""
        with self.registry.registering(name, fn, **guardrails):
            cursor = self._api(OutboxEngine.add_consumer, name, start)
        if name not in self._wakes and self.engine is not None:
            self._start_consumer(name)
        return cursor

    def set_cursor(self, name: str, seq) -> int:
        return self._api(OutboxEngine.set_cursor, name, seq)

    def reset_consumer(self, name: str) -> int:
        out = self._api(OutboxEngine.reset_consumer, name)
        self._wake_all()
        return out

    def commit(self, page_id: str, body: str | None = None, *, topic: str | None = None,
               kind: str = "page.updated", due_at: float | None = None) -> int | None:
        """Commit a change to a page now; returns its seq (None if a crash
        took the writer down). ``due_at``: virtual seconds, not in the past."""
        if due_at is not None:
            if not is_real(due_at):
                raise TypeError(f"due_at must be virtual seconds, got {due_at!r}")
            if not math.isfinite(due_at):  # no microsecond stands for it
                raise ValueError(f"due_at must be a finite number of virtual seconds, got {due_at!r}")
            if due_at < self.env.now:
                raise ValueError(f"due_at {due_at} is in the past (now is {self.env.now}); "
                                 "deferred work must be due now or later")
        return self._api(OutboxEngine.commit, page_id, body, topic=topic, kind=kind, due_at=self._at(due_at))

    def subscribe(self, topic: str, callback: Callable[[dict], None]) -> None:
        """A live topic-bus subscriber (gone with the process on a crash)."""
        if self.engine is None:
            raise RuntimeError("the dispatcher is down (crashed); call restart() first")
        self.engine.bus.subscribe(topic, callback)

    def add_workload(self, rate: float, *, pages: int = 100, start: float = 0.0,
                     stop: float | None = None, topic: str | None = None) -> None:
        """Commit page changes at Poisson times, ``rate`` per virtual second;
        the arguments are checked as a scenario file's ``[[workload]]`` keys are."""
        w = checked_args(OutboxWorkload, rate=rate, pages=pages, start=start, stop=stop, topic=topic)
        rng = random.Random(f"fanoutsim:outbox-workload:{self.seed}:{self._workloads}")
        self._workloads += 1
        self.env.process(self._workload(w["rate"], w["pages"], w["start"], w["stop"], w["topic"], rng))

    def _workload(self, rate, pages, start, stop, topic, rng):
        env = self.env
        if start > env.now:
            yield env.timeout(start - env.now)
        k = 0
        while True:
            yield env.timeout(rng.expovariate(rate))
            if stop is not None and env.now >= stop:
                return
            engine = self.engine
            if engine is None:  # a down process commits nothing
                continue
            page = f"p{rng.randrange(pages)}"
            k += 1
            row_topic = topic or f"page:{page}"
            delay = self._late_delay(row_topic) if self._late else 0.0
            if delay > 0:
                env.process(self._late_commit(page, f"v{k}", row_topic, delay))
            else:
                self._call(engine.commit, page, f"v{k}", topic=row_topic)

    def _late_commit(self, page, body, topic, delay):
        """A writer that takes its seq now and commits ``delay`` seconds later."""
        engine, stamp = self.engine, self.now_us()
        seq = None if engine is None else self._call(engine.reserve)
        if seq is None:
            return
        yield self.env.timeout(delay)
        if engine is self.engine:  # else died uncommitted: a gap
            self._call(engine.commit, page, body, topic=topic, seq=seq, stamp=stamp)

    def run(self, until: float | None = None) -> None:
        if not until_ok(self.env, until):
            return
        self._advance(until)
