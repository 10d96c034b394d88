"""Leased durable consumers on the wall clock: the same engine, threads, real time.

The counterpart of :class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`, in the
style of :class:`~fanoutsim.designs.outbox.realtime.OutboxRealtime`. Nothing
of the leasing logic lives here: the threads below only decide *when* to call
the :class:`~fanoutsim.designs.leases.LeaseEngine`'s steps, with ``time.time()`` (UTC
microseconds) as the clock and ``Event.wait`` as the sleep. The store is a
DuckDB file by default, so the log, the consumers, their checkpoints, leases,
retries and dead letters outlive the process: a new ``LeaseRealtime`` over the
same file (after a stop, a crash or ``kill -9``) resumes from the checkpoints.

Threads, one set per incarnation of the node (broker and clients together):

* one *client* loop per consumer: every ``poll_interval`` seconds it calls
  ``consume`` and starts a *worker* thread per lease. The broker bounds the
  leases (batch and in-flight limits, the partition's window); a client also stops
  polling while it has ``2 x in_flight_limit`` workers alive — the live
  leases' and those still working on a lease that expired — so a hung ``fn``
  cannot grow the threads without bound;
* a worker sleeps out its drawn ``duration`` (a fault plan's slow or wedged
  durations included), then fails (``fail``, ``poison(lease)``) or runs the
  client's optional ``fn(lease)`` for real, in its own thread — the effect;
  an exception from it is a failure — and acks (a failure nacks with
  ``nack_delay``). The lease may have expired while it worked: then its ack
  fails closed (``expired``; ``no_lease`` or ``wrong_token`` once recovery has
  expired it and the event was leased again) and the event is delivered
  twice, for real. That is how duplicates emerge on the wall clock;
* recovery once at every start, before the loops (leases a dead process
  held that have expired become retries), then the recovery loop (every
  ``recovery_interval``: lease expiry), the
  retention loop (every ``retention_interval``) and one publisher thread per
  workload (Poisson times, ``rate`` per second).

Times a user passes — workload ``start``/``stop``, fault windows, ``CrashAt``
— are seconds since :meth:`LeaseRealtime.start` (before it: since the runtime
was made), the scale of :attr:`LeaseRealtime.now`, as they are virtual
seconds since the start under SimPy. Lease lengths are real seconds: the
seed's range, 5 through 900, holds on either clock.

A crash — a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`LeaseRealtime.crash` — is an instant: every store
step goes through one lock, and the crash takes the engine away under it, so
no thread of the dead incarnation touches the tables afterwards (each checks
``engine is self.engine`` before every step; a worker in its sleep is woken
and gives up). A worker's effect, its ``delivered`` trace event and its ack
are one step under that lock, with the ``worker.after_effect_before_ack``
point between the effect and the ack, as under SimPy; an ``fn`` still running
when the node dies is treated as cut off before its effect. Leases held by
dead workers stay in the table until recovery expires them (so a crash costs
a partition up to ``lease_seconds``). After the downtime a new engine starts
over the same tables, with new client loops.

Life cycle, as ``OutboxRealtime``'s::

    rt = LeaseRealtime(store="leases.duckdb")
    rt.register_consumer("indexer", fn=index_event, lease_seconds=30)
    rt.start()                     # threads run in the background; returns at once
    rt.publish("org-1", "ticket.changed", {"ticket": 7})   # any thread
    rt.stop()                      # graceful and bounded: workers in hand finish
    rt.close()                     # releases the file

``start()`` twice raises; ``stop()`` twice is a no-op; ``publish()`` (and the
rest of the broker API) after ``stop()`` raises; reads — the table views,
``status``, ``trace``, ``metrics`` — work until ``close()``. Every start and every clean stop is a row of ``runner_log``, so
a start that follows no stop marks a kill.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any, Callable

from fanoutsim.kernel.faults import Crash, RestoreBackup
from fanoutsim.designs.leases.tables import check_database
from fanoutsim.designs.leases import LeaseConfig, LeaseEngine
from fanoutsim.designs.leases.leasing import Lease
from fanoutsim.designs.leases.identity import consumer_key
from fanoutsim.designs.leases.host import (
    LeaseClient, LeaseHost, checked_lease_config, lease_partitions, lease_window,
)
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.wallclock import SteppedWallRuntime, every, wall_us

WORKERS_PER_LEASE = 2  # a client polls while it has fewer than this x in_flight_limit workers alive


@dataclass
class _Publisher:
    """One workload: its settings, its seeded RNG and how many it published."""

    rate: float
    partitions: list
    kind: str
    start: float
    stop: float | None
    rng: random.Random
    k: int = 0


class LeaseRealtime(LeaseHost, SteppedWallRuntime):
    """Leased durable consumers running for real, on the wall clock."""

    design = "leases"  # its entry in fanoutsim.designs

    _noun = "node"

    def __init__(self, config: LeaseConfig | None = None, store: Any = "leases.duckdb", faults=None,
                 *, seed: int = 0, trace: bool = True, stop_timeout: float = 10.0,
                 database: str = "default") -> None:
        self.config = checked_lease_config(config, seed)
        self.database = check_database(database)
        self.seed = seed
        self._open(seed, store, faults, trace, stop_timeout, opener=open_store)
        self.clients: dict[str, LeaseClient] = {}
        self._polling: set[str] = set()     # consumers whose client loop runs in this incarnation
        self._publishers: list[_Publisher] = []
        self.backups: list = []  # Backups taken by the plan's restore_backup faults
        self.engine: LeaseEngine | None = self._new_engine(0)
        self._reader = self._new_engine(0)  # for reads only (status), whatever the node's state

    # -- the plan's backups -------------------------------------------------------
    def _schedule_crashes(self, closing: threading.Event) -> list[threading.Thread]:
        """The plan's crashes, and a thread per ``restore_backup`` fault (a backup
        at ``backup_at``, restored at ``at``; while the node is down, as soon
        as it is back), as the virtual clock does."""
        threads = super()._schedule_crashes(closing)
        for spec in (self.plan.of(RestoreBackup) if self.plan is not None else ()):
            t = threading.Thread(target=self._backup_and_restore, args=(spec, closing), daemon=True,
                                 name=f"fanoutsim-{spec.kind}")
            t.start()
            threads.append(t)
        return threads

    def _backup_and_restore(self, spec, closing: threading.Event) -> None:
        b = None
        for at, restore in ((spec.backup_at, False), (spec.at, True)):
            if closing.wait(max(0.0, at - self.now)):
                return
            while True:
                try:
                    if restore:
                        self.restore_backup(b)
                    else:
                        b = self.backup()
                    break
                except RuntimeError:  # down: again once it is back
                    if closing.wait(0.05):
                        return
            if b is None:  # a crash took the node down inside the backup
                return
            if not restore:
                self.backups.append(b)

    # -- the binding ------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> LeaseEngine:
        return LeaseEngine(self.store, self.config, self.metrics_registry, self._trace, self.faults, self.seed,
                           self.database)

    def _start_loops(self, engine: LeaseEngine) -> None:
        """One incarnation's loops and publishers (``_proc`` held), after the
        start-up recovery: expired leases become retries before anything is served."""
        self._call(engine.recover)
        if engine is not self.engine:  # it crashed there; a restart is on its way
            return
        self._polling = set()
        stop = self._stop
        self._spawn("recovery", self._recovery_loop, engine, stop)
        self._spawn("retention", self._retention_loop, engine, stop)
        for name in list(self.clients):
            self._start_client(engine, name)
        for p in self._publishers:
            self._spawn("publisher", self._workload, engine, stop, p)

    def _start_client(self, engine: LeaseEngine, name: str) -> None:
        self._polling.add(name)
        self._spawn(f"client-{name}", self._client_loop, engine, self._stop, self._killed, self.clients[name])

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return (f"the node is {self._state}; publish and the broker API need a running (or not yet "
                    f"started) LeaseRealtime: make a new one over the same store")
        return "the node is down (crashed); it restarts after its downtime, or call restart()"

    # -- loops ------------------------------------------------------------------
    def _recovery_loop(self, engine: LeaseEngine, stop: threading.Event) -> None:
        interval = self.config.recovery_interval
        if not stop.wait(interval):  # as under SimPy: the first pass one interval in
            every(stop, interval, lambda: self._call(engine.recover), lambda: engine is self.engine)

    def _retention_loop(self, engine: LeaseEngine, stop: threading.Event) -> None:
        every(stop, self.config.retention_interval, lambda: self._call(engine.prune_once),
              lambda: engine is self.engine)

    def _client_loop(self, engine: LeaseEngine, stop: threading.Event, killed: threading.Event,
                     client: LeaseClient) -> None:
        workers: list[threading.Thread] = []
        retired = threading.Event()

        def poll() -> None:
            with self._proc:  # the row read, the consume and the spawns: one step
                if stop.is_set() or engine is not self.engine:
                    return
                with self._tx() as tx:
                    row = tx.get_lease_consumer(client.name)
                if row is None:
                    retired.set()
                    return
                if client.paused:
                    return
                workers[:] = [w for w in workers if w.is_alive()]
                if len(workers) >= WORKERS_PER_LEASE * row["in_flight_limit"]:
                    return
                for lease in self._call(engine.consume, client.name, client.batch_limit) or ():
                    workers.append(self._spawn(f"worker-{client.name}", self._worker, engine, killed, client,
                                               lease))

        every(stop, client.poll_interval, poll, lambda: engine is self.engine and not retired.is_set())
        with self._proc:
            if engine is self.engine:
                self._polling.discard(client.name)

    def _worker(self, engine: LeaseEngine, killed: threading.Event, client: LeaseClient, lease: Lease) -> None:
        rng = random.Random(f"fanoutsim:lease-work:{self.seed}:{lease.token}")
        d = engine.faults.run_duration(client.name, wall_us(), client.draw(rng))
        if d > 0 and killed.wait(d):
            return  # died (or a stop ran out of time) with the lease in hand
        if engine is not self.engine:
            return
        error = client.failure(lease, rng)
        if error is None and client.fn is not None:
            try:
                client.fn(lease)  # the effect, for real, outside the store lock
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            self._call(engine.nack, client.name, lease.event_id, lease.token, lease.incarnation,
                       delay=client.nack_delay, error=error)
            return
        with self._proc:
            if engine is not self.engine:
                return  # the node died while fn ran: cut off before its effect
            now = wall_us()
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

    def _workload(self, engine: LeaseEngine, stop: threading.Event, p: _Publisher) -> None:
        if p.start > self.now and stop.wait(p.start - self.now):
            return
        while not stop.wait(p.rng.expovariate(p.rate)):
            if engine is not self.engine or (p.stop is not None and self.now >= p.stop):
                return
            part = p.rng.choice(p.partitions)
            p.k += 1
            self._call(engine.publish, [(part, p.kind, {"n": p.k})])

    # -- the API ------------------------------------------------------------------
    def status(self, consumer: str, *, caller=None) -> dict:
        """What ``riffdb event status`` tells of ``consumer`` (see
        :func:`~fanoutsim.designs.leases.consumers.status`). A read of the tables: it
        works while the node is down or stopped too, until :meth:`close`.
        ``caller``: as :meth:`~.host.LeaseHost.status`."""
        consumer = consumer_key(consumer)
        self._authorize("status", consumer, caller)
        with self._proc:
            if self._state == "closed":
                raise RuntimeError("the node is closed; its store is released")
            return self._reader.status(wall_us(), consumer)

    def register_consumer(self, name: str, *, start="beginning", batch_limit: int = 4, in_flight_limit: int = 4,
                          lease_seconds: float = 60.0, client: bool = True, duration=0.01, fail: float = 0.0,
                          poison: Callable[[Lease], bool] | None = None, nack_delay: float = 1.0,
                          poll_interval: float = 0.5, fn: Callable[[Lease], Any] | None = None) -> dict:
        """Create a durable consumer (limits checked against the seed's ranges; kept
        as it is if the store has it: a restarted process resumes from its
        checkpoints) and, unless ``client=False`` (drive it by hand with
        :meth:`consume`), run its client loop while the node runs. A worker works
        ``duration`` wall seconds, then runs ``fn(lease)`` in its own thread (an
        exception nacks) and acks. Returns the consumer row. As on the virtual
        clock, registering an existing consumer again with other settings raises
        ValueError naming them (the same ones again: a no-op)."""
        name = consumer_key(name)
        spec = LeaseClient(name, duration, fail, poison, nack_delay, poll_interval, fn=fn,
                           max_retry_delay=self.config.max_retry_delay) if client else None
        limits = {"batch_limit": batch_limit, "in_flight_limit": in_flight_limit, "lease_seconds": lease_seconds}
        with self._lifecycle:
            self._registered(name, limits, spec)
            row = self._api(LeaseEngine.add_consumer, name, start, **limits)
            with self._proc:
                if spec is not None and name not in self.clients:
                    self.clients[name] = spec
                engine = self.engine
                if (self._state == "running" and engine is not None and name in self.clients
                        and name not in self._polling):
                    self._start_client(engine, name)
            return row

    def add_workload(self, rate: float, *, partitions=4, kind: str = "event", start: float = 0.0,
                     stop: float | None = None) -> None:
        """Publish events at Poisson times, ``rate`` per second, each to a partition
        drawn from ``partitions`` (a count, or a list of names), from ``start`` to
        ``stop`` (seconds since start), while the node runs."""
        partitions = lease_partitions(rate, partitions)
        start, stop = lease_window(kind, start, stop)
        rng = random.Random(f"fanoutsim:lease-workload:{self.seed}:{self._starts}:{len(self._publishers)}")
        p = _Publisher(float(rate), partitions, kind, start, stop, rng)
        with self._lifecycle:
            if self._state in ("stopped", "closed"):
                raise RuntimeError(self._down_message())
            with self._proc:
                self._publishers.append(p)
                engine = self.engine
                if self._state == "running" and engine is not None:
                    self._spawn("publisher", self._workload, engine, self._stop, p)
