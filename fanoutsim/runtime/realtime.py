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

import os
import queue
import random
import threading
import time
from typing import Any

from ..config import SchedulerConfig
from ..faults import Crash, FaultPlan, Injector, NoFaults
from ..ids import FreshIdSource
from ..metrics import LockedMetrics
from ..reactor import ReactorEngine, Registry, Runner
from ..store import open_store
from ..trace import LockedTrace, NullTrace
from ..workload import GENERATORS, Workload
from .host import RunnerHost, checked_config
from .wallclock import WallRuntime, every, wall_us


SAFETY_CLAIM = 1.0  # seconds: the executor claims at least this often without a hint


class Realtime(RunnerHost, WallRuntime):
    """The reactor subscription design running for real, on the wall clock."""

    def __init__(self, config: SchedulerConfig | None = None, store: Any = "run.duckdb", faults=None,
                 *, seed: int = 0, trace: bool = True, stop_timeout: float = 10.0) -> None:
        config = checked_config(config, seed)
        self.config = config
        self.seed = seed
        self.stop_timeout = stop_timeout
        self.store = open_store(store)  # a bad, newer or locked file fails here, untouched
        # ids must not repeat those of an earlier process on this file, nor of any
        # other wall-clock run: drawn from the OS's entropy, not from the seed
        self._starts = sum(1 for r in self.store.rows("runner_log") if r["event"] == "start")
        self.ids = FreshIdSource()
        self.metrics_registry = LockedMetrics()
        self._trace = LockedTrace() if trace else NullTrace()
        self.registry = Registry()
        self.runner = Runner(self)
        self.plan = faults if isinstance(faults, FaultPlan) else None
        self.faults = faults if (faults is not None and self.plan is None) else NoFaults()
        self.start_us = wall_us()
        self.engine: ReactorEngine | None = self._new_engine()
        self.incarnation = 0
        self._state = "created"
        self._checked = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._work: queue.Queue = queue.Queue()
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._workloads: list[tuple[Workload, random.Random]] = []
        self._restart_timer: threading.Timer | None = None
        self._work_hint = threading.Event()  # set when this process made executions
        self._lifecycle = threading.RLock()
        self._closing = threading.Event()  # the runtime's own threads (planned crashes)

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return f"the runner is {self._state}; fire and the runner API need a started runner"
        return "the runner is down (crashed) and will restart after its downtime"

    def _new_engine(self) -> ReactorEngine:
        return ReactorEngine(self.store, self.config, self.registry, self.ids, self.metrics_registry,
                             self._trace, self.faults, random.Random(f"fanoutsim:realtime:{self.seed}"))

    # -- life cycle ---------------------------------------------------------
    def start(self) -> "Realtime":
        """Start the loops in background threads and return at once."""
        with self._lifecycle:
            if self._state == "running":
                raise RuntimeError("the runner is already running")
            if self._state in ("stopped", "closed"):
                raise RuntimeError(f"the runner was {self._state}; make a new Realtime over the same store")
            self.start_us = wall_us()
            if self.plan is not None:
                self.faults = Injector(self.plan, seed=self.seed, start_us=self.start_us, trace=self._trace)
                self.engine.faults = self.faults
                self.check_plan()
            self._state = "running"
            self._closing = threading.Event()
            self._schedule_crashes(self._closing)  # CrashAt / CrashRandomly, seconds since start
            self._boot()
        return self

    def _boot(self) -> None:
        """Start one incarnation: its log row, its loops."""
        with self.store.transaction() as tx:
            tx.log_runner(wall_us(), "start", f"pid {os.getpid()}")
        if self.engine is None:
            self.incarnation += 1
            self._trace.attempt = self.incarnation
            self.engine = self._new_engine()
            self._trace.add(wall_us(), "restarted", "runtime")
        self._call(self.engine, "recover")  # claims a dead process (or incarnation) left running
        self._stop = threading.Event()
        self._work = queue.Queue()
        self._busy = 0
        engine, stop = self.engine, self._stop
        targets = [("poll", self._poll_loop), ("prune", self._prune_loop), ("executor", self._executor_loop)]
        targets += [(f"worker-{i}", self._worker) for i in range(self.config.executor_workers)]
        self._threads = [threading.Thread(target=fn, args=(engine, stop), name=f"fanoutsim-{name}", daemon=True)
                         for name, fn in targets]
        for w, rng in self._workloads:
            self._threads.append(threading.Thread(target=self._workload, args=(engine, stop, w, rng),
                                                  name=f"fanoutsim-workload-{w.reactor}", daemon=True))
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Stop the loops: the pass in hand finishes, running bodies get
        ``stop_timeout`` seconds; nothing is half-written. A no-op if not running."""
        with self._lifecycle:
            if self._restart_timer is not None:
                self._restart_timer.cancel()
            if self._state != "running":
                return
            self._state = "stopped"
            self._closing.set()
            self._halt(join=True)
            self.engine = None
            with self.store.transaction() as tx:
                tx.log_runner(wall_us(), "stop")

    def _halt(self, join: bool) -> None:
        self._stop.set()
        for _ in range(self.config.executor_workers):
            self._work.put(None)
        if join:
            deadline = time.monotonic() + self.stop_timeout
            me = threading.current_thread()
            for t in self._threads:
                if t is not me:
                    t.join(max(0.0, deadline - time.monotonic()))

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        """The runner dies now: loops stop without ceremony, in-flight bodies are
        abandoned (their rows stay 'running'). Restarts after ``downtime`` seconds."""
        with self._lifecycle:
            if self.engine is None or self._state != "running":
                return
            self.engine = None
            self._trace.add(wall_us(), "crashed", "runtime", detail=point)
            self.metrics_registry.inc("fanoutsim_runner_crashes_total")
            self._halt(join=False)
            if downtime is not None:
                self._restart_timer = threading.Timer(downtime, self._restart)
                self._restart_timer.daemon = True
                self._restart_timer.start()

    # -- the loops -------------------------------------------------------------
    def _call(self, engine: ReactorEngine, method: str, *args, **kwargs):
        try:
            return getattr(engine, method)(wall_us(), *args, **kwargs)
        except Crash as c:
            if engine is self.engine:
                self.crash(c.point, c.downtime)
            return None

    def _poll_loop(self, engine, stop) -> None:
        def one_pass() -> None:
            # step by step, each step at its own wall time: a batch is dispatched
            # when its fetch has come back, not when the pass began
            decoded: dict = {}
            for sub in self._call(engine, "poll_subscriptions") or ():
                batch = self._call(engine, "fetch", sub)
                if engine is not self.engine:
                    return
                if batch:
                    stats = self._call(engine, "drain", sub, batch, decoded)
                    if stats is not None and stats.dispatched:
                        self._work_hint.set()

        every(stop, self.config.reactor_poll_interval, one_pass, lambda: engine is self.engine)

    def _prune_loop(self, engine, stop) -> None:
        every(stop, self.config.reactor_firings_prune_interval, lambda: self._call(engine, "prune_once"),
              lambda: engine is self.engine)

    def _executor_loop(self, engine, stop) -> None:
        last_claim = [0.0]

        def claim() -> None:
            with self._busy_lock:
                free = self.config.executor_workers - self._busy
            if free <= 0:
                return
            # A claim on an empty table still costs a round trip: claim when this
            # process dispatched something, and at least once a second for rows
            # that came another way (the hint is an optimisation, never the truth).
            if not self._work_hint.is_set() and time.monotonic() - last_claim[0] < SAFETY_CLAIM:
                return
            self._work_hint.clear()
            last_claim[0] = time.monotonic()
            for row in self._call(engine, "claim", free) or ():
                with self._busy_lock:
                    self._busy += 1
                self._work.put((engine, row))

        stop.wait(engine.rng.uniform(0, self.config.executor_poll_interval))  # its own phase
        every(stop, self.config.executor_poll_interval, claim, lambda: engine is self.engine)

    def _worker(self, engine, stop) -> None:
        work = self._work
        while True:
            item = work.get()
            if item is None:
                return
            eng, row = item
            started = time.monotonic()
            status = eng.run_body(row)
            rest = eng.duration_of(wall_us(), row) - (time.monotonic() - started)
            if rest > 0 and stop.wait(rest) and eng is not self.engine:
                return  # died mid-body: the row stays 'running'
            if eng is self.engine:
                self._call(eng, "finish", row["id"], status)
            with self._busy_lock:
                self._busy -= 1

    def _workload(self, engine, stop, w: Workload, rng: random.Random) -> None:
        gen = GENERATORS[w.payload]
        k = 0
        stamps = getattr(self.faults, "stamps", None)
        while not stop.wait(rng.expovariate(w.rate)):
            if engine is not self.engine:
                return
            if w.stop is not None and self.now >= w.stop:
                return
            now = wall_us()
            for fired_at, delay in (stamps(w.reactor, now) if stamps else ((now, 0.0),)):
                payload = gen(rng, k)
                k += 1
                if delay > 0 and stop.wait(delay):
                    return  # the writer died with its transaction open
                self._call(engine, "fire", w.reactor, payload, w.tenant, fired_at=fired_at)

    def fire_trigger(self, name: str, context: dict | None = None) -> dict:
        started = super().fire_trigger(name, context)
        self._work_hint.set()
        return started

    # -- driving the run ---------------------------------------------------
    def add_workload(self, reactor: str, rate: float, tenant: str = "public", *,
                     payload: str = "quote", start: float = 0.0, stop: float | None = None) -> Workload:
        """Fire ``reactor`` at Poisson times, ``rate`` per second, while running."""
        w = Workload(reactor, rate, tenant, payload, start, stop)
        rng = random.Random(f"fanoutsim:workload:{self.seed}:{self._starts}:{len(self._workloads)}")
        self._workloads.append((w, rng))
        if self._state == "running" and self.engine is not None:
            t = threading.Thread(target=self._workload, args=(self.engine, self._stop, w, rng),
                                 name=f"fanoutsim-workload-{reactor}", daemon=True)
            self._threads.append(t)
            t.start()
        return w
