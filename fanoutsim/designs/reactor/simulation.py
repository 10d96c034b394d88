"""The virtual-clock runtime: the engine's loops as SimPy processes.

Three loops run, as in the real runner process, each a few lines that only
decide *when*: the poll loop (every ``reactor_poll_interval``, starting at
once), the prune loop (at start, then every ``reactor_firings_prune_interval``)
and the executor (a claim every ``executor_poll_interval`` while a worker is
free, at a phase drawn from the seed; each claimed execution holds its worker
for the workflow's duration).
Workloads are further processes that fire reactors at Poisson times.

Virtual time is seconds since ``start`` (default 2026-01-01T00:00:00Z); the
store sees epoch microseconds. A crash (:meth:`Simulation.crash`, or a
:class:`~fanoutsim.kernel.faults.Crash` raised at a named point) stops the loops and
throws the engine away — its caches, the batch in hand, the running bodies —
and rolls back the open transaction; :meth:`Simulation.restart` builds a new
engine over the same store.
"""
from __future__ import annotations

import random
from functools import partial
from typing import Any

import simpy

from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.kernel.faults import Injector, Pollers
from fanoutsim.kernel.ids import IdSource
from fanoutsim.designs.reactor import ReactorEngine, Registry, Runner
from fanoutsim.kernel.timeutil import from_us
from fanoutsim.kernel.validate import is_number
from fanoutsim.designs.reactor.workload import GENERATORS, Workload
from fanoutsim.designs.reactor.host import RunnerHost, checked_config
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, delay_to, until_ok


class Simulation(RunnerHost, VirtualRuntime):
    """One seeded run of the reactor subscription design under a virtual clock.

    >>> sim = Simulation(seed=1)
    >>> sid = sim.runner.subscribe_workflow_to_reactor("r", "wf")
    >>> fid = sim.fire("r", {"x": 1})
    >>> sim.run(until=2.0)
    >>> len(sim.executions())
    1

    ``faults`` is a :class:`~fanoutsim.kernel.faults.FaultPlan` (or any object with the
    hooks of :class:`~fanoutsim.kernel.faults.NoFaults`). ``fetch_latency`` is the
    virtual time between a poll's fetch and its drain — a store round trip,
    during which other processes (other pollers, writers) run.
    """

    design = "reactor"  # its entry in fanoutsim.designs

    _noun = "runner"

    # The executor sleeps while nothing is pending instead of ticking through
    # claims that find nothing, and the poll loop's passes after one that found
    # nothing skip their reads until a step writes; the trace and the metrics
    # are the same either way (tested).
    sleep_when_idle = True

    def __init__(self, config: SchedulerConfig | None = None, seed: int = 0, store: Any = "memory",
                 *, start=None, faults=None, trace: bool = True, fetch_latency: float = 0.0) -> None:
        config = checked_config(config, seed)
        if not is_number(fetch_latency) or fetch_latency < 0:  # nan or inf: no drain would ever come
            raise ValueError(f"fetch_latency must be a finite number of seconds >= 0, got {fetch_latency!r}")
        self.config = config
        self.seed = seed
        self.fetch_latency = float(fetch_latency)
        self._open(seed, store, start, faults, trace, opener=open_store)
        self.ids = IdSource(seed)
        self.registry = Registry()
        self._pollers = self.faults.pollers if isinstance(self.faults, Injector) else Pollers(1)
        self.runner = Runner(self)
        self.replicas: list[ReactorEngine] = []
        self._workload_count = 0
        self._busy = 0
        self._checked = False
        self.restart()
        self._schedule_crashes()

    @property
    def clock_time(self):
        """The virtual wall time, a timezone-aware datetime."""
        return from_us(self.now_us())

    # -- the binding --------------------------------------------------------
    def _engine(self, incarnation: int, replica: int) -> ReactorEngine:
        return ReactorEngine(
            self.store, self.config, self.registry, self.ids, self.metrics_registry, self._trace,
            self.faults, random.Random(f"fanoutsim:engine:{self.seed}:{incarnation}:{replica}"),
            replica,
        )

    def _new_engine(self, incarnation: int) -> ReactorEngine:
        """The runner's engine and, with ``Pollers(n)``, its n - 1 replicas (each
        polls the same store with an engine of its own)."""
        engine = self._engine(incarnation, 0)
        self.replicas = [engine] + [self._engine(incarnation, i) for i in range(1, self._pollers.count)]
        return engine

    def _start_loops(self, engine: ReactorEngine) -> None:
        if self.incarnation:
            self._call(engine.recover)  # the claims the dead incarnation left running
        self._busy = 0
        self.executor_phase = engine.rng.uniform(0, self.config.executor_poll_interval)
        self._spawn(self._prune_loop(engine))
        self._spawn(self._executor_loop(engine))
        for replica in self.replicas:
            phase = 0.0
            if self._pollers.phase == "random" and replica is not engine:
                phase = replica.rng.uniform(0, self.config.reactor_poll_interval)
            self._spawn(self._poll_loop(replica, phase))

    def _crashed(self) -> None:
        self.replicas = []

    def _live(self, engine) -> bool:
        return engine is self.engine or engine in self.replicas

    # -- the loops ------------------------------------------------------------
    def _poll_loop(self, engine: ReactorEngine, phase: float = 0.0):
        env, store = self.env, self.store
        interval = self.config.reactor_poll_interval
        start_pass, fetch_next, drain = engine.start_pass, engine.fetch_next, engine.drain
        repeats_until_written = self.sleep_when_idle and engine.repeats_until_written()
        try:
            if phase:
                yield env.timeout(phase)
            while True:
                decoded: dict = {}  # the pass's decoded firings: in memory, lost on crash
                # the list and the fetches of subscriptions with nothing new, up to
                # the next batch, are one step: no time passes between them
                got = self._call(start_pass)
                if not self._live(engine):
                    return
                subs, i, batch = got
                n = len(subs)
                if i >= n and repeats_until_written:
                    # Nothing found: the passes on the ticks until a step writes would
                    # find nothing either. Each still ticks (so that a write at a tick
                    # meets the pass in the order it would) and counts its queries,
                    # but none reads the store.
                    written = store.writes
                    while True:
                        yield env.timeout(interval)
                        if store.writes != written or not self._live(engine):
                            break
                        if n:
                            engine.poll_queries(n)
                    continue
                while i < n:
                    # the batch is in hand; whoever else runs now, runs before the drain
                    yield env.timeout(self.fetch_latency)
                    self._call(drain, subs[i], batch, decoded)
                    if not self._live(engine):
                        return
                    if i + 1 < n:
                        got = self._call(fetch_next, subs, i + 1)
                        if not self._live(engine):
                            return
                        i, batch = got
                    else:
                        i = n
                yield env.timeout(interval)
        except simpy.Interrupt:
            return

    def _prune_loop(self, engine: ReactorEngine):
        interval = self.config.reactor_firings_prune_interval
        try:
            while engine is self.engine:  # a loop dies with its incarnation
                self._call(engine.prune_once)
                yield self.env.timeout(interval)
        except simpy.Interrupt:
            return

    def _executor_loop(self, engine: ReactorEngine):
        cfg = self.config
        env = self.env
        interval = cfg.executor_poll_interval
        try:
            # The executor is its own loop with its own phase: were it in step with
            # the poll loop, every claim would land in the same instant as its dispatch.
            yield env.timeout(self.executor_phase)
            while engine is self.engine:
                free = cfg.executor_workers - self._busy
                if free > 0:
                    rows = self._call(engine.claim_next, free)
                    if rows is None and self.sleep_when_idle and engine is self.engine:
                        # Nothing is pending, so every tick finds nothing until a step
                        # leaves an execution pending: sleep until then, then claim at
                        # the first tick of the same grid at or after it.
                        tick = env.now
                        yield self._until_written(lambda: engine.has_pending(self.now_us()))
                        while tick < env.now:
                            tick += interval  # the sum the ticks' timeouts would have made
                        yield env.timeout(delay_to(env.now, tick))
                        continue
                    running = [r for r in map(self._start_execution, rows or ()) if r is not None]
                    tick = env.timeout(interval)
                    # each body's end is scheduled after the next tick, where a process
                    # started for it would have scheduled it (a tie goes to the tick)
                    for execution_id, status, duration in running:
                        env.timeout(duration).callbacks.append(
                            partial(self._finished, engine, execution_id, status))
                    yield tick
                else:
                    yield env.timeout(interval)
        except simpy.Interrupt:
            return

    def _start_execution(self, row: dict) -> tuple[str, str, float] | None:
        """Run a claimed execution's body: finished now if it takes no time,
        else ``(id, status, duration)`` for the executor to finish later."""
        engine = self.engine
        if engine is None:
            return None
        status = engine.run_body(row)
        duration = engine.duration_of(self.now_us(), row)
        if duration <= 0:
            self._call(engine.finish, row["id"], status)
            return None
        self._busy += 1
        return row["id"], status, duration

    def _finished(self, engine, execution_id: str, status: str, _event=None) -> None:
        """A body's end: a timeout's callback, not a process, since it only
        waits; if its process died meanwhile, the row stays 'running'."""
        if engine is self.engine:
            self._busy -= 1
            self._call(engine.finish, execution_id, status)

    def _workload(self, w: Workload, rng: random.Random):
        gen = GENERATORS[w.payload]
        env = self.env
        stamps = getattr(self.faults, "stamps", None)
        if w.start > env.now:
            yield env.timeout(w.start - env.now)
        k = 0
        while True:
            yield env.timeout(rng.expovariate(w.rate))
            if w.stop is not None and env.now >= w.stop:
                return
            engine = self.engine
            if engine is None:  # a down reactor fires nothing
                continue
            now = self.now_us()
            for fired_at, delay in (stamps(w.reactor, now) if stamps else ((now, 0.0),)):
                payload = gen(rng, k)
                k += 1
                if delay > 0:
                    env.process(self._late_fire(w, payload, fired_at, delay))
                else:  # (a burst whose first firing crashed the writer stops there)
                    self._call(engine.fire, w.reactor, payload, w.tenant, fired_at=fired_at)

    def _late_fire(self, w: Workload, payload: dict, fired_at: int, delay: float):
        """A writer that stamped ``fired_at`` and commits ``delay`` seconds later."""
        incarnation = self.incarnation
        yield self.env.timeout(delay)
        if self.engine is not None and self.incarnation == incarnation:  # else died uncommitted
            self._call(self.engine.fire, w.reactor, payload, w.tenant, fired_at=fired_at)

    # -- driving the run ---------------------------------------------------
    def add_workload(self, reactor: str, rate: float, tenant: str = "public", *,
                     payload: str = "quote", start: float = 0.0, stop: float | None = None) -> Workload:
        """Fire ``reactor`` at Poisson times, ``rate`` per virtual second."""
        w = Workload(reactor, rate, tenant, payload, start, stop)
        rng = random.Random(f"fanoutsim:workload:{self.seed}:{self._workload_count}")
        self._workload_count += 1
        self.env.process(self._workload(w, rng))
        return w

    def add_replay(self, frame, reactor: str, *, tenant: str | None = None, speed: float = 1.0,
                   start: float = 0.0, stop: float | None = None):
        """Fire ``reactor`` once per row of a recorded workload (see
        :mod:`fanoutsim.designs.reactor.replay`): columns ``t``, ``symbol``, ``region``,
        ``price``; the payload is the ``quote`` generator's. ``tenant``: None
        (every row in ``"public"``) or the column holding each row's tenant.
        Rows with ``start <= t < stop`` replay ``speed`` times faster than
        recorded from now: the row at ``t`` fires at ``now + (t - start) / speed``."""
        from fanoutsim.designs.reactor.replay import prepare_replay

        replay, times, tenants, payloads = prepare_replay(
            frame, reactor, tenant=tenant, speed=speed, start=start, stop=stop, now=self.env.now)
        self.env.process(self._replay(reactor, times, tenants, payloads))
        return replay

    def _replay(self, reactor: str, times: list, tenants: list, payloads: list):
        env = self.env
        stamps = getattr(self.faults, "stamps", None)
        for at, tenant, payload in zip(times, tenants, payloads):
            if at > env.now:
                yield env.timeout(at - env.now)
            engine = self.engine
            if engine is None:  # a down reactor fires nothing
                continue
            now = self.now_us()
            for fired_at, delay in (stamps(reactor, now) if stamps else ((now, 0.0),)):
                if delay > 0:
                    env.process(self._late_fire(Workload(reactor, 1.0, tenant), payload, fired_at, delay))
                else:
                    self._call(engine.fire, reactor, payload, tenant, fired_at=fired_at)

    def run(self, until: float | None = None) -> None:
        """Advance the virtual clock to ``until`` seconds (absolute, >= now)."""
        if not until_ok(self.env, until):
            return
        if self.plan is not None and not self._checked:
            self.check_plan()
        self._advance(until)
