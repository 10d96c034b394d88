"""The toy design: engine steps, config, scenario, runtimes and checker."""
from __future__ import annotations

import dataclasses
import math
import os
import random
import threading
import time
from dataclasses import dataclass

import pandas as pd
import simpy

from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.timeutil import US
from fanoutsim.scenario import ScenarioError

CONSUMER = "toy"


# -- config ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ToyConfig:
    poll_interval: float = 1.0   # seconds between the consumer's reads
    batch_limit: int = 10        # rows per read

    def __post_init__(self) -> None:
        p = self.poll_interval
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p <= 0:
            raise ValueError(f"poll_interval must be a number of seconds > 0, got {p!r}")
        b = self.batch_limit
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"batch_limit must be an int >= 1, got {b!r}")


# -- engine steps: plain functions of (store, now) --------------------------------------
def append(store, now: int, body: str) -> int:
    with store.transaction() as tx:
        seq = tx.reserve_outbox_seq()
        tx.insert_outbox({"seq": seq, "ts": now, "topic": "toy", "kind": "toy.appended", "ref": body,
                          "due_at": None})
    return seq


def consume(store, now: int, limit: int) -> list[int]:
    """Read past the cursor, handle, move the cursor: one transaction."""
    with store.transaction() as tx:
        cursor = tx.get_cursor(CONSUMER) or 0
        rows = tx.fetch_outbox(cursor, limit)
        if rows:
            tx.set_cursor(CONSUMER, rows[-1]["seq"])
    return [r["seq"] for r in rows]


# -- the scenario -----------------------------------------------------------------------
@dataclass(frozen=True)
class ToyWorkload:
    rate: float


@dataclass(frozen=True)
class ToyScenario:
    name: str
    source: str
    until: float
    seed: int = 0
    store: str = "memory"
    description: str = ""
    config: ToyConfig = ToyConfig()
    workloads: tuple[ToyWorkload, ...] = ()
    design = "toy"

    def build(self, seed=None, store=None, until=None):
        return ToySimulation(self.config, seed=self.seed if seed is None else seed,
                             store=self.store if store is None else store, workloads=self.workloads)

    def run(self, seed=None, until=None, store=None):
        sim = self.build(seed, store)
        sim.run(self.until if until is None else until)
        return sim


def parse_toy_scenario(data: dict, source: str = "<scenario>", default_name: str = "scenario") -> ToyScenario:
    problems: list[tuple[str, str]] = []
    allowed = ("design", "name", "description", "run", "toy", "workload")
    for k in data:
        if k not in allowed:
            problems.append((k, f"unknown key; allowed: {', '.join(allowed)}"))
    run = data.get("run", {})
    until = run.get("until")
    if isinstance(until, bool) or not isinstance(until, (int, float)) or not until > 0:
        problems.append(("run.until", f"must be a number of virtual seconds > 0, got {until!r}"))
    config = ToyConfig()
    table = data.get("toy", {})
    for k, v in table.items():
        try:
            config = dataclasses.replace(config, **{k: v})
        except TypeError:
            problems.append((f"toy.{k}", f"unknown key; allowed: {', '.join(f.name for f in dataclasses.fields(ToyConfig))}"))
        except ValueError as exc:
            problems.append((f"toy.{k}", str(exc)))
    workloads = []
    for i, w in enumerate(data.get("workload", [])):
        rate = w.get("rate")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            problems.append((f"workload[{i}].rate", f"must be a number of appends per second > 0, got {rate!r}"))
        else:
            workloads.append(ToyWorkload(float(rate)))
    if problems:
        raise ScenarioError(source, problems)
    return ToyScenario(name=data.get("name", default_name), source=source, until=float(until),
                       seed=run.get("seed", 0), store=run.get("store", "memory"),
                       description=data.get("description", ""), config=config, workloads=tuple(workloads))


# -- the virtual clock ------------------------------------------------------------------
class ToySimulation:
    design = "toy"

    def __init__(self, config: ToyConfig = ToyConfig(), *, seed: int = 0, store="memory", workloads=()):
        self.config, self.seed = config, seed
        self.env = simpy.Environment()
        self.store = open_store(store)
        self.events: list[dict] = []
        self.rng = random.Random(f"toy:{seed}")
        for w in workloads:
            self.env.process(self._writer(w.rate))
        self.env.process(self._consumer())

    @property
    def now(self) -> float:
        return self.env.now

    def now_us(self) -> int:
        return round(self.env.now * US)

    def _writer(self, rate: float):
        k = 0
        while True:
            yield self.env.timeout(self.rng.expovariate(rate))
            k += 1
            seq = append(self.store, self.now_us(), f"body {k}")
            self.events.append({"t": self.now_us(), "kind": "appended", "seq": seq})

    def _consumer(self):
        while True:
            yield self.env.timeout(self.config.poll_interval)
            for seq in consume(self.store, self.now_us(), self.config.batch_limit):
                self.events.append({"t": self.now_us(), "kind": "handled", "seq": seq})

    def run(self, until: float) -> None:
        self.env.run(until=until)

    def trace(self) -> pd.DataFrame:
        return pd.DataFrame(self.events, columns=["t", "kind", "seq"])

    def log(self) -> pd.DataFrame:
        return pd.DataFrame(self.store.rows("outbox"), columns=["seq", "ts", "topic", "kind", "ref", "due_at"])

    def cursors(self) -> pd.DataFrame:
        return pd.DataFrame(self.store.rows("cursors"), columns=["consumer", "seq"])


# -- the checker ------------------------------------------------------------------------
@dataclass
class ToyCheck:
    total: dict

    @property
    def valid(self) -> bool:
        return bool(self.total["valid"])


def check_toy(sim) -> ToyCheck:
    log = [r["seq"] for r in sim.store.rows("outbox")]
    cursor = next((r["seq"] for r in sim.store.rows("cursors") if r["consumer"] == CONSUMER), 0)
    t = sim.trace()
    handled = t.loc[t["kind"] == "handled", "seq"].value_counts()
    lost = sum(1 for s in log if s <= cursor and s not in handled.index)
    duplicates = int((handled - 1).clip(lower=0).sum())
    return ToyCheck({"appended": len(log), "handled": int(len(handled)), "pending": sum(1 for s in log if s > cursor),
                     "lost": lost, "duplicates": duplicates, "valid": lost == 0 and duplicates == 0})


def latencies(sim) -> pd.Series:
    t = sim.trace()
    app = t[t["kind"] == "appended"].set_index("seq")["t"]
    got = t[t["kind"] == "handled"].groupby("seq")["t"].min()
    return ((got - app.reindex(got.index)) / US).dropna()


# -- the wall clock ---------------------------------------------------------------------
class ToyRealtime:
    """The same steps in a thread, on the wall clock, over a DuckDB file."""

    design = "toy"

    def __init__(self, config: ToyConfig = ToyConfig(), store="toy.duckdb", rate: float = 0.0):
        self.config, self.rate = config, rate
        self.store = open_store(store)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._state = "created"
        self.start_s = time.time()

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def now(self) -> float:
        return time.time() - self.start_s

    def now_us(self) -> int:
        return round(time.time() * US)

    def start(self):
        self._state, self.start_s = "running", time.time()
        self._threads.append(threading.Thread(target=self._consumer, daemon=True))
        if self.rate:
            self._threads.append(threading.Thread(target=self._writer, daemon=True))
        for t in self._threads:
            t.start()
        return self

    def _consumer(self) -> None:
        while not self._stop.wait(self.config.poll_interval):
            with self._lock:
                consume(self.store, self.now_us(), self.config.batch_limit)

    def _writer(self) -> None:
        rng = random.Random("toy-realtime")
        while not self._stop.wait(rng.expovariate(self.rate)):
            self.append("generated")

    def append(self, body: str) -> int:
        if self._state in ("stopped", "closed"):
            raise RuntimeError("the toy runtime is stopped")
        with self._lock:
            return append(self.store, self.now_us(), body)

    def stop(self) -> None:
        if self._state == "running":
            self._stop.set()
            for t in self._threads:
                t.join(5)
        if self._state != "closed":
            self._state = "stopped"

    def close(self) -> None:
        self.stop()
        if self._state != "closed":
            self._state = "closed"
            self.store.close()

    def status(self) -> dict:
        log = self.store.rows("outbox")
        cursor = next((r["seq"] for r in self.store.rows("cursors") if r["consumer"] == CONSUMER), 0)
        return {"pid": os.getpid(), "running": self.running, "rows": len(log), "cursor": cursor,
                "lag": max((r["seq"] for r in log), default=0) - cursor}
