"""The leased-consumer node's loops and public API, written once for both clocks.

:class:`LeaseRuntime` decides *when* the :class:`~fanoutsim.designs.leases.LeaseEngine`'s
steps run; a driver decides how time passes (:class:`~.simulation.LeaseSimulation`
on SimPy's virtual clock, :class:`~.realtime.LeaseRealtime` on threads and the
wall clock). Its loops are generators that yield what they wait for
(:mod:`fanoutsim.kernel.runtime.loops`):

* one *client* loop per consumer: every ``poll_interval`` it calls
  ``consume`` and starts a *worker* per lease. The broker bounds the leases
  (batch and in-flight limits, the partition's window); a client also stops
  polling while it has ``2 x in_flight_limit`` workers alive — the live
  leases' and those still working on a lease that expired — so a hung ``fn``
  cannot grow its workers without bound;
* a worker works for its drawn ``duration`` (a fault plan's slow or wedged
  durations included) — which may outlast the lease — then either fails (a
  seeded chance ``fail``, ``poison(lease)`` true, or its optional
  ``fn(lease)`` raising: it nacks with ``nack_delay``) or applies its effect
  (``fn``, if given, outside the store lock) and delivers: the trace's
  ``delivered`` and the ack are one step, with the
  ``worker.after_effect_before_ack`` point between them. An ack that comes too
  late fails closed; recovery has made the event eligible again and it is
  delivered twice. That is how duplicates emerge;
* recovery (lease expiry): once at every start, before anything is served
  (RiffDB recovers its consumers before public operations open), then every
  ``recovery_interval`` — and a pull turns its own consumer's expired leases
  into retries first (see :mod:`fanoutsim.designs.leases.leasing`);
* the retention loop (``retention_interval``); Poisson publishers; the plan's
  backups and restores.

``seek`` and ``retire`` are refused while the consumer holds a live lease
(``outstanding_lease``); :meth:`LeaseRuntime.administer` runs one as an
operator would — the consumer's client paused, the step retried until its
leases are gone — and the scenario files' actions use it.

A crash (a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`crash`) takes the whole node down — broker and
clients — and throws the engine and every worker away; a restart builds a
new engine over the same tables and starts the clients again. Leases held by
dead workers stay in the table until recovery expires them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from fanoutsim.designs.leases.config import LeaseConfig
from fanoutsim.designs.leases.engine import TRACE, LeaseEngine
from fanoutsim.designs.leases.faults import RestoreBackup
from fanoutsim.designs.leases.host import (
    LeaseClient,
    LeaseHost,
    _checked,
    _secs,
    lease_partitions,
    lease_window,
)
from fanoutsim.designs.leases.identity import ConsumerIdentity, consumer_key
from fanoutsim.designs.leases.leasing import Lease
from fanoutsim.designs.leases.roles import CLIENTS, RECOVERY, RETENTION, ROLES
from fanoutsim.designs.leases.tables import check_database
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.driver import Loop
from fanoutsim.kernel.runtime.loops import Sleep, Ticks, Wait, Work
from fanoutsim.kernel.runtime.roles import WORKLOADS
from fanoutsim.kernel.validate import Seconds

_TIMER = ("recovery", "deadline")  # the wake of the deadline timer (expiry_timer = "deadline")
#: A client polls while it has fewer than this many times its ``in_flight_limit`` workers alive.
WORKERS_PER_LEASE = 2  # a client polls while it has fewer than this x in_flight_limit workers alive
DOWN_RETRY = 0.1  # seconds between an operator's tries while the node is down

#: The administrative steps an operator runs (:meth:`LeaseRuntime.administer`'s ``op``).
ADMIN_STEPS = {"seek": LeaseEngine.seek, "retire": LeaseEngine.retire}


class LeaseRuntime(LeaseHost):
    """The leases design on either clock: its loops and API. A face
    (``LeaseSimulation``, ``LeaseRealtime``) adds the driver and calls
    :meth:`_setup` once the driver's ``_open`` has run."""

    #: The design's name, its entry in :mod:`fanoutsim.designs`.
    design = "leases"  # its entry in fanoutsim.designs
    _noun = "node"
    #: The leases' names for the trace's columns: ``consumer``, ``event_id``, ``partition``.
    trace_schema = TRACE
    #: The parts of the node one process may run: ``clients``, ``recovery``, ``retention``,
    #: ``publishers`` (see :mod:`.roles`).
    roles = ROLES  # one part of the node per process (see .roles): _start_loops asks _runs
    # what the faces (fanoutsim.kernel.runtime.faces) build it from
    #: The config class the runtimes take (``config=None``: its defaults).
    config_class = LeaseConfig
    _opener = staticmethod(open_store)
    #: The wall clock's default store: a DuckDB file in the working directory.
    wall_store = "leases.duckdb"  # the wall clock's default store

    #: The run's :class:`~fanoutsim.designs.leases.config.LeaseConfig`.
    config: LeaseConfig
    engine: LeaseEngine | None
    #: Each registered consumer's client code, by consumer key (code: it survives a crash).
    clients: dict[str, LeaseClient]
    #: The backups a fault plan's ``restore_backup`` took (kept outside the store, as backup
    #: files are).
    backups: list

    def _options(self, *, database: str = "default") -> None:
        self.database = check_database(database)  # the named database this node's broker serves

    def _setup(self) -> None:
        self.clients: dict[str, LeaseClient] = {}
        self._work_rng = self._rng("lease-work")
        self._cost_rng = self._rng("lease-costs")  # drawn from only with LeaseConfig's measured costs
        self._workloads = 0
        self.backups: list = []  # Backups taken (kept outside the store, as backup files are)

    # -- the binding --------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> LeaseEngine:
        return LeaseEngine(
            self.store, self.config, self.metrics_registry, self._trace, self.faults, self.seed, self.database
        )

    def _start_loops(self, engine: LeaseEngine) -> None:
        # the groups of loops this process runs (every one, unless a role picks some)
        if self._runs(RECOVERY):
            self._call(engine.recover)  # start-up recovery, before anything is served
            if engine is not self.engine:  # it crashed there
                return
            self._spawn(self._recovery_loop(engine), "recovery")
        if self._runs(RETENTION):
            self._spawn(self._retention_loop(engine), "retention")
        if self._runs(CLIENTS):
            for name in list(self.clients):
                self._start_client(engine, name)

    def _schedule_crashes(self) -> None:
        """The plan's crashes, and a loop per ``restore_backup`` fault: a backup at
        ``backup_at``, restored at ``at`` (while the node is down, as soon as it
        is back) — an operator's step, where recovery runs."""
        super()._schedule_crashes()
        if not self._runs(RECOVERY):
            return
        for spec in self.plan.of(RestoreBackup) if self.plan is not None else ():
            self._service(self._backup_and_restore(spec), "backup")

    # -- the plan's backups ---------------------------------------------------
    def _when_up(self, at: float, step: Callable[[], Any]):
        """``step()`` at ``at``, or once the node is back up; its result."""
        if at > self.now:
            yield Sleep(at - self.now)
        while True:
            if self.up:
                try:
                    return step()
                except RuntimeError:  # (wall clock) it went down since: again once it is back
                    pass
            yield Sleep(DOWN_RETRY)

    def _backup_and_restore(self, spec: RestoreBackup):
        b = yield from self._when_up(spec.backup_at, self.backup)
        if b is None:  # a crash took the node down inside the backup
            return
        self.backups.append(b)
        yield from self._when_up(spec.at, lambda: self.restore_backup(b))

    # -- loops ----------------------------------------------------------------
    def _recovery_loop(self, engine: LeaseEngine):
        if self.config.expiry_timer == "deadline":
            yield from self._deadline_loop(engine)
            return
        ticks = Ticks(self.now, self.config.recovery_interval)
        while self._running(engine):
            yield ticks.next(self.now)  # the first pass one interval in: the start recovered
            self._call(engine.recover)

    def _deadline_loop(self, engine: LeaseEngine):
        """``expiry_timer = "deadline"``: recovery at the earliest lease's expiry
        (nats-server's pending timer), at most ``recovery_interval`` on; a pull
        that grants a lease wakes it (the new lease may expire first)."""
        while self._running(engine):
            wake = self._arm(_TIMER)
            first = self._call(engine.next_due)
            yield Wait(wake, self._until(first, self.config.recovery_interval))
            self._call(engine.recover)

    def _until(self, due: int | None, most: float) -> float:
        """Seconds from now until ``due`` (µs), at most ``most`` (``due`` None or past: ``most``)."""
        if due is None:
            return most
        left = (due - self.now_us()) / 1e6
        return most if left <= 0 else min(left, most)

    def _retention_loop(self, engine: LeaseEngine):
        ticks = Ticks(self.now, self.config.retention_interval)
        while self._running(engine):
            self._call(engine.prune_once)
            yield ticks.next(self.now)

    def _start_client(self, engine: LeaseEngine, name: str) -> None:
        client = self.clients[name]
        loop = self._pull_loop if client.pull_mode == "wait" else self._client_loop
        self._spawn(loop(engine, client), f"client-{name}", key=("client", name))

    def _client_loop(self, engine: LeaseEngine, client: LeaseClient):
        working = [0]  # this client's workers alive (each counts itself out)
        ticks = Ticks(self.now, client.poll_interval)
        while self._running(engine):
            with self._proc:  # the row read, the consume and the spawns: one step
                with self._tx() as tx:
                    row = tx.get_lease_consumer(client.name)
                if row is None:  # retired
                    return
                if not client.paused and working[0] < WORKERS_PER_LEASE * row["in_flight_limit"]:
                    for lease in self._call(engine.consume, client.name, client.batch_limit) or ():
                        working[0] += 1
                        self._spawn_task(self._worker(engine, client, lease, working), f"worker-{client.name}")
                    self._granted()
            yield ticks.next(self.now)

    def _pull_loop(self, engine: LeaseEngine, client: LeaseClient):
        """``pull_mode = "wait"``: a broker client's fetch loop (nats.py ``fetch``,
        ``XREADGROUP ... BLOCK``). It keeps up to its batch limit of workers
        busy: it pulls for its free slots at once, again as a worker ends, and
        a pull that finds nothing waits for a publish, or the consumer's next
        lease expiry or retry, at most ``poll_interval``."""
        busy = [0]  # this client's workers alive (each counts itself out and wakes the loop)
        key = ("pull", client.name)
        while self._running(engine):
            wake = self._arm(key)
            with self._proc:  # the row read, the consume and the spawns: one step
                with self._tx() as tx:
                    row = tx.get_lease_consumer(client.name)
                if row is None:  # retired
                    return
                free = (client.batch_limit or row["batch_limit"]) - busy[0]
                if not client.paused and free > 0:
                    for lease in self._call(engine.consume, client.name, free) or ():
                        busy[0] += 1
                        self._spawn_task(self._worker(engine, client, lease, busy, key), f"worker-{client.name}")
                    self._granted()
            due = self._call(engine.next_due, client.name) if free > 0 else None
            yield Wait(wake, self._until(due, client.poll_interval))

    def _granted(self) -> None:
        """A pull may have granted a lease: the deadline timer looks again."""
        if self.config.expiry_timer == "deadline":
            self._signal(_TIMER)

    def _published(self) -> None:
        """An event was published: every waiting pull looks again."""
        for name, client in self.clients.items():
            if client.pull_mode == "wait":
                self._signal(("pull", name))

    def _worker(self, engine: LeaseEngine, client: LeaseClient, lease: Lease, working: list, key=None):
        try:
            rng, cfg = self._work_rng, self.config
            if cfg.deliver_cost is not None:  # the hand-off: the lease reaches its worker
                yield Work(cfg.deliver_cost.sample(self._cost_rng))
                if not self._live(engine):
                    return
            d = engine.faults.run_duration(client.name, self.now_us(), client.draw(rng))
            if d > 0:
                yield from self._work(engine, client, lease, d)
            if not self._live(engine):
                return  # died (or a stop ran out of time) with the lease in hand
            error = client.failure(lease, rng)
            if error is None and client.fn is not None:
                try:
                    client.fn(lease)  # the effect, for real, outside the store lock
                except Exception as exc:  # the effect failed: a failed attempt
                    error = f"{type(exc).__name__}: {exc}"
            if error is not None:
                yield from self._fail(engine, client, lease, error)
                return
            # an fn still running when the node died is cut off before its effect
            if cfg.ack_cost is None:
                self._call(engine.deliver, client.name, lease)
                return
            self._call(engine.deliver, client.name, lease, then_ack=False)
            yield from self._answer(engine, engine.ack, client.name, lease.event_id, lease.token, lease.incarnation)
        finally:
            working[0] -= 1
            if key is not None and self._live(engine):  # a dead one's pull loop is gone (a new one may arm the key)
                self._signal(key)

    def _work(self, engine: LeaseEngine, client: LeaseClient, lease: Lease, d: float):
        """``d`` seconds of a worker's work, telling the broker it is still at it
        every ``in_progress_every`` seconds, if the client does."""
        every = client.in_progress_every
        while every is not None and d > every:
            yield Work(every)
            d -= every
            if not self._live(engine):
                return
            self._call(engine.in_progress, client.name, lease.event_id, lease.token, lease.incarnation)
        yield Work(d)

    def _fail(self, engine: LeaseEngine, client: LeaseClient, lease: Lease, error: str):
        """A failed attempt, told the broker: a poison event terminated (the
        client's ``poison_action = "term"``), anything else nacked."""
        if error == "poison" and client.poison_action == "term":
            step, kw = engine.term, {"reason": error}
        else:
            step, kw = engine.nack, {"delay": client.nack_delay, "error": error}
        yield from self._answer(engine, step, client.name, lease.event_id, lease.token, lease.incarnation, **kw)

    def _answer(self, engine: LeaseEngine, step, *args, **kwargs):
        """A worker's answer to the broker (an ack, nack or term), after the
        ack's measured cost (``LeaseConfig.ack_cost``), if any."""
        cost = self.config.ack_cost
        if cost is not None:
            yield Work(cost.sample(self._cost_rng))
            if not self._live(engine):
                return
        self._call(step, *args, **kwargs)

    # -- the API --------------------------------------------------------------
    def register_consumer(
        self,
        name: str,
        *,
        start="beginning",
        batch_limit: int | None = None,
        in_flight_limit: int | None = None,
        lease_seconds: float | None = None,
        client: bool = True,
        duration=0.01,
        fail: float = 0.0,
        poison: Callable[[Lease], bool] | None = None,
        nack_delay: float = 1.0,
        poll_interval: float = 0.5,
        fn: Callable[[Lease], Any] | None = None,
        pull_mode: str = "poll",
        in_progress_every: float | None = None,
        poison_action: str = "nack",
    ) -> dict:
        """Create a durable consumer and, unless ``client=False`` (drive it by hand
        with :meth:`consume`), run its client loop while the node runs. Returns the
        consumer row (``consumer``, ``start_seq``, the three limits, ``revision``).

        ``name``: a consumer name or a :class:`~.identity.ConsumerIdentity` (its
        key). ``start``: where it begins reading, ``"beginning"`` (the oldest
        retained event), ``"end"`` or a seq. The delivery limits, RiffDB's:
        ``batch_limit`` and ``in_flight_limit`` 1 through 8 leases,
        ``lease_seconds`` 5 through 900 seconds, or the brokers' wider ranges under
        ``LeaseConfig(limits="open")``; one left out (None) is the config's
        (``LeaseConfig.batch_limit``, ... — 4, 4 and 60 s by default). With a
        ``LeaseConfig.backoff`` list the lease is its first entry, whatever
        ``lease_seconds`` says (nats-server: BackOff overrides AckWait). The client: every
        ``poll_interval`` seconds it pulls and starts a worker per lease, who works
        for ``duration`` seconds (a number, or ``callable(rng)`` drawing one), then
        fails with probability ``fail`` (0 through 1) or when ``poison(lease)`` is
        true — nacking with ``nack_delay`` seconds (0 through
        ``config.max_retry_delay``) — or calls ``fn(lease)``, its effect (an
        exception nacks), and acks. ``pull_mode``, ``in_progress_every`` and
        ``poison_action``: what a broker's client does (:class:`~.host.LeaseClient`).

        Every argument is checked before anything changes: a value outside its
        range raises ValueError naming it and the range; a ``fn`` or ``poison`` that
        is not callable, TypeError; a ``start`` past the end of the log or inside
        pruned history, ValueError. If the consumer exists (a restarted process
        resumes from its checkpoints), it is kept as it is (RiffDB's
        create-if-absent; ``start`` applies to a new one only): the same limits and
        client again are a no-op (a client is attached if it has none), other ones
        raise ValueError naming each setting that differs."""
        name = consumer_key(name)
        spec = (
            LeaseClient(
                name,
                duration,
                fail,
                poison,
                nack_delay,
                poll_interval,
                fn=fn,
                max_retry_delay=self.config.max_retry_delay,
                pull_mode=pull_mode,
                in_progress_every=in_progress_every,
                poison_action=poison_action,
            )
            if client
            else None
        )
        return self._add(name, start, self._limits(batch_limit, in_flight_limit, lease_seconds), spec)

    def _add(self, name: str, start, limits: dict, spec: LeaseClient | None) -> dict:
        """:meth:`register_consumer`'s change, once every argument is checked: the
        consumer's row (create-if-absent), then its client attached, and started if
        the node runs; the row."""
        with self._lifecycle:
            existing = self._registered(name, limits, spec)  # other settings than it holds: refused
            row = self._api(LeaseEngine.add_consumer, name, start, **limits)
            with self._proc:
                if existing is None:  # new, or retired and added afresh: this call's client, not the old one's
                    self._cancel(("client", name))
                    self.clients.pop(name, None)
                if spec is not None and name not in self.clients:
                    self.clients[name] = spec
                engine = self.engine
                if (
                    self._looping
                    and engine is not None
                    and name in self.clients
                    and self._runs(CLIENTS)
                    and not self._loop_running(("client", name))
                ):
                    self._start_client(engine, name)
        return row

    def _limits(self, batch_limit, in_flight_limit, lease_seconds) -> dict:
        """A registration's delivery limits as the consumer's row will hold them:
        the config's for each left out, the lease a BackOff list's first entry."""
        given = {"batch_limit": batch_limit, "in_flight_limit": in_flight_limit, "lease_seconds": lease_seconds}
        limits = {**self.config.defaults(), **{k: v for k, v in given.items() if v is not None}}
        limits["lease_seconds"] = self.config.first_lease(limits["lease_seconds"])
        return limits

    def deploy(self, old: ConsumerIdentity, module_hash: str, *, start="beginning") -> ConsumerIdentity:
        """A changed module is deployed: ``old``'s client code is replaced by the
        new module's, which consumes as a *new* durable consumer (``old`` with
        ``module_hash``), created now from ``start`` with ``old``'s limits and
        client. Nothing pulls ``old`` any more (its workers already running
        finish), but it is not rebound or retired: it keeps its checkpoint and
        its retention fence until an operator retires it. Returns the new
        identity. A refused deployment (the new consumer cannot be created)
        changes nothing: ``old`` keeps consuming."""
        if not isinstance(old, ConsumerIdentity):
            raise TypeError(f"old must be a ConsumerIdentity, got {type(old).__name__}")
        new = old.with_module(module_hash)
        if new.key == old.key:
            raise ValueError(f"module_hash {module_hash!r} is the module {old.key!r} already runs")
        with self._tx() as tx:
            row = tx.get_lease_consumer(old.key)
        if row is None:
            raise KeyError(f"no consumer {old.key!r} to replace")
        spec = self.clients.get(old.key)
        limits = {k: row[k] for k in ("batch_limit", "in_flight_limit", "lease_seconds")}
        if spec is None:
            self.register_consumer(new, start=start, client=False, **limits)
        else:
            self.register_consumer(
                new,
                start=start,
                duration=spec.duration,
                fail=spec.fail,
                poison=spec.poison,
                nack_delay=spec.nack_delay,
                poll_interval=spec.poll_interval,
                fn=spec.fn,
                pull_mode=spec.pull_mode,
                in_progress_every=spec.in_progress_every,
                poison_action=spec.poison_action,
                **limits,
            )
        with self._proc:  # the new consumer exists: only now does the old one stop pulling
            self.clients.pop(old.key, None)
            self._cancel(("client", old.key))
        self._trace.add(self.now_us(), "deployed", "operator", new.key, None, None, old.key)
        return new

    def administer(self, op: str, consumer: str, *args, at: float | None = None, every: float = 0.5, caller=None):
        """Run the administrative step ``op`` (``"seek"``, with a position in
        ``args``, or ``"retire"``) on ``consumer`` as an operator does, at time
        ``at`` (seconds since the start; now by default): its client paused (it
        takes no new lease), the step retried every ``every`` s while it is
        refused with ``outstanding_lease`` — until its workers have acked or
        nacked and recovery has expired what dead workers held — or while the
        node is down, then the client resumed. Returns the loop (under SimPy a
        process whose value is the step's result, ``applied`` or ``not_found``).
        ``caller`` must hold the admin grant (None: it does); anything else
        raises :class:`~.authority.Unauthorized` now, before the loop starts."""
        if op not in ADMIN_STEPS:
            raise ValueError(f"op must be 'seek' or 'retire', got {op!r}")
        if at is not None:
            _checked(Seconds(unit="seconds since the start"), at, "at")
        _secs(every, "every", positive=True)  # 0 would retry forever at one instant
        consumer = consumer_key(consumer)
        self._authorize(op, consumer, caller)
        return self._service(self._administer(op, consumer, args, at, every), f"administer-{op}")

    def _administer(self, op: str, consumer: str, args: tuple, at: float | None, every: float):
        if at is not None and at > self.now:
            yield Sleep(at - self.now)
        client = self.clients.get(consumer)
        if client is not None:
            client.paused = True
        try:
            while True:
                engine = self.engine
                if engine is not None:
                    result = self._call(ADMIN_STEPS[op].__get__(engine), consumer, *args)
                    if result is not None and result != "outstanding_lease":
                        return result
                yield Sleep(every)
        finally:
            if client is not None:
                client.paused = False

    def add_workload(
        self, rate: float, *, partitions=4, kind: str = "event", start: float = 0.0, stop: float | None = None
    ) -> None:
        """Publish events at Poisson times, ``rate`` per second, each to a
        partition drawn from ``partitions`` (a count: ``p0``, ``p1``, ...; or a list
        of names), from ``start`` to ``stop`` (seconds since the start; None: no
        end), each of ``kind`` with the payload ``{"n": <its number>}``. Returns
        nothing: the publisher runs while the node runs (its draws go on while the
        node is down; a down node takes no writes). Refuses, before anything runs
        (ValueError): a rate that is not a finite number > 0, a count below 1 or an
        empty or unnamed partition list, an empty kind, and a ``stop`` not after
        ``start``; a process whose role runs no workloads refuses it too."""
        self._refuse_unless(WORKLOADS, "workload (publish with `fanoutsim write`)")
        partitions = lease_partitions(rate, partitions)
        start, stop = lease_window(kind, start, stop)
        rng = self._rng("lease-workload", self._workloads)
        self._workloads += 1
        self._service(self._workload(float(rate), partitions, kind, start, stop, rng), "publisher")

    def _workload(self, rate: float, partitions: list, kind: str, start: float, stop: float | None, rng) -> Loop:
        published = itertools.count(1)

        def publish(due: float) -> None:
            part, n = rng.choice(partitions), next(published)  # drawn even while down: the schedule is the writer's
            engine = self.engine
            if engine is not None:  # a down node takes no writes
                self._call(engine.publish, [(part, kind, {"n": n})])
                self._published()

        return self.arrivals(rate, start, stop, rng, publish)
