"""Parameter sweeps: one scenario, a grid of settings, many seeds, one tidy table.

>>> import fanoutsim as fs
>>> df = fs.sweep("data/scenarios/sweep.toml",                      # doctest: +SKIP
...               grid={"reactor_poll_interval": [0.5, 1.0, 2.0],
...                     "reactor_poll_batch_limit": [10, 100]},
...               seeds=range(5), workers=2, until=600)

Grid keys are any :class:`~fanoutsim.SchedulerConfig` field, plus

``rate``           total firings per virtual second: every workload of the
                   scenario is scaled by the same factor so their rates sum to it
                   (the split between reactors and tenants is kept; a scenario
                   that replays a recording cannot be scaled);
``fetch_latency``  the Simulation's store round trip between a poll's fetch and
                   its drain, seconds (see :class:`fanoutsim.Simulation`).

Values are lists. The sweep runs the cartesian product of the grid times the
seeds, one run per row of the result, in grid order (the first key varies
slowest) and then seed order. Columns: the grid keys, ``seed``, then

``fire_to_dispatch_{p50,p95,p99,mean}_s``, ``fire_to_claim_{p50,p95,p99,mean}_s``
    latency percentiles of the subscription-dispatched executions (seconds;
    NaN when there are none);
``executions``, ``firings``
    executions made, firings logged;
``polls_per_s``
    ``fanoutsim_reactor_poll_queries_total`` per virtual second: the poll
    loop's load on the database;
``backlog``
    at the end, retained firings past each subscription's watermark, summed
    (:func:`fanoutsim.analysis.watermarks`);
``lost``, ``extra_deliveries``, ``valid``
    from :func:`fanoutsim.check`;
``wall_s``
    wall seconds the run took (build, run and analysis), when it was run.

Finished runs are kept in the DuckDB file ``cache`` (only the calling process
opens it, and writes finished rows in batches), keyed by a hash of the
scenario's content with the run's full configuration and overrides, the seed
and ``fanoutsim.__version__``: an interrupted sweep resumes where it stopped,
and a repeated one runs nothing. ``df.attrs["ran"]`` and
``df.attrs["from_cache"]`` count the rows of each kind.

The whole grid is checked before any run starts: an unknown key or a value
the engine would refuse raises :class:`ValueError` naming the key, the value
and what is allowed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.designs.reactor.config import SchedulerConfig

__all__ = ["sweep", "GRID_EXTRA_KEYS", "RESULT_COLUMNS", "scale_rate", "grid_runs"]

GRID_EXTRA_KEYS = ("rate", "fetch_latency")
_LATENCY_STATS = ("p50", "p95", "p99", "mean")
RESULT_COLUMNS = (
    *(f"fire_to_dispatch_{s}_s" for s in _LATENCY_STATS),
    *(f"fire_to_claim_{s}_s" for s in _LATENCY_STATS),
    "executions", "firings", "polls_per_s", "backlog", "lost", "extra_deliveries", "valid", "wall_s",
)
_INT_RESULTS = ("executions", "firings", "backlog", "lost", "extra_deliveries")
_TABLE = "fanoutsim_sweep_runs_v1"  # a new result layout gets a new table
_FLUSH_EVERY = 8                     # finished rows per cache write


# -- the grid ------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """numpy scalars as Python ones (SchedulerConfig wants a real int)."""
    return value.item() if isinstance(value, np.generic) else value


def _allowed_keys() -> tuple[str, ...]:
    return (*GRID_EXTRA_KEYS, *SchedulerConfig.field_names())


def _check_grid(grid: Mapping[str, Any] | None, base: SchedulerConfig,
                has_workloads: bool, has_replays: bool = False) -> dict[str, list]:
    if grid is None:
        return {}
    if not isinstance(grid, Mapping):
        raise ValueError(f"grid must be a mapping of setting -> list of values, got {type(grid).__name__}")
    allowed = _allowed_keys()
    out: dict[str, list] = {}
    for key, values in grid.items():
        if key not in allowed:
            raise ValueError(f"grid: unknown key {key!r}; allowed: {', '.join(allowed)}")
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise ValueError(f"grid[{key!r}] must be a list of values, got {values!r}")
        values = [_plain(v) for v in values]
        if not values:
            raise ValueError(f"grid[{key!r}] is empty; give at least one value")
        for value in values:
            _check_value(key, value, base, has_workloads, has_replays)
        out[key] = values
    return out


def _check_value(key: str, value: Any, base: SchedulerConfig, has_workloads: bool,
                 has_replays: bool = False) -> None:
    number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if key == "rate":
        if not (number and value > 0):
            raise ValueError(f"grid['rate'] value {value!r} is not allowed: the total firing rate must "
                             f"be a finite number of firings per virtual second > 0")
        if not has_workloads:
            raise ValueError(f"grid['rate'] value {value!r} is not allowed: the scenario has no "
                             f"[[workload]] to scale")
        if has_replays:
            raise ValueError(f"grid['rate'] value {value!r} is not allowed: the scenario replays a "
                             f"recorded [[workload]], whose rate is the recording's; sweep a scenario "
                             f"with Poisson workloads only")
    elif key == "fetch_latency":
        if not (number and value >= 0):
            raise ValueError(f"grid['fetch_latency'] value {value!r} is not allowed: the store round "
                             f"trip must be a finite number of seconds >= 0")
    else:
        try:
            dataclasses.replace(base, **{key: value})
        except (ValueError, TypeError) as exc:
            raise ValueError(f"grid[{key!r}] value {value!r} is not allowed: {exc}") from None


def scale_rate(scenario, rate: float):
    """The scenario with every workload scaled so that their rates sum to ``rate``."""
    total = sum(w.rate for w in scenario.workloads)
    if not scenario.workloads or total <= 0:
        raise ValueError("the scenario has no [[workload]] to scale")
    factor = rate / total
    workloads = tuple(dataclasses.replace(w, rate=w.rate * factor) for w in scenario.workloads)
    return dataclasses.replace(scenario, workloads=workloads)


def _load(scenario):
    from fanoutsim.designs.reactor.scenario import Scenario, load_scenario

    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, (str, os.PathLike)):
        return load_scenario(scenario, design="reactor")
    raise TypeError(f"scenario must be a Scenario or the path of a TOML scenario, "
                    f"got {type(scenario).__name__}")


def _recordings(sc) -> list[str]:
    """A hash of each recorded workload file's bytes: a changed recording is new content."""
    out = []
    for rp in getattr(sc, "replays", ()):
        path = Path(getattr(rp, "path", ""))
        out.append(hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "")
    return out


@dataclasses.dataclass(frozen=True)
class _Run:
    """One run: everything a worker process needs, picklable."""

    index: int
    values: tuple          # the grid values, in grid key order
    seed: int
    scenario: Any          # the effective Scenario (config and rates applied)
    until: float
    fetch_latency: float
    store: str
    key: str               # hash of the content, config and overrides (not the seed)


def grid_runs(scenario, grid: Mapping[str, Any] | None = None, seeds: Iterable[int] = range(1),
              until: float | None = None) -> tuple[list[str], list[_Run]]:
    """Check the grid and list the runs of a sweep: ``(grid keys, runs)``.
    Raises ValueError before anything runs."""
    sc = _load(scenario)
    keys_values = _check_grid(grid, sc.config, bool(sc.workloads), bool(getattr(sc, "replays", ())))
    seeds = [_plain(s) for s in seeds]
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int):
            raise ValueError(f"seeds: {s!r} is not an integer seed")
    if not seeds:
        raise ValueError("seeds is empty; give at least one seed, e.g. range(3)")
    if until is None:
        until = sc.until
    elif isinstance(until, bool) or not isinstance(until, (int, float)) or not 0 < until < math.inf:
        raise ValueError(f"until must be a finite number of virtual seconds > 0, got {until!r}")
    # a file store cannot be shared by many runs: those run in memory
    store = sc.store if sc.store in ("memory", "duckdb") else "memory"
    keys = list(keys_values)
    recordings = _recordings(sc)
    base = dataclasses.replace(sc, name="", source="", description="", seed=0, store=store)
    runs: list[_Run] = []
    for values in itertools.product(*keys_values.values()):
        setting = dict(zip(keys, values))
        eff = base
        config_changes = {k: v for k, v in setting.items() if k not in GRID_EXTRA_KEYS}
        if config_changes:
            eff = dataclasses.replace(eff, config=dataclasses.replace(eff.config, **config_changes))
        if "rate" in setting:
            eff = scale_rate(eff, float(setting["rate"]))
        fetch_latency = float(setting.get("fetch_latency", 0.0))
        # the effective scenario holds the config and the scaled rates: a setting named by the
        # grid or by the scenario's own [config] is the same run
        content = json.dumps({"scenario": repr(eff), "until": float(until), "fetch_latency": fetch_latency,
                              "recordings": recordings}, sort_keys=True)
        key = hashlib.sha256(content.encode()).hexdigest()
        for seed in seeds:
            runs.append(_Run(len(runs), tuple(values), seed, eff, float(until), fetch_latency, store, key))
    return keys, runs


# -- one run -------------------------------------------------------------------------
def _run_one(run: _Run) -> dict[str, Any]:
    """Build, run and measure one simulation (in a worker process or here)."""
    from fanoutsim.analysis import latency_frame, metric_total, percentiles, watermarks
    from fanoutsim.designs.reactor.checker import check

    t0 = time.perf_counter()
    sim = run.scenario.build(seed=run.seed, store=run.store)
    sim.fetch_latency = run.fetch_latency  # read by the poll loop at every drain
    sim.run(run.until)
    lat = latency_frame(sim)
    metrics = sim.metrics()
    report = check(sim)
    row: dict[str, Any] = {}
    for col in ("fire_to_dispatch", "fire_to_claim"):
        stats = percentiles(lat[col])
        for s in _LATENCY_STATS:
            row[f"{col}_{s}_s"] = math.nan if stats[s] is None else stats[s]
    row["executions"] = int(len(sim.executions()))
    row["firings"] = int(metric_total(metrics, "fanoutsim_reactor_firings_total"))
    row["polls_per_s"] = metric_total(metrics, "fanoutsim_reactor_poll_queries_total") / sim.now
    row["backlog"] = int(sum(w["backlog"] for w in watermarks(sim)))
    row["lost"] = int(report.total["lost"])
    row["extra_deliveries"] = int(report.total["extra_deliveries"])
    row["valid"] = bool(report.valid)
    row["wall_s"] = time.perf_counter() - t0
    return row


# -- the cache -----------------------------------------------------------------------
class _Cache:
    """Finished runs in a DuckDB file; opened briefly for each read or write."""

    def __init__(self, path) -> None:
        self.path = Path(path)

    def _connect(self):
        import duckdb

        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(self.path))
        cols = ", ".join(f'"{c}" {_sql_type(c)}' for c in RESULT_COLUMNS)
        con.execute(f'CREATE TABLE IF NOT EXISTS {_TABLE} (key VARCHAR, seed BIGINT, version VARCHAR, '
                    f'config VARCHAR, {cols}, PRIMARY KEY (key, seed, version))')
        return con

    def lookup(self, runs: list[_Run], version: str) -> dict[int, dict]:
        if not runs or not self.path.exists():
            return {}
        wanted = pd.DataFrame({"key": [r.key for r in runs], "seed": [r.seed for r in runs],
                               "idx": [r.index for r in runs]})
        cols = ", ".join(f'c."{c}"' for c in RESULT_COLUMNS)
        con = self._connect()
        try:
            con.register("wanted", wanted)
            found = con.execute(
                f"SELECT w.idx, {cols} FROM wanted w "
                f"JOIN {_TABLE} c ON c.key = w.key AND c.seed = w.seed AND c.version = ?",
                [version]).df()
        finally:
            con.close()
        return {int(row["idx"]): {c: row[c] for c in RESULT_COLUMNS}
                for row in found.to_dict("records")}

    def store(self, rows: list[tuple[_Run, dict]], version: str, keys: list[str]) -> None:
        if not rows:
            return
        frame = pd.DataFrame({
            "key": [r.key for r, _ in rows],
            "seed": [r.seed for r, _ in rows],
            "version": version,
            "config": [json.dumps({**dict(zip(keys, map(repr, r.values))),
                                   "config": r.scenario.config.to_dict(), "until": r.until,
                                   "fetch_latency": r.fetch_latency}, sort_keys=True) for r, _ in rows],
            **{c: [res[c] for _, res in rows] for c in RESULT_COLUMNS},
        })
        con = self._connect()
        try:
            con.register("finished", frame)
            con.execute(f"INSERT OR IGNORE INTO {_TABLE} SELECT * FROM finished")
        finally:
            con.close()


def _sql_type(col: str) -> str:
    if col in _INT_RESULTS:
        return "BIGINT"
    if col == "valid":
        return "BOOLEAN"
    return "DOUBLE"


# -- the sweep -----------------------------------------------------------------------
def _pool(workers: int) -> ProcessPoolExecutor:
    methods = multiprocessing.get_all_start_methods()
    # not fork: a notebook kernel has threads, and forking them warns (and can deadlock)
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def sweep(scenario, grid: Mapping[str, Any] | None = None, seeds: Iterable[int] = range(1), workers: int = 1,
          until: float | None = None, cache: str | os.PathLike | None = "out/sweeps.duckdb",
          progress: bool = True) -> pd.DataFrame:
    """Run ``scenario`` over the cartesian product of ``grid`` and ``seeds``;
    one row per run (see the module documentation for the columns)."""
    from fanoutsim import __version__

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    keys, runs = grid_runs(scenario, grid, seeds, until)
    store = _Cache(cache) if cache is not None else None
    results: dict[int, dict] = store.lookup(runs, __version__) if store is not None else {}
    from_cache = len(results)
    todo = [r for r in runs if r.index not in results]

    from tqdm.auto import tqdm

    bar = tqdm(total=len(todo), desc="sweep", unit="run", disable=not progress or not todo)
    pending: list[tuple[_Run, dict]] = []

    def finished(run: _Run, row: dict) -> None:
        results[run.index] = row
        bar.update(1)
        if store is not None:
            pending.append((run, row))
            if len(pending) >= _FLUSH_EVERY:
                store.store(pending, __version__, keys)
                pending.clear()

    try:
        if workers == 1 or len(todo) <= 1:
            for run in todo:
                finished(run, _run_one(run))
        else:
            pool = _pool(min(workers, len(todo)))
            try:
                futures = {pool.submit(_run_one, run): run for run in todo}
                not_done = set(futures)
                while not_done:
                    done, not_done = wait(not_done, return_when=FIRST_COMPLETED)
                    for fut in sorted(done, key=lambda f: futures[f].index):
                        finished(futures[fut], fut.result())
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    finally:
        bar.close()
        if store is not None:  # what finished is kept, also when interrupted
            store.store(pending, __version__, keys)

    rows = []
    for run in runs:
        row = {**dict(zip(keys, run.values)), "seed": run.seed}
        row.update(results[run.index])
        rows.append(row)
    df = pd.DataFrame(rows, columns=[*keys, "seed", *RESULT_COLUMNS])
    for col in _INT_RESULTS:
        df[col] = df[col].astype("int64")
    df["valid"] = df["valid"].astype(bool)
    df["seed"] = df["seed"].astype("int64")
    df.attrs["ran"] = len(todo)
    df.attrs["from_cache"] = from_cache
    return df
