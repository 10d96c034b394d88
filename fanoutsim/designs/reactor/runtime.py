"""The reactor runner's loops, written once for both clocks.

:class:`ReactorRuntime` decides *when* the :class:`~fanoutsim.designs.reactor.ReactorEngine`'s
steps run, as the real runner process does; a driver decides how time passes
(:class:`~.simulation.Simulation` on SimPy's virtual clock,
:class:`~.realtime.Realtime` on threads and the wall clock). Its loops are
generators that yield what they wait for (:mod:`fanoutsim.kernel.runtime.loops`):

* the poll loop (every ``reactor_poll_interval``, at once from the start): a
  pass lists the subscriptions and fetches each one's firings past its
  watermark; the fetches of subscriptions with nothing new, up to the next
  batch, are one step (no time passes between them); a batch is dispatched
  ``fetch_latency`` after its fetch (a store round trip, during which other
  loops and writers run). After a pass that found nothing, the passes until a
  step writes would find nothing either: each still ticks and counts its
  queries, but none reads the store (not with a settle horizon or a fault
  plan that limits polls, nor over a store others write too);
* the prune loop (at start, then every ``reactor_firings_prune_interval``);
* the executor: a claim every ``executor_poll_interval`` while a worker is
  free, at a phase drawn from the seed; each claimed execution runs its body
  (the workflow's code, outside the store lock) and holds its worker for the
  workflow's duration. While nothing is pending it sleeps until a step leaves
  an execution pending, then claims at the first tick of the grid it kept;
* workloads and replays, which fire reactors at Poisson (or recorded) times.

A crash (:meth:`crash`, or a :class:`~fanoutsim.kernel.faults.Crash` raised at
a named point) stops the loops and throws the engine away — its caches, the
batch in hand, the running bodies — and rolls back the open transaction; a
restart builds a new engine over the same store and first requeues the
executions the dead one claimed (recovery).
"""

from __future__ import annotations

import os
import random

from fanoutsim.designs.reactor import ReactorEngine, Registry, Runner
from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.engine import TRACE
from fanoutsim.designs.reactor.faults import STAMPS, pollers_of
from fanoutsim.designs.reactor.host import RunnerHost
from fanoutsim.designs.reactor.roles import EXECUTOR, POLL, PRUNE, ROLES
from fanoutsim.designs.reactor.workload import GENERATORS, Workload
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.driver import Loop
from fanoutsim.kernel.runtime.loops import Sleep, Ticks, Wait, Work
from fanoutsim.kernel.runtime.roles import ALL, WORKLOADS
from fanoutsim.kernel.timeutil import US

#: Seconds: over a store other processes write too, an idle executor claims at least this often.
SAFETY_CLAIM = 1.0  # seconds: over a store others write too, an idle executor claims at least this often


class ReactorRuntime(RunnerHost):
    """The reactor design on either clock: its loops and workloads. A face
    (``Simulation``, ``Realtime``) adds the driver and calls :meth:`_setup`
    once the driver's ``_open`` has run."""

    #: The design's name, its entry in :mod:`fanoutsim.designs`.
    design = "reactor"  # its entry in fanoutsim.designs
    _noun = "runner"
    #: The reactor's names for the trace's columns: ``subscription``, ``firing``, ``reactor``.
    trace_schema = TRACE
    #: What one process may run (see :mod:`.roles`): ``poller``, ``executor``, ``prune``, ``writers``.
    roles = ROLES  # one part of the runner per process (see .roles): _start_loops asks _runs
    # what the faces (fanoutsim.kernel.runtime.faces) build it from
    #: The config class the runtimes take (``config=None``: its defaults).
    config_class = SchedulerConfig
    _opener = staticmethod(open_store)
    #: The wall clock's default store: a DuckDB file in the working directory.
    wall_store = "run.duckdb"  # the wall clock's default store

    # The executor sleeps while nothing is pending instead of ticking through
    # claims that find nothing, and the poll loop's passes after one that found
    # nothing skip their reads until a step writes; the trace and the metrics
    # are the same either way (tested).
    #: Whether the executor sleeps while nothing is pending, and poll passes after an
    #: empty one skip their reads until a step writes (the same trace either way).
    sleep_when_idle = True
    #: Seconds: over a store other processes write too, an idle executor still claims
    #: at least this often.
    safety_claim = SAFETY_CLAIM
    #: Seconds between a poll's fetch and its drain: a store round trip, during which
    #: other processes run (the Simulation's ``fetch_latency=``).
    fetch_latency = 0.0  # seconds between a poll's fetch and its drain

    #: The run's :class:`~fanoutsim.designs.reactor.config.SchedulerConfig`.
    config: SchedulerConfig
    engine: ReactorEngine | None
    #: The registration API a user of the real system calls (``subscribe_workflow_to_reactor``, ...).
    runner: Runner
    #: The declared workflows and computation graphs (code: they survive a crash).
    registry: Registry
    #: The live incarnation's engines, one per poller (``Pollers(n)``: n); empty while down.
    replicas: list[ReactorEngine]
    #: Seconds: where the executor's claims fall on their ``executor_poll_interval`` grid,
    #: drawn from the seed at each start.
    executor_phase: float

    def _setup(self) -> None:
        self.registry = Registry()
        self._pollers = pollers_of(self.plan)
        self.runner = Runner(self)
        self.replicas: list[ReactorEngine] = []
        self._workload_count = 0
        self._busy = 0
        self._checked = False

    # -- the binding --------------------------------------------------------
    def _engine(self, incarnation: int, replica: int) -> ReactorEngine:
        return ReactorEngine(
            self.store,
            self.config,
            self.registry,
            self.ids,
            self.metrics_registry,
            self._trace,
            self.faults,
            self._rng("engine", incarnation, replica),
            replica,
        )

    def _new_engine(self, incarnation: int) -> ReactorEngine:
        """The runner's engine and, with ``Pollers(n)``, its n - 1 replicas (each
        polls the same store with an engine of its own)."""
        engine = self._engine(incarnation, 0)
        if self.role != ALL and self._runs(POLL):
            # one poller of several processes: its dispatches are told apart by its name
            engine.poller = f"poller@{os.getpid()}"
        self.replicas = [engine] + [self._engine(incarnation, i) for i in range(1, self._pollers.count)]
        return engine

    def _start_loops(self, engine: ReactorEngine) -> None:
        # the groups of loops this process runs (every one, unless a role picks some)
        if self._runs(EXECUTOR):
            self._start_executor(engine)
        if self._runs(PRUNE):
            self._spawn(self._prune_loop(engine), "prune")
        if self._runs(EXECUTOR):
            self._spawn(self._executor_loop(engine), "executor")
        if self._runs(POLL):
            for replica in self.replicas:
                phase = 0.0
                if self._pollers.phase == "random" and replica is not engine:
                    phase = replica.rng.uniform(0, self.config.reactor_poll_interval)
                self._spawn(self._poll_loop(replica, phase), "poll")

    def _start_executor(self, engine: ReactorEngine) -> None:
        """Recovery — the claims a dead incarnation (or process) left running go
        back to pending — and the executor's phase, drawn from the seed."""
        self._call(engine.recover)
        self._busy = 0
        self.executor_phase = engine.rng.uniform(0, self.config.executor_poll_interval)

    def _crashed(self) -> None:
        self.replicas = []

    def _live(self, engine) -> bool:
        return engine is self.engine or engine in self.replicas

    # -- the loops ------------------------------------------------------------
    def _skips_idle(self, engine: ReactorEngine) -> bool:
        """Whether a pass after one that found nothing may skip its reads until a
        step writes: only this process writes the store, and what a pass may
        take does not depend on the time."""
        return self.sleep_when_idle and engine.repeats_until_written() and not self.store.shared

    def _poll_loop(self, engine: ReactorEngine, phase: float = 0.0):
        store, interval = self.store, self.config.reactor_poll_interval
        start_pass, drain_next = engine.start_pass, engine.drain_next
        skips_idle = self._skips_idle(engine)
        if phase:
            yield Sleep(phase)
        ticks = Ticks(self.now, interval)  # every P: a pass's round trips do not push the next back
        while True:
            decoded: dict = {}  # the pass's decoded firings: in memory, lost on crash
            # the skip below ends at a write after this mark, taken before the pass's
            # reads: on the wall clock a fire on another thread may land after them
            written = store.writes
            # the list and the fetches of subscriptions with nothing new, up to
            # the next batch, are one step: no time passes between them
            got = self._call(start_pass)
            if got is None or not self._running(engine):
                return
            subs, i, batch = got
            n = len(subs)
            if i >= n and skips_idle:
                # Nothing found: the passes on the ticks until a step writes would
                # find nothing either. Each still ticks (so that a write at a tick
                # meets the pass in the order it would) and counts its queries,
                # but none reads the store.
                while True:
                    yield ticks.next(self.now)
                    if store.writes != written or not self._running(engine):
                        break
                    if n:
                        engine.poll_queries(n)
                continue
            while i < n:
                # the batch is in hand; whoever else runs now, runs before the drain
                yield Sleep(self.fetch_latency)
                got = self._call(drain_next, subs, i, batch, decoded)  # the drain and the next fetch
                if got is None or not self._running(engine):
                    return
                i, batch = got
            yield ticks.next(self.now)

    def _prune_loop(self, engine: ReactorEngine):
        ticks = Ticks(self.now, self.config.reactor_firings_prune_interval)
        while self._running(engine):  # a loop dies with its incarnation
            self._call(engine.prune_once)
            yield ticks.next(self.now)

    def _idle_claim(self) -> float | None:
        """How long an idle executor waits for a write before it claims anyway:
        forever when this process is the store's only writer (its own writes wake
        it), ``safety_claim`` when others write too, and not at all (it claims on
        every tick) when it runs no poll loop: no dispatch of its own wakes it."""
        if not self._runs(POLL):
            return 0.0
        return self.safety_claim if self.store.shared else None

    def _executor_loop(self, engine: ReactorEngine):
        cfg = self.config
        interval = cfg.executor_poll_interval
        # The executor is its own loop with its own phase: were it in step with
        # the poll loop, every claim would land in the same instant as its dispatch.
        yield Sleep(self.executor_phase)
        ticks = Ticks(self.now, interval)
        while self._running(engine):
            free = cfg.executor_workers - self._busy
            if free > 0:
                with self._proc:  # the claim and its workers' start: one step (a stop joins them)
                    rows = self._call(engine.claim_next, free) if self._running(engine) else []
                    for row in rows or ():
                        self._spawn_task(self._body(engine, row), "worker")
                    seen = self.store.writes  # what the empty claim saw: a dispatch after it must wake us
                if rows is None and self.sleep_when_idle and self._running(engine):
                    # Nothing is pending, so every tick finds nothing until a step
                    # leaves an execution pending: sleep until then, then claim at
                    # the first tick of the same grid at or after it.
                    pending = self._until_written(lambda: engine.has_pending(self.now_us()), seen)
                    yield Wait(pending, self._idle_claim())
                    yield ticks.at_or_after(self.now)
                    continue
            yield ticks.next(self.now)

    def _body(self, engine: ReactorEngine, row: dict):
        """One claimed execution: the workflow's body (its own code, outside the
        store lock), its duration on a worker, then the finish. If the process
        dies meanwhile the row stays 'running' until recovery requeues it."""
        started = self.clock()
        status = engine.run_body(row)
        duration = engine.duration_of(self.now_us(), row)
        if duration > 0:
            with self._proc:
                self._busy += 1
            yield Work(duration, since=started)
            with self._proc:
                if not self._live(engine):
                    return
                self._busy -= 1
        self._call(engine.finish, row["id"], status)

    # -- workloads --------------------------------------------------------------
    def _fires(self, reactor: str, tenant: str, payload_of, at: int) -> None:
        """Fire ``reactor`` as a request that arrived at ``at`` (epoch µs) does:
        stamped then, or as the plan's clock skew and late commits stamp it (a
        late writer commits in a loop of its own)."""
        engine = self.engine
        if engine is None:  # a down reactor fires nothing
            return
        stamps = getattr(self.faults, STAMPS.name, None)  # optional: a hand-written plan may lack it
        for fired_at, delay in stamps(reactor, at) if stamps else ((at, 0.0),):
            payload = payload_of()
            if delay > 0:
                self._service(self._late_fire(reactor, tenant, payload, fired_at, delay), "late-writer")
            else:  # (a burst whose first firing crashed the writer stops there)
                self._call(engine.fire, reactor, payload, tenant, fired_at=fired_at)

    def _workload(self, w: Workload, rng: random.Random) -> Loop:
        """Poisson arrivals (:func:`~fanoutsim.kernel.runtime.loops.arrivals`): a
        request is stamped when it arrives and commits when the store is free,
        so a poll pass that holds the store delays commits, never arrivals."""
        gen = GENERATORS[w.payload]
        k = 0

        def payload() -> dict:
            nonlocal k
            k += 1
            return gen(rng, k - 1)

        def fire(due: float) -> None:
            self._fires(w.reactor, w.tenant, payload, self.start_us + round(due * US))

        return self.arrivals(w.rate, w.start, w.stop, rng, fire)

    def _late_fire(self, reactor: str, tenant: str, payload: dict, fired_at: int, delay: float):
        """A writer that stamped ``fired_at`` and commits ``delay`` seconds later."""
        incarnation = self.incarnation
        yield Sleep(delay)
        engine = self.engine  # read once: a crash on another thread may set it to None meanwhile
        if engine is not None and self.incarnation == incarnation:  # else died uncommitted
            self._call(engine.fire, reactor, payload, tenant, fired_at=fired_at)

    def _replay(self, reactor: str, times: list, tenants: list, payloads: list):
        for at, tenant, payload in zip(times, tenants, payloads):
            if at > self.now:
                yield Sleep(at - self.now)
            self._fires(reactor, tenant, lambda p=payload: p, self.now_us())

    def add_workload(
        self,
        reactor: str,
        rate: float,
        tenant: str = "public",
        *,
        payload: str = "quote",
        start: float = 0.0,
        stop: float | None = None,
    ) -> Workload:
        """Fire ``reactor`` in ``tenant`` at Poisson times, ``rate`` per second,
        from ``start`` to ``stop`` (seconds since the start; None: no end), each
        firing's payload drawn by the generator ``payload`` (see
        :data:`~fanoutsim.designs.reactor.workload.GENERATORS`). Returns the checked
        :class:`~fanoutsim.designs.reactor.workload.Workload`; the firings go on while
        the runner runs. Refuses, before anything runs (ValueError): an empty reactor
        or tenant, a rate that is not a finite number > 0, an unknown generator, a
        negative start or a stop not after it; a process whose role runs no
        workloads refuses it too."""
        self._refuse_unless(WORKLOADS, "workload (fire with `fanoutsim fire` / `write`)")
        w = Workload(reactor, rate, tenant, payload, start, stop)
        rng = self._rng("workload", self._workload_count)
        self._workload_count += 1
        self._service(self._workload(w, rng), f"workload-{reactor}")
        return w

    def add_replay(
        self,
        frame,
        reactor: str,
        *,
        tenant: str | None = None,
        speed: float = 1.0,
        start: float = 0.0,
        stop: float | None = None,
    ):
        """Fire ``reactor`` once per row of a recorded workload (see
        :mod:`fanoutsim.designs.reactor.replay`): columns ``t``, ``symbol``, ``region``,
        ``price``; the payload is the ``quote`` generator's. ``tenant``: None
        (every row in ``"public"``) or the column holding each row's tenant.
        Rows with ``start <= t < stop`` replay ``speed`` times faster than
        recorded from now: the row at ``t`` fires at ``now + (t - start) / speed``.
        Returns the :class:`~fanoutsim.designs.reactor.replay.Replay` (what it will
        fire, and when). Refuses, before anything runs: a frame that is not a pandas
        DataFrame (TypeError), an empty reactor, a missing column or a bad speed or
        window (ValueError naming it); a process whose role runs no workloads
        refuses it too."""
        from fanoutsim.designs.reactor.replay import prepare_replay

        self._refuse_unless(WORKLOADS, "replay (fire with `fanoutsim fire` / `write`)")
        replay, times, tenants, payloads = prepare_replay(
            frame, reactor, tenant=tenant, speed=speed, start=start, stop=stop, now=self.now
        )
        self._service(self._replay(reactor, times, tenants, payloads), f"replay-{reactor}")
        return replay
