"""The virtual-clock runtime of the leased-consumer design (seed 003).

SimPy processes decide *when* the :class:`~fanoutsim.leases.LeaseEngine`'s
steps run:

* one *client* loop per consumer: every ``poll_interval`` it calls
  ``consume`` and starts a *worker* per lease. A worker works for a drawn
  ``duration`` — which may outlast the lease — then either fails (a seeded
  chance ``fail``, or ``poison(event)`` true: it nacks with ``nack_delay``)
  or applies its effect (the trace's ``delivered``) and acks. An ack that
  comes too late fails closed; recovery has made the event eligible again and
  it is delivered twice. That is how duplicates emerge;
* the recovery loop (``recovery_interval``): lease expiry;
* the retention loop (``retention_interval``); Poisson publishers.

A crash (a :class:`~fanoutsim.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`LeaseSimulation.crash`) takes the whole node
down — broker and clients — and throws the engine and every worker away;
:meth:`restart` builds a new engine over the same tables and starts the
clients again. Leases held by dead workers stay in the table until recovery
expires them.
"""
from __future__ import annotations

import random
from typing import Any, Callable

import pandas as pd
import simpy

from ..faults import Crash, bind
from ..frames import table_frame
from ..leases import LeaseConfig, LeaseEngine
from ..leases.leasing import Lease
from ..metrics import Metrics
from ..store import open_store
from ..timeutil import US, parse_start
from ..trace import NullTrace, Trace
from .virtual import VirtualCrashes, until_ok


def _checked(config, seed) -> LeaseConfig:
    config = LeaseConfig() if config is None else config
    if not isinstance(config, LeaseConfig):
        raise TypeError(f"config must be a LeaseConfig, not {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return config


def _fraction(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{where} must be a probability in [0, 1], got {value!r}")
    return float(value)


def _secs(value, where, positive=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (positive and value == 0):
        raise ValueError(f"{where} must be a number of seconds {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


class Client:
    """A consumer's client code (survives crashes as a binary's code does)."""

    def __init__(self, name, duration=0.01, fail=0.0, poison=None, nack_delay=1.0, poll_interval=0.5,
                 batch_limit=None) -> None:
        if not callable(duration):
            _secs(duration, f"consumer {name!r}: duration")
        if poison is not None and not callable(poison):
            raise TypeError(f"consumer {name!r}: poison must be callable(lease) or None, got {poison!r}")
        self.name, self.duration, self.poison = name, duration, poison
        self.fail = _fraction(fail, f"consumer {name!r}: fail")
        self.nack_delay = _secs(nack_delay, f"consumer {name!r}: nack_delay")
        self.poll_interval = _secs(poll_interval, f"consumer {name!r}: poll_interval", positive=True)
        self.batch_limit = batch_limit


class LeaseSimulation(VirtualCrashes):
    """One seeded run of leased durable consumers under a virtual clock.

    >>> sim = LeaseSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> sim.publish("org-1", "ticket.changed", {"ticket": 7})
    '1:0'
    >>> sim.run(until=2.0)
    >>> sim.checkpoints()["seq"].tolist()
    [1]
    """

    def __init__(self, config: LeaseConfig | None = None, seed: int = 0, store: Any = "memory",
                 *, start=None, faults=None, trace: bool = True) -> None:
        self.config, self.seed = _checked(config, seed), seed
        self.start_us = parse_start(start)
        self.env = simpy.Environment()
        self.store = open_store(store)
        self.metrics_registry = Metrics()
        self._trace = Trace() if trace else NullTrace()
        self.plan, self.faults = bind(faults, seed=seed, start_us=self.start_us, trace=self._trace)
        self.clients: dict[str, Client] = {}
        self._work_rng = random.Random(f"fanoutsim:lease-work:{seed}")
        self.engine: LeaseEngine | None = None
        self.incarnation = -1
        self._procs: list[simpy.Process] = []
        self._workloads = 0
        self.restart()
        self._schedule_crashes()

    # -- clock ----------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.env.now

    def now_us(self) -> int:
        return self.start_us + round(self.env.now * US)

    # -- life cycle -----------------------------------------------------------
    @property
    def up(self) -> bool:
        return self.engine is not None

    def restart(self) -> None:
        if self.engine is not None:
            return
        self.incarnation += 1
        self._trace.attempt = self.incarnation
        self.engine = LeaseEngine(self.store, self.config, self.metrics_registry, self._trace,
                                  self.faults, self.seed)
        if self.incarnation:
            self._trace.add(self.now_us(), "restarted", "runtime")
        self._procs = [self.env.process(self._recovery_loop(self.engine)),
                       self.env.process(self._retention_loop(self.engine))]
        for name in self.clients:
            self._start_client(name)

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        if self.engine is None:
            return
        self.engine = None
        self._trace.add(self.now_us(), "crashed", "runtime", detail=point)
        self.metrics_registry.inc("fanoutsim_runner_crashes_total")
        active = self.env.active_process
        for proc in self._procs:
            if proc.is_alive and proc is not active:
                proc.interrupt("crash")
        self._procs = []
        if downtime is not None:
            self.env.process(self._restart_after(downtime))

    def _call(self, method: str, *args, engine: LeaseEngine | None = None, **kwargs):
        """One engine step now; a Crash inside it takes the node down (returns None)."""
        engine = engine or self.engine
        if engine is None or engine is not self.engine:
            return None
        try:
            return getattr(engine, method)(self.now_us(), *args, **kwargs)
        except Crash as c:
            self.crash(c.point, c.downtime)
            return None

    def _api(self, method: str, *args, **kwargs):
        if self.engine is None:
            raise RuntimeError("the node is down (crashed); call restart() first")
        return self._call(method, *args, **kwargs)

    # -- loops ----------------------------------------------------------------
    def _recovery_loop(self, engine):
        try:
            while engine is self.engine:
                yield self.env.timeout(self.config.recovery_interval)
                self._call("recover", engine=engine)
        except simpy.Interrupt:
            return

    def _retention_loop(self, engine):
        try:
            while engine is self.engine:
                self._call("prune_once", engine=engine)
                yield self.env.timeout(self.config.retention_interval)
        except simpy.Interrupt:
            return

    def _start_client(self, name: str) -> None:
        self._procs.append(self.env.process(self._client_loop(self.engine, self.clients[name])))

    def _client_loop(self, engine, client: Client):
        try:
            while engine is self.engine:
                with self.store.transaction() as tx:
                    row = tx.get_lease_consumer(client.name)
                if row is None or row["retired"]:
                    return
                leases = self._call("consume", client.name, client.batch_limit, engine=engine)
                for lease in leases or ():
                    self._procs.append(self.env.process(self._worker(engine, client, lease)))
                yield self.env.timeout(client.poll_interval)
        except simpy.Interrupt:
            return

    def _worker(self, engine, client: Client, lease: Lease):
        env, rng = self.env, self._work_rng
        try:
            d = client.duration(rng) if callable(client.duration) else client.duration
            d = engine.faults.run_duration(client.name, self.now_us(), float(d))
            if d > 0:
                yield env.timeout(d)
            if engine is not self.engine:
                return
            poisoned = client.poison is not None and client.poison(lease)
            if poisoned or (client.fail > 0 and rng.random() < client.fail):
                self._call("nack", client.name, lease.event_id, lease.token, lease.incarnation,
                           delay=client.nack_delay, error="poison" if poisoned else "transient failure",
                           engine=engine)
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
            self._call("ack", client.name, lease.event_id, lease.token, lease.incarnation, engine=engine)
        except simpy.Interrupt:
            return

    # -- the API --------------------------------------------------------------
    def register_consumer(self, name: str, *, start="beginning", batch_limit: int = 4, in_flight_limit: int = 4,
                          lease_seconds: float = 60.0, client: bool = True, duration=0.01, fail: float = 0.0,
                          poison: Callable[[Lease], bool] | None = None, nack_delay: float = 1.0,
                          poll_interval: float = 0.5) -> dict:
        """Create a durable consumer (limits checked against the seed's ranges) and,
        unless ``client=False`` (drive it by hand with :meth:`consume`), start its
        client loop. Returns the consumer row."""
        spec = Client(name, duration, fail, poison, nack_delay, poll_interval) if client else None
        row = self._api("add_consumer", name, start, batch_limit=batch_limit, in_flight_limit=in_flight_limit,
                        lease_seconds=lease_seconds)
        if spec is not None and name not in self.clients:
            self.clients[name] = spec
            if self.engine is not None:
                self._start_client(name)
        return row

    def publish(self, partition: str, kind: str = "event", payload=None) -> str | None:
        """Publish one event now; its event id (None if a crash took the node down)."""
        out = self._api("publish", [(partition, kind, payload)])
        return None if out is None else out[0]

    def publish_many(self, events) -> list[str] | None:
        """Publish ``[(partition, kind, payload), ...]`` as one commit."""
        return self._api("publish", list(events))

    def consume(self, consumer: str, batch_limit: int | None = None) -> list[Lease] | None:
        return self._api("consume", consumer, batch_limit)

    def ack(self, consumer: str, event_id: str, token: str, incarnation: int) -> str | None:
        return self._api("ack", consumer, event_id, token, incarnation)

    def nack(self, consumer: str, event_id: str, token: str, incarnation: int, delay: float = 0.0,
             error: str | None = None) -> str | None:
        return self._api("nack", consumer, event_id, token, incarnation, delay=delay, error=error)

    def recover(self) -> int | None:
        return self._api("recover")

    def prune_once(self) -> int | None:
        return self._api("prune_once")

    def seek(self, consumer: str, position) -> int | None:
        return self._api("seek", consumer, position)

    def retire(self, consumer: str) -> None:
        self._api("retire", consumer)

    def status(self, consumer: str) -> dict:
        return self._api("status", consumer)

    def restore(self) -> int | None:
        return self._api("restore")

    def add_workload(self, rate: float, *, partitions=4, kind: str = "event", start: float = 0.0,
                     stop: float | None = None) -> None:
        """Publish events at Poisson times, ``rate`` per virtual second, each to a
        partition drawn from ``partitions`` (a count, or a list of names)."""
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            raise ValueError(f"rate must be events per second > 0, got {rate!r}")
        if isinstance(partitions, int) and not isinstance(partitions, bool):
            if partitions < 1:
                raise ValueError(f"partitions must be >= 1, got {partitions!r}")
            partitions = [f"p{i}" for i in range(partitions)]
        partitions = list(partitions)
        if not partitions or not all(isinstance(p, str) and p for p in partitions):
            raise ValueError(f"partitions must be a count or a list of non-empty names, got {partitions!r}")
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
                self._call("publish", [(part, kind, {"n": k})])

    def run(self, until: float | None = None) -> None:
        if not until_ok(self.env, until):
            return
        self.env.run(until=until)

    # -- looking at it ----------------------------------------------------------
    def _frame(self, table: str) -> pd.DataFrame:
        return table_frame(table, self.store.rows(table))

    def events(self) -> pd.DataFrame:
        return self._frame("events")

    def consumers(self) -> pd.DataFrame:
        return self._frame("lease_consumers")

    def checkpoints(self) -> pd.DataFrame:
        return self._frame("checkpoints")

    def leases(self) -> pd.DataFrame:
        return self._frame("leases")

    def retries(self) -> pd.DataFrame:
        return self._frame("retries")

    def dead_letters(self) -> pd.DataFrame:
        return self._frame("dead_letters")

    def history(self) -> pd.DataFrame:
        return self._frame("history")

    def trace(self) -> pd.DataFrame:
        """The trace with this design's names: ``consumer``, ``event_id``,
        ``partition`` and ``process`` (the node's incarnation: 0 until a restart)."""
        return self._trace.frame().rename(columns={
            "subscription": "consumer", "firing": "event_id", "execution": "partition", "attempt": "process"})

    def metrics(self) -> dict[str, float]:
        out = self.metrics_registry.as_dict()
        out["fanoutsim_lease_events_retained"] = len(self.store.rows("events"))
        out["fanoutsim_lease_in_flight"] = len(self.store.rows("leases"))
        out["fanoutsim_lease_dead_letters_retained"] = len(self.store.rows("dead_letters"))
        return out
