"""The wall-clock runtime: the same engine, driven by threads and real time.

Nothing of the delivery logic lives here: the loops below only decide *when*
to call the engine's steps, exactly as the SimPy runtime does, with
``time.time()`` (UTC microseconds) as the clock and ``Event.wait`` as the
sleep. The store is a DuckDB file by default, so what a run wrote outlives
the process — kill it with ``kill -9`` and a new ``Realtime`` over the same
file resumes from the tables.

Threads: one poll loop, one prune loop, one executor loop that hands claimed
executions to ``executor_workers`` worker threads (workflow bodies are real
Python callables; a registered ``duration`` is slept out), and one thread per
workload. Computation graphs run in the thread that fires, as in the core.

A crash — a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`Realtime.crash` — is an instant, as in the other
designs' wall-clock runtimes (:class:`~fanoutsim.kernel.runtime.wallclock.SteppedWallRuntime`):
every store step goes through one lock, and the crash takes the engine away
under it, so no thread of the dead incarnation touches the tables afterwards
(each checks that its engine is the live one before every step). Bodies in
hand are abandoned (their rows stay 'running' until the next incarnation's
recovery requeues them); after the downtime a new engine starts over the same
tables.

Life cycle::

    rt = Realtime(config, store="run.duckdb")   # opens the file; loops not running
    rt.runner.subscribe_workflow_to_reactor(...)
    rt.start()            # loops run in the background; returns at once
    rt.fire(...)          # any thread
    rt.stop()             # graceful and bounded: the pass in hand finishes
    rt.close()            # releases the file

``start()`` twice raises; ``stop()`` twice is a no-op; ``fire()`` after
``stop()`` raises (the runner process is gone; reads still work until
``close()``). ``with Realtime(...) as rt:`` starts, then stops and closes.

Every start and every clean stop is a row of ``runner_log``: a start that
follows no stop is how a later checker knows the process was killed.
"""
from __future__ import annotations

import queue
import random
import threading
import time
from typing import Any

from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.kernel.timeutil import US
from fanoutsim.designs.reactor import ReactorEngine, Registry, Runner
from fanoutsim.designs.reactor.workload import GENERATORS, Workload
from fanoutsim.designs.reactor.host import RunnerHost, checked_config
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.wallclock import SteppedWallRuntime, every, wall_us


SAFETY_CLAIM = 1.0  # seconds: the executor claims at least this often without a hint


class Realtime(RunnerHost, SteppedWallRuntime):
    """The reactor subscription design running for real, on the wall clock."""

    design = "reactor"  # its entry in fanoutsim.designs

    _noun = "runner"
    safety_claim = SAFETY_CLAIM  # seconds between claims with no hint

    def __init__(self, config: SchedulerConfig | None = None, store: Any = "run.duckdb", faults=None,
                 *, seed: int = 0, trace: bool = True, stop_timeout: float = 10.0) -> None:
        config = checked_config(config, seed)
        self.config = config
        self.seed = seed
        self._open(seed, store, faults, trace, stop_timeout, opener=open_store)
        self.registry = Registry()
        self.runner = Runner(self)
        self._checked = False
        self._work: queue.Queue = queue.Queue()
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._workloads: list[tuple[Workload, random.Random]] = []
        self._work_hint = threading.Event()  # set when this process made executions
        self.engine: ReactorEngine | None = self._new_engine(0)

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return f"the runner is {self._state}; fire and the runner API need a started runner"
        return "the runner is down (crashed) and will restart after its downtime"

    # -- the binding ------------------------------------------------------------
    def _new_engine(self, incarnation: int) -> ReactorEngine:
        return ReactorEngine(self.store, self.config, self.registry, self.ids, self.metrics_registry,
                             self._trace, self.faults, random.Random(f"fanoutsim:realtime:{self.seed}"))

    def _started(self, start_us: int) -> None:
        if self.plan is not None:
            self.check_plan()  # every workflow or subscription it names must exist

    def _start_loops(self, engine: ReactorEngine) -> None:
        """One incarnation's loops (``_proc`` held): recovery first, then the poll,
        prune and executor loops, the workers and the workloads."""
        self._start_executor(engine)
        stop = self._stop
        self._spawn("poll", self._poll_loop, engine, stop)
        self._spawn("prune", self._prune_loop, engine, stop)
        for w, rng in self._workloads:
            self._spawn(f"workload-{w.reactor}", self._workload, engine, stop, w, rng)

    def _start_executor(self, engine: ReactorEngine) -> None:
        """Recovery, then the executor loop and its workers (``_proc`` held)."""
        self._call(engine.recover)  # claims a dead process (or incarnation) left running
        self._work = queue.Queue()
        self._busy = 0
        stop, killed, work = self._stop, self._killed, self._work
        self._spawn("executor", self._executor_loop, engine, stop, work)
        for i in range(self.config.executor_workers):
            self._spawn(f"worker-{i}", self._worker, killed, work)

    def _wake_loops(self) -> None:
        for _ in range(self.config.executor_workers):
            self._work.put(None)  # idle workers: nothing more is coming

    # -- the loops -------------------------------------------------------------
    def _poll_loop(self, engine: ReactorEngine, stop: threading.Event) -> None:
        poll_subscriptions, fetch_next, drain = engine.poll_subscriptions, engine.fetch_next, engine.drain

        def one_pass() -> None:
            # step by step, each step at its own wall time: a batch is dispatched
            # when its fetch has come back, not when the pass began. The fetches
            # of subscriptions with nothing new up to the next batch are one step
            # (fetch_next): they send nothing, so no time passes between them, and
            # a pass over 1,000 idle subscriptions is not 1,000 transactions.
            decoded: dict = {}
            subs = self._call(poll_subscriptions) or []
            i, n = 0, len(subs)
            while i < n:
                got = self._call(fetch_next, subs, i)
                if got is None or engine is not self.engine:
                    return
                i, batch = got
                if i >= n:
                    return
                stats = self._call(drain, subs[i], batch, decoded)
                if stats is not None and stats.dispatched:
                    self._work_hint.set()
                i += 1

        every(stop, self.config.reactor_poll_interval, one_pass, lambda: engine is self.engine)

    def _prune_loop(self, engine: ReactorEngine, stop: threading.Event) -> None:
        every(stop, self.config.reactor_firings_prune_interval, lambda: self._call(engine.prune_once),
              lambda: engine is self.engine)

    def _executor_loop(self, engine: ReactorEngine, stop: threading.Event, work: queue.Queue) -> None:
        last_claim = [0.0]

        def claim() -> None:
            with self._busy_lock:
                free = self.config.executor_workers - self._busy
            if free <= 0:
                return
            # A claim on an empty table still costs a round trip: claim when this
            # process dispatched something, and at least once a second for rows
            # that came another way (the hint is an optimisation, never the truth).
            if not self._work_hint.is_set() and time.monotonic() - last_claim[0] < self.safety_claim:
                return
            self._work_hint.clear()
            last_claim[0] = time.monotonic()
            for row in self._call(engine.claim, free) or ():
                with self._busy_lock:
                    self._busy += 1
                work.put((engine, row))

        stop.wait(engine.rng.uniform(0, self.config.executor_poll_interval))  # its own phase
        every(stop, self.config.executor_poll_interval, claim, lambda: engine is self.engine)

    def _worker(self, killed: threading.Event, work: queue.Queue) -> None:
        while True:
            item = work.get()
            if item is None:
                return
            engine, row = item
            started = time.monotonic()
            status = engine.run_body(row)  # the body, for real, outside the store lock
            rest = engine.duration_of(wall_us(), row) - (time.monotonic() - started)
            if rest > 0 and killed.wait(rest):
                return  # died (or a stop ran out of time) mid-body: the row stays 'running'
            self._call(engine.finish, row["id"], status)  # nothing if the runner died meanwhile
            with self._busy_lock:
                self._busy -= 1

    def _workload(self, engine: ReactorEngine, stop: threading.Event, w: Workload, rng: random.Random) -> None:
        """Poisson arrivals on the writer's own schedule (seconds since start):
        a request is stamped when it arrives and commits when the store step
        lock is free, so a poll pass that holds the lock delays commits, never
        arrivals (relative waits would thin the arrivals behind every pass)."""
        gen = GENERATORS[w.payload]
        k = 0
        stamps = getattr(self.faults, "stamps", None)
        due = max(self.now, w.start)
        while True:
            due += rng.expovariate(w.rate)
            if stop.wait(max(0.0, due - self.now)) or engine is not self.engine:
                return
            if w.stop is not None and due >= w.stop:
                return
            now = self.start_us + round(due * US)  # the arrival
            for fired_at, delay in (stamps(w.reactor, now) if stamps else ((now, 0.0),)):
                payload = gen(rng, k)
                k += 1
                if delay > 0 and stop.wait(delay):
                    return  # the writer died with its transaction open
                self._call(engine.fire, w.reactor, payload, w.tenant, fired_at=fired_at)

    def fire_trigger(self, name: str, context: dict | None = None) -> dict:
        started = super().fire_trigger(name, context)
        self._work_hint.set()
        return started

    # -- driving the run ---------------------------------------------------
    def add_workload(self, reactor: str, rate: float, tenant: str = "public", *,
                     payload: str = "quote", start: float = 0.0, stop: float | None = None) -> Workload:
        """Fire ``reactor`` at Poisson times, ``rate`` per second, from ``start``
        to ``stop`` (seconds since start), while running."""
        w = Workload(reactor, rate, tenant, payload, start, stop)
        rng = random.Random(f"fanoutsim:workload:{self.seed}:{self._starts}:{len(self._workloads)}")
        with self._lifecycle, self._proc:
            self._workloads.append((w, rng))
            engine = self.engine
            if self._state == "running" and engine is not None:
                self._spawn(f"workload-{reactor}", self._workload, engine, self._stop, w, rng)
        return w
