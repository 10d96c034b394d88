"""The virtual-clock runtime of the leased-consumer design (seed 003).

SimPy processes decide *when* the :class:`~fanoutsim.designs.leases.LeaseEngine`'s
steps run:

* one *client* loop per consumer: every ``poll_interval`` it calls
  ``consume`` and starts a *worker* per lease. A worker works for a drawn
  ``duration`` — which may outlast the lease — then either fails (a seeded
  chance ``fail``, ``poison(lease)`` true, or its optional ``fn(lease)``
  raising: it nacks with ``nack_delay``) or applies its effect (``fn``, if
  given, and the trace's ``delivered``) and acks. An ack that
  comes too late fails closed; recovery has made the event eligible again and
  it is delivered twice. That is how duplicates emerge;
* recovery (lease expiry): once at every start, before anything is served
  (RiffDB recovers its consumers before public operations open), then every
  ``recovery_interval`` — and a pull turns its own consumer's expired leases
  into retries first (see :mod:`fanoutsim.designs.leases.leasing`);
* the retention loop (``retention_interval``); Poisson publishers.

``seek`` and ``retire`` are refused while the consumer holds a live lease
(``outstanding_lease``); :meth:`LeaseSimulation.administer` runs one as an
operator would — the consumer's client paused, the step retried until its
leases are gone — and the scenario files' actions use it.

A crash (a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`LeaseSimulation.crash`) takes the whole node
down — broker and clients — and throws the engine and every worker away;
:meth:`restart` builds a new engine over the same tables and starts the
clients again. Leases held by dead workers stay in the table until recovery
expires them.

The broker API by hand, the table views, the trace and the metrics live in
:class:`~.host.LeaseHost`, shared with the wall-clock runtime
:class:`~.realtime.LeaseRealtime`.
"""
from __future__ import annotations

import random
from typing import Any, Callable

import simpy

from fanoutsim.kernel.faults import Crash, RestoreBackup
from fanoutsim.designs.leases import LeaseConfig, LeaseEngine
from fanoutsim.designs.leases.leasing import Lease
from fanoutsim.designs.leases.identity import ConsumerIdentity, consumer_key
from fanoutsim.designs.leases.tables import check_database
from fanoutsim.designs.leases.host import (
    LeaseClient, LeaseHost, _checked, _secs, checked_lease_config, lease_partitions, lease_window,
)
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, until_ok
from fanoutsim.kernel.validate import Seconds


Client = LeaseClient  # the name this module gave it first


# the administrative steps an operator runs (administer's ``op``)
ADMIN_STEPS = {"seek": LeaseEngine.seek, "retire": LeaseEngine.retire}


class LeaseSimulation(LeaseHost, VirtualRuntime):
    """One seeded run of leased durable consumers under a virtual clock.

    >>> sim = LeaseSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> sim.publish("org-1", "ticket.changed", {"ticket": 7})
    '1:0'
    >>> sim.run(until=2.0)
    >>> sim.checkpoints()["seq"].tolist()
    [1]
    """

    design = "leases"  # its entry in fanoutsim.designs

    _noun = "node"

    def __init__(self, config: LeaseConfig | None = None, seed: int = 0, store: Any = "memory",
                 *, start=None, faults=None, trace: bool = True, database: str = "default") -> None:
        self.config, self.seed = checked_lease_config(config, seed), seed
        self.database = check_database(database)
        self._open(seed, store, start, faults, trace, opener=open_store)
        self.clients: dict[str, Client] = {}
        self._client_procs: dict[str, simpy.Process] = {}  # the client loops of this incarnation
        self._work_rng = random.Random(f"fanoutsim:lease-work:{seed}")
        self._workloads = 0
        self.backups: list = []  # Backups taken (kept outside the store, as backup files are)
        self.restart()
        self._schedule_crashes()
        self._schedule_backups()

    # -- the binding --------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> LeaseEngine:
        return LeaseEngine(self.store, self.config, self.metrics_registry, self._trace, self.faults, self.seed,
                           self.database)

    def _start_loops(self, engine: LeaseEngine) -> None:
        self._call(engine.recover)  # start-up recovery, before anything is served
        if engine is not self.engine:  # it crashed there
            return
        self._spawn(self._recovery_loop(engine))
        self._spawn(self._retention_loop(engine))
        for name in self.clients:
            self._start_client(name)

    # -- the plan's backups ---------------------------------------------------
    def _schedule_backups(self) -> None:
        """A process per ``restore_backup`` fault of the plan."""
        if self.plan is None:
            return
        for spec in self.plan.of(RestoreBackup):
            self.env.process(self._backup_and_restore(spec))

    def _when_up(self, at: float):
        if at > self.env.now:
            yield self.env.timeout(at - self.env.now)
        while not self.up:  # a down node is backed up / restored as soon as it is back
            yield self.env.timeout(0.1)

    def _backup_and_restore(self, spec):
        yield from self._when_up(spec.backup_at)
        b = self.backup()
        if b is None:
            return
        self.backups.append(b)
        yield from self._when_up(spec.at)
        self.restore_backup(b)

    # -- loops ----------------------------------------------------------------
    def _recovery_loop(self, engine):
        try:
            while engine is self.engine:
                yield self.env.timeout(self.config.recovery_interval)
                self._call(engine.recover)
        except simpy.Interrupt:
            return

    def _retention_loop(self, engine):
        try:
            while engine is self.engine:
                self._call(engine.prune_once)
                yield self.env.timeout(self.config.retention_interval)
        except simpy.Interrupt:
            return

    def _start_client(self, name: str) -> None:
        self._client_procs[name] = self._spawn(self._client_loop(self.engine, self.clients[name]))

    def _client_loop(self, engine, client: Client):
        try:
            while engine is self.engine:
                with self._tx() as tx:
                    row = tx.get_lease_consumer(client.name)
                if row is None:  # retired
                    return
                if not client.paused:
                    leases = self._call(engine.consume, client.name, client.batch_limit)
                    for lease in leases or ():
                        self._spawn(self._worker(engine, client, lease))
                yield self.env.timeout(client.poll_interval)
        except simpy.Interrupt:
            return

    def _worker(self, engine, client: Client, lease: Lease):
        env, rng = self.env, self._work_rng
        try:
            d = engine.faults.run_duration(client.name, self.now_us(), client.draw(rng))
            if d > 0:
                yield env.timeout(d)
            if engine is not self.engine:
                return
            error = client.failure(lease, rng)
            if error is None and client.fn is not None:
                try:
                    client.fn(lease)
                except Exception as exc:  # the effect failed: a failed attempt
                    error = f"{type(exc).__name__}: {exc}"
            if error is not None:
                self._call(engine.nack, client.name, lease.event_id, lease.token, lease.incarnation,
                           delay=client.nack_delay, error=error)
                return
            now = self.now_us()
            self._trace.add(now, "delivered", "worker", client.name, lease.event_id, lease.partition,
                            f"attempt {lease.attempt}")
            self.metrics_registry.inc("fanoutsim_lease_delivered_total", consumer=client.name)
            try:
                engine.faults.point("worker.after_effect_before_ack", now, subscription=client.name,
                                    firing=lease.event_id)
            except Crash as c:
                self.crash(c.point, c.downtime)
                return
            self._call(engine.ack, client.name, lease.event_id, lease.token, lease.incarnation)
        except simpy.Interrupt:
            return

    # -- the API --------------------------------------------------------------
    def register_consumer(self, name: str, *, start="beginning", batch_limit: int = 4, in_flight_limit: int = 4,
                          lease_seconds: float = 60.0, client: bool = True, duration=0.01, fail: float = 0.0,
                          poison: Callable[[Lease], bool] | None = None, nack_delay: float = 1.0,
                          poll_interval: float = 0.5, fn: Callable[[Lease], Any] | None = None) -> dict:
        """Create a durable consumer (limits checked against the seed's ranges) and,
        unless ``client=False`` (drive it by hand with :meth:`consume`), start its
        client loop. ``fn(lease)``, if given, is the worker's effect, called when
        its work is done (an exception nacks). ``name``: a consumer name or a
        :class:`~.identity.ConsumerIdentity` (its key). Returns the consumer row.

        Every argument is checked before anything changes. If the consumer
        exists, it is kept as it is (RiffDB's create-if-absent; ``start`` applies
        to a new one only): the same limits and client again are a no-op (a
        client is attached if it has none), other ones raise ValueError."""
        name = consumer_key(name)
        spec = Client(name, duration, fail, poison, nack_delay, poll_interval, fn=fn,
                      max_retry_delay=self.config.max_retry_delay) if client else None
        limits = {"batch_limit": batch_limit, "in_flight_limit": in_flight_limit, "lease_seconds": lease_seconds}
        existing = self._registered(name, limits, spec)
        row = self._api(LeaseEngine.add_consumer, name, start, **limits)
        if existing is None:  # new, or retired and added afresh: this call's client, not the old one's
            old = self._client_procs.pop(name, None)
            if old is not None and old.is_alive:
                old.interrupt()
            self.clients.pop(name, None)
        if spec is not None and name not in self.clients:
            self.clients[name] = spec
        proc = self._client_procs.get(name)
        if self.engine is not None and name in self.clients and (proc is None or not proc.is_alive):
            self._start_client(name)
        return row

    def deploy(self, old: ConsumerIdentity, module_hash: str, *, start="beginning") -> ConsumerIdentity:
        """A changed module is deployed: ``old``'s client code is replaced by the
        new module's, which consumes as a *new* durable consumer (``old`` with
        ``module_hash``), created now from ``start`` with ``old``'s limits and
        client. Nothing pulls ``old`` any more (its workers already running
        finish), but it is not rebound or retired: it keeps its checkpoint and
        its retention fence until an operator retires it. Returns the new identity.
        A refused deploy (a ``start`` past the end of the log, or a new identity
        that exists with other limits: ValueError) changes nothing: ``old`` keeps
        its client and goes on consuming."""
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
        # the new consumer first: a refused registration raises with old's client still running
        if spec is None:
            self.register_consumer(new, start=start, client=False, **limits)
        else:
            self.register_consumer(new, start=start, duration=spec.duration, fail=spec.fail, poison=spec.poison,
                                   nack_delay=spec.nack_delay, poll_interval=spec.poll_interval, fn=spec.fn,
                                   **limits)
        self.clients.pop(old.key, None)
        proc = self._client_procs.pop(old.key, None)
        if proc is not None and proc.is_alive:
            proc.interrupt()
        self._trace.add(self.now_us(), "deployed", "operator", new.key, None, None, old.key)
        return new

    def administer(self, op: str, consumer: str, *args, at: float | None = None, every: float = 0.5,
                   caller=None):
        """Run the administrative step ``op`` (``"seek"``, with a position in
        ``args``, or ``"retire"``) on ``consumer`` as an operator does, at virtual
        time ``at`` (now by default): its client paused (it takes no new lease),
        the step retried every ``every`` s while it is refused with
        ``outstanding_lease`` — until its workers have acked or nacked and
        recovery has expired what dead workers held — or while the node is down,
        then the client resumed. Returns the SimPy process; its value is the
        step's result (``applied`` or ``not_found``). ``caller`` must hold the
        admin grant (None: it does); anything else raises
        :class:`~.authority.Unauthorized` now, before the process starts."""
        if op not in ADMIN_STEPS:
            raise ValueError(f"op must be 'seek' or 'retire', got {op!r}")
        if at is not None:
            _checked(Seconds(unit="virtual seconds"), at, "at")
        _secs(every, "every", positive=True)  # 0 would retry forever at one instant
        consumer = consumer_key(consumer)
        self._authorize(op, consumer, caller)
        return self.env.process(self._administer(op, consumer, args, at, every))

    def _administer(self, op, consumer, args, at, every):
        if at is not None and at > self.env.now:
            yield self.env.timeout(at - self.env.now)
        client = self.clients.get(consumer)
        if client is not None:
            client.paused = True
        try:
            while True:
                if self.engine is not None:
                    result = self._call(ADMIN_STEPS[op].__get__(self.engine), consumer, *args)
                    if result is not None and result != "outstanding_lease":
                        return result
                yield self.env.timeout(every)
        finally:
            if client is not None:
                client.paused = False

    def add_workload(self, rate: float, *, partitions=4, kind: str = "event", start: float = 0.0,
                     stop: float | None = None) -> None:
        """Publish events at Poisson times, ``rate`` per virtual second, each to a
        partition drawn from ``partitions`` (a count, or a list of names), from
        ``start`` to ``stop`` (virtual seconds; None: no end)."""
        partitions = lease_partitions(rate, partitions)
        start, stop = lease_window(kind, start, stop)
        rng = random.Random(f"fanoutsim:lease-workload:{self.seed}:{self._workloads}")
        self._workloads += 1
        self.env.process(self._workload(rate, partitions, kind, start, stop, rng))

    def _workload(self, rate, partitions, kind, start, stop, rng):
        env = self.env
        if start > env.now:
            yield env.timeout(start - env.now)
        k = 0
        while True:
            yield env.timeout(rng.expovariate(rate))
            if stop is not None and env.now >= stop:
                return
            part = rng.choice(partitions)
            k += 1
            if self.engine is not None:  # a down node takes no writes
                self._call(self.engine.publish, [(part, kind, {"n": k})])

    def run(self, until: float | None = None) -> None:
        if not until_ok(self.env, until):
            return
        self._advance(until)
