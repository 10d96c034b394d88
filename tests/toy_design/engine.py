"""The toy design: engine steps, config, scenario, one runtime for both clocks, checker.

Its loops are written once (:class:`ToyRuntime`); :class:`ToySimulation` and
:class:`ToyRealtime` only pick the kernel's virtual or wall driver."""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
from dataclasses import dataclass

import pandas as pd

from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.loops import Ticks, arrivals
from fanoutsim.kernel.runtime.virtual import VirtualRuntime
from fanoutsim.kernel.runtime.wallclock import SteppedWallRuntime
from fanoutsim.kernel.timeutil import US
from fanoutsim.scenario import ScenarioError

CONSUMER = "toy"


# -- config ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ToyConfig:
    poll_interval: float = 1.0  # seconds between the consumer's reads
    batch_limit: int = 10  # rows per read

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
        tx.insert_outbox({"seq": seq, "ts": now, "topic": "toy", "kind": "toy.appended", "ref": body, "due_at": None})
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
        return ToySimulation(
            self.config,
            seed=self.seed if seed is None else seed,
            store=self.store if store is None else store,
            workloads=self.workloads,
        )

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
            problems.append(
                (f"toy.{k}", f"unknown key; allowed: {', '.join(f.name for f in dataclasses.fields(ToyConfig))}")
            )
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
    return ToyScenario(
        name=data.get("name", default_name),
        source=source,
        until=float(until),
        seed=run.get("seed", 0),
        store=run.get("store", "memory"),
        description=data.get("description", ""),
        config=config,
        workloads=tuple(workloads),
    )


# -- one runtime, its loops written once ------------------------------------------------
class ToyEngine:
    """One incarnation: the steps, bound to the store (what a crash throws away)."""

    def __init__(self, runtime) -> None:
        self.rt, self.store = runtime, runtime.store

    def append(self, now: int, body: str) -> int:
        seq = append(self.store, now, body)
        self.rt.events.append({"t": now, "kind": "appended", "seq": seq})
        return seq

    def consume(self, now: int, limit: int) -> list[int]:
        seqs = consume(self.store, now, limit)
        self.rt.events.extend({"t": now, "kind": "handled", "seq": s} for s in seqs)
        return seqs


class ToyRuntime:
    """The toy's loops, for either clock: a consumer that reads every
    ``poll_interval``, and Poisson writers."""

    design = "toy"
    _noun = "toy"

    def _setup(self, workloads=()) -> None:
        self.events: list[dict] = []
        self._writers = 0
        for w in workloads:
            self.add_workload(w.rate)

    def _new_engine(self, incarnation: int) -> ToyEngine:
        return ToyEngine(self)

    def _start_loops(self, engine: ToyEngine) -> None:
        self._spawn(self._consumer_loop(engine), "consumer")

    def _consumer_loop(self, engine: ToyEngine):
        ticks = Ticks(self.now, self.config.poll_interval)
        while self._running(engine):
            yield ticks.next(self.now)
            self._call(engine.consume, self.config.batch_limit)

    def _writer(self, rate: float, rng: random.Random):
        written = itertools.count(1)

        def append(due: float) -> None:
            if self.engine is not None:
                self._call(self.engine.append, f"body {next(written)}")

        return arrivals(lambda: self.now, rate, 0.0, None, rng, append)

    def add_workload(self, rate: float) -> None:
        self._service(self._writer(rate, self._rng("toy-writer", self._writers)), "writer")
        self._writers += 1

    def append(self, body: str) -> int:
        return self._api(ToyEngine.append, body)

    def trace(self) -> pd.DataFrame:
        return pd.DataFrame(self.events, columns=["t", "kind", "seq"])

    def metrics(self) -> dict[str, float]:
        return {"toy_rows_total": len(self.store.rows("outbox"))}

    def log(self) -> pd.DataFrame:
        return pd.DataFrame(self.store.rows("outbox"), columns=["seq", "ts", "topic", "kind", "ref", "due_at"])

    def cursors(self) -> pd.DataFrame:
        return pd.DataFrame(self.store.rows("cursors"), columns=["consumer", "seq"])


class ToySimulation(ToyRuntime, VirtualRuntime):
    """The toy under SimPy's virtual clock."""

    def __init__(self, config: ToyConfig = ToyConfig(), *, seed: int = 0, store="memory", workloads=()):
        self.config, self.seed = config, seed
        self._open(seed, store, None, None, False, opener=open_store)
        self._setup(workloads)
        self.restart()

    def run(self, until: float) -> None:
        self._advance(until)


# -- the checker ------------------------------------------------------------------------
@dataclass
class ToyCheck:
    total: dict

    @property
    def valid(self) -> bool:
        return bool(self.total["valid"])

    @property
    def summary(self) -> dict:
        """The totals every design shares (the kernel's check contract)."""
        t = self.total
        return {
            "valid": self.valid,
            "delivered": t["handled"],
            "duplicates": t["duplicates"],
            "lost": t["lost"],
            "pending": t["pending"],
            "duplicates_by_cause": {},
            "lost_by_cause": {},
        }


def check_toy(sim) -> ToyCheck:
    log = [r["seq"] for r in sim.store.rows("outbox")]
    cursor = next((r["seq"] for r in sim.store.rows("cursors") if r["consumer"] == CONSUMER), 0)
    t = sim.trace()
    handled = t.loc[t["kind"] == "handled", "seq"].value_counts()
    lost = sum(1 for s in log if s <= cursor and s not in handled.index)
    duplicates = int((handled - 1).clip(lower=0).sum())
    return ToyCheck(
        {
            "appended": len(log),
            "handled": int(len(handled)),
            "pending": sum(1 for s in log if s > cursor),
            "lost": lost,
            "duplicates": duplicates,
            "valid": lost == 0 and duplicates == 0,
        }
    )


def latencies(sim) -> pd.Series:
    t = sim.trace()
    app = t[t["kind"] == "appended"].set_index("seq")["t"]
    got = t[t["kind"] == "handled"].groupby("seq")["t"].min()
    return ((got - app.reindex(got.index)) / US).dropna()


# -- the wall clock ---------------------------------------------------------------------
class ToyRealtime(ToyRuntime, SteppedWallRuntime):
    """The same loops on threads, on the wall clock, over a DuckDB file."""

    def __init__(self, config: ToyConfig = ToyConfig(), store="toy.duckdb", rate: float = 0.0, seed: int = 0):
        self.config, self.seed = config, seed
        self._open(seed, store, None, False, 5.0, opener=open_store)
        self._setup()
        self.engine = self._new_engine(0)
        if rate:
            self.add_workload(rate)

    def status(self) -> dict:
        log = self.store.rows("outbox")
        cursor = next((r["seq"] for r in self.store.rows("cursors") if r["consumer"] == CONSUMER), 0)
        return {
            "pid": os.getpid(),
            "running": self.running,
            "rows": len(log),
            "cursor": cursor,
            "lag": max((r["seq"] for r in log), default=0) - cursor,
        }
