"""Parameter sweeps: one scenario, a grid of settings, many seeds, one tidy table.

>>> import fanoutsim as fs
>>> df = fs.sweep("fanoutsim/examples/sweep.toml",                      # doctest: +SKIP
...               grid={"reactor_poll_interval": [0.5, 1.0, 2.0],
...                     "reactor_poll_batch_limit": [10, 100]},
...               seeds=range(5), workers=2, until=600)
>>> df = fs.sweep("fanoutsim/examples/leases.toml",                     # doctest: +SKIP
...               grid={"consumers.enricher.lease_seconds": [5.0, 30.0], "rate": [1.0, 4.0]})

Any design's scenario sweeps (the design comes from the file's ``design``
key, through :mod:`fanoutsim.designs`). Grid keys are

* any field of the design's config (:class:`~fanoutsim.SchedulerConfig` for the
  reactor, ``OutboxConfig``, ``LeaseConfig``), set in the scenario's config
  table (``[config]``, ``[outbox]``, ``[leases]``);
* a dotted path into the scenario file for anything else: tables by key,
  arrays by index or, for arrays of tables with a ``name``, by name —
  ``consumers.enricher.lease_seconds``, ``faults.0.drop``,
  ``consumers.enricher.duration.mean``, ``run.start``; every part but the
  last must exist;
* the design's own keys (``Design.sweep_keys``): ``rate`` for every built-in
  design — every ``[[workload]]`` scaled by one factor so that their rates
  sum to it (the split is kept; a reactor scenario that replays a recording
  cannot be scaled) — and, for the reactor, ``fetch_latency``: the
  Simulation's store round trip between a poll's fetch and its drain,
  seconds (see :class:`fanoutsim.Simulation`).

Config fields and dotted paths are written into the scenario's TOML document,
which the design then parses again, so a value is checked exactly as in a
file. Config fields need the scenario as a file (or a TOML dict) or a
scenario object; dotted paths need the file or dict.

Values are lists. The sweep runs the cartesian product of the grid times the
seeds, one run per row of the result, in grid order (the first key varies
slowest) and then seed order. Columns: the grid keys, ``seed``, the design's
result columns (``Design.sweep_columns``), then ``wall_s``, the wall seconds
the run took (build, run and analysis), when it was run. Every design has
``lost`` and ``valid`` (from its checker); besides,

reactor  ``fire_to_dispatch_{p50,p95,p99,mean}_s``, ``fire_to_claim_{...}_s``
         (latency of the subscription-dispatched executions), ``executions``,
         ``firings``, ``polls_per_s`` (poll queries per virtual second),
         ``backlog`` (retained firings past the watermarks at the end),
         ``extra_deliveries``;
outbox   ``commit_to_handled_{p50,p99,mean,max}_s`` (commit -> first handled,
         over every consumer), ``hinted_share`` (the share of those handled
         rows whose own hint reached the listener), ``committed``,
         ``delivered``, ``extra_deliveries``, ``parked``, ``pending``;
leases   ``publish_to_ack_{p50,p99,mean}_s`` (over every acked event and
         consumer), ``published``, ``delivered``, ``duplicates``,
         ``dead_lettered``, ``pending``.

Latencies are seconds, NaN when there are none.

Finished runs are kept in the DuckDB file ``cache`` (only the calling process
opens it, and writes finished rows in batches), keyed by a hash of the design
and the effective scenario (the file's content after the grid's overrides,
its name, seed and store aside), the settings applied to the simulation, the
seed and ``fanoutsim.__version__``: an interrupted sweep resumes where it
stopped, and a repeated one runs nothing. ``df.attrs["ran"]`` and
``df.attrs["from_cache"]`` count the rows of each kind.

:func:`recommend` reads a setting off the table, as ``fanoutsim sweep``
prints it: the reactor's poll interval and batch limit, the outbox's safety
poll, the leases' lease length — whichever of its settings the grid varied
(one or several), judged at their worst over the other grid keys, against a
``budget`` each design states (``Design.sweep_budget``).

The whole grid is checked before any run starts: an unknown key or dotted
path, or a value the design would refuse, raises :class:`ValueError` naming
the key, the value and what is allowed (or what exists). So does a config
field that cannot change any run: one the design's parser only copies into
the items of an array of tables that leave that key out, when every item
sets its own (``lease_seconds`` of a leases scenario whose every consumer
sets one); the error names the item keys to sweep instead.

Where the runs go: ``workers=1`` runs them here, one after the other;
``workers=N`` on a pool of N local processes; ``client=`` (a
``dask.distributed.Client``, the ``.[dask]`` extra) as one Dask task each on
whatever cluster the client is connected to — a ``LocalCluster`` or a
scheduler on other machines. All three are one path over a
``concurrent.futures`` executor (one that runs each call here, a
``ProcessPoolExecutor``, ``client.get_executor()``). The table is the same,
row for row, wherever the runs went. With a client the cache still lives in
the calling process (the workers only run and return rows), and before any
task is sent every worker is asked for its ``fanoutsim.__version__``: a
worker without fanoutsim, or with
another version (the cache key includes the version, so its rows would be
filed under the wrong one), is refused with :class:`ClusterMismatch` naming
the versions. The cluster's workers must also be able to import the design's
module (the built-in ones come with fanoutsim).

A run that raises stops the sweep with :class:`RunFailed`, naming the run's
grid values and seed (its cause chained); the runs that finished before are
kept in the cache, so the same call after a fix runs only what is missing.
Ctrl-C (``KeyboardInterrupt``) cancels the runs not yet finished — the pool's
queued ones, its running ones ended (not waited for: their rows would not be
kept), or the cluster's outstanding tasks — and keeps the finished ones.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim import designs
from fanoutsim.kernel.design import Design
from fanoutsim.kernel.gcpause import gc_paused
from fanoutsim.kernel.validate import is_real, is_whole

__all__ = [
    "sweep",
    "recommend",
    "scale_rate",
    "grid_runs",
    "result_columns",
    "check_cluster",
    "RunFailed",
    "ClusterMismatch",
]

_TABLE = "fanoutsim_sweep_runs_v2"  # a new cache layout gets a new table
_FLUSH_EVERY = 8  # finished rows per cache write


def __getattr__(name: str):
    if name == "RESULT_COLUMNS":  # the reactor's, as before sweeps took every design
        return result_columns(designs.get("reactor"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def result_columns(design: Design | str) -> tuple[str, ...]:
    """The result columns of a sweep of ``design``: its own, then ``wall_s``."""
    design = designs.get(design) if isinstance(design, str) else design
    return (*design.sweep_columns, "wall_s")


def scale_rate(scenario, rate: float):
    """The scenario with every workload scaled so that their rates sum to
    ``rate`` (its design's ``rate`` sweep key)."""
    design = designs.design_of(scenario)
    key = design.sweep_keys.get("rate")
    if key is None or key.scenario is None:
        raise ValueError(f"the {design.name} design has no sweep key 'rate'")
    return key.scenario(scenario, rate)


# -- the scenario --------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """numpy scalars as Python ones (configs want a real int)."""
    return value.item() if isinstance(value, np.generic) else value


@dataclasses.dataclass(frozen=True)
class _Base:
    design: Design
    scenario: Any  # the scenario as given (parsed)
    data: dict | None  # its TOML document, when it came from a file or a dict
    source: str
    default_name: str


def _load(scenario) -> _Base:
    from fanoutsim.scenario import load_scenario, parse_scenario

    if isinstance(scenario, (str, os.PathLike)):
        sc = load_scenario(scenario)  # every problem of the file, as `fanoutsim run` reports it
        source = os.fspath(scenario)
        with open(source, "rb") as fh:
            data = tomllib.load(fh)
        return _Base(designs.design_of(sc), sc, data, source, Path(source).stem)
    if isinstance(scenario, Mapping):
        data = copy.deepcopy(dict(scenario))
        sc = parse_scenario(data)
        return _Base(designs.design_of(sc), sc, data, "<scenario>", "scenario")
    if isinstance(getattr(scenario, "design", None), str) and hasattr(scenario, "build"):
        return _Base(
            designs.design_of(scenario),
            scenario,
            None,
            getattr(scenario, "source", ""),
            getattr(scenario, "name", "scenario"),
        )
    raise TypeError(
        f"scenario must be a Scenario or the path of a TOML scenario (or its TOML as a dict), "
        f"got {type(scenario).__name__}"
    )


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _walk(data: dict, key: str) -> tuple[list, str]:
    """The parts of a dotted path as keys and indexes into ``data``, and its
    TOML path (``consumers[1].lease_seconds``). Every part but the last must exist."""
    parts = key.split(".")
    if any(not p for p in parts):
        raise ValueError(f"grid: {key!r} is not a dotted path (an empty part)")
    node: Any = data
    out: list = []
    where = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        here = where or "the scenario"
        if isinstance(node, dict):
            if part not in node and not last:
                raise ValueError(
                    f"grid: unknown key {key!r}: {here} has no {part!r}; "
                    f"it has: {', '.join(map(repr, node)) or 'nothing'}"
                )
            out.append(part)
            where = f"{where}.{part}" if where else part
            if not last:
                node = node[part]
        elif isinstance(node, list):
            names = [item.get("name") if isinstance(item, dict) else None for item in node]
            idx = None
            if part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
                idx = int(part) % len(node)
            elif part in names:
                idx = names.index(part)
            if idx is None:
                named = [n for n in names if isinstance(n, str)]
                has = f"indexes 0..{len(node) - 1}" if node else "no items"
                if named:
                    has += f", or by name: {', '.join(map(repr, named))}"
                raise ValueError(f"grid: unknown key {key!r}: {here} has no item {part!r}; it has {has}")
            out.append(idx)
            where = f"{where}[{idx}]"
            if not last:
                node = node[idx]
        else:
            raise ValueError(
                f"grid: unknown key {key!r}: {here} is a {_kind(node)}, not a table or an array, so it has no {part!r}"
            )
    return out, where


def _set(data: dict, parts: list, value: Any) -> None:
    node = data
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


@dataclasses.dataclass(frozen=True)
class _Key:
    """One grid key: what it sets and where."""

    name: str
    kind: str  # "sweep" (a design's SweepKey), "config" or "path"
    parts: tuple = ()  # where in the TOML document ("config" and "path")
    where: str = ""  # its TOML path, as the design's parser names it


# [run] keys a sweep sets itself: a grid over them would be ignored (or break the runs)
_RUN_KEYS = {
    "run.seed": "give the seeds with seeds= (fanoutsim sweep --seeds 0-9)",
    "run.until": "give the run length with until= (fanoutsim sweep --until SECONDS), the same for every run",
    "run.store": "a sweep's runs are in memory, so the store is not sweepable",
}


def _resolve(key: Any, base: _Base) -> _Key:
    design = base.design
    if not isinstance(key, str):
        raise ValueError(f"grid: keys are names, got {key!r}")
    fields = tuple(f.name for f in dataclasses.fields(design.config_type))
    if key in design.sweep_keys:
        return _Key(key, "sweep")
    if key in fields:
        return _Key(key, "config", (design.config_table, key), f"{design.config_table}.{key}")
    if key in _RUN_KEYS:
        raise ValueError(f"grid: {key!r} cannot be swept; {_RUN_KEYS[key]}")
    if "." in key:
        if base.data is None:
            raise ValueError(
                f"grid: the dotted path {key!r} needs the scenario's TOML: pass the scenario "
                f"file's path (a scenario object has no file to change)"
            )
        parts, where = _walk(base.data, key)
        return _Key(key, "path", tuple(parts), where)
    has = f"; this one has: {', '.join(map(repr, base.data))}" if base.data else ""
    raise ValueError(
        f"grid: unknown key {key!r}; allowed: {', '.join([*design.sweep_keys, *fields])}, "
        f"or a dotted path into the scenario file (table.key, array.<index or name>.key{has})"
    )


def _problems(exc: Exception, wheres: Mapping[str, str]) -> str:
    """A ScenarioError's problems, each without the path when it is the grid key's own."""
    problems = getattr(exc, "problems", None)
    if not problems:
        return str(exc)
    own = set(wheres.values())
    return "; ".join(msg if path in own else (f"{path}: {msg}" if path else msg) for path, msg in problems)


def _apply(base: _Base, keys: list[_Key], values: tuple) -> Any:
    """The scenario with the grid's values for ``keys`` applied (sim-level keys aside)."""
    design = base.design
    data_keys = [(k, v) for k, v in zip(keys, values) if k.kind in ("config", "path")]
    sc = base.scenario
    if data_keys and base.data is not None:
        data = copy.deepcopy(base.data)
        for k, v in data_keys:
            if k.kind == "config" and not isinstance(data.get(k.parts[0]), dict):
                data[k.parts[0]] = {}
            _set(data, list(k.parts), v)
        try:
            sc = design.parse_scenario(data, source=base.source, default_name=base.default_name)
        except ValueError as exc:
            raise _Refused(_problems(exc, {k.name: k.where for k, _ in data_keys})) from None
    elif data_keys:  # a scenario object: its config, replaced
        try:
            sc = dataclasses.replace(sc, config=dataclasses.replace(sc.config, **{k.name: v for k, v in data_keys}))
        except (ValueError, TypeError) as exc:
            raise _Refused(str(exc)) from None
    for k, v in zip(keys, values):
        if k.kind == "sweep":
            sk = design.sweep_keys[k.name]
            try:
                if sk.check is not None:
                    sk.check(v)
                if sk.scenario is not None:
                    sc = sk.scenario(sc, v)
            except (ValueError, TypeError) as exc:
                raise _Refused(str(exc)) from None
    return sc


class _Refused(ValueError):
    pass


class RunFailed(RuntimeError):
    """One run of a sweep raised: ``.setting`` (grid key -> value), ``.seed``;
    the run's own exception is the ``__cause__``."""

    def __init__(self, message: str, setting: dict, seed: int) -> None:
        super().__init__(message)
        self.setting = setting
        self.seed = seed


class ClusterMismatch(RuntimeError):
    """A Dask cluster whose workers cannot run this sweep (no fanoutsim, another
    version of it, or no workers at all); ``.versions``: worker -> what it reported."""

    def __init__(self, message: str, versions: dict) -> None:
        super().__init__(message)
        self.versions = versions


def _check_grid(grid: Mapping[str, Any] | None, base: _Base) -> tuple[list[_Key], list[list]]:
    if grid is None:
        return [], []
    if not isinstance(grid, Mapping):
        raise ValueError(f"grid must be a mapping of setting -> list of values, got {type(grid).__name__}")
    keys, values = [], []
    for name, vals in grid.items():
        key = _resolve(name, base)
        if isinstance(vals, (str, bytes, Mapping)) or not isinstance(vals, Iterable):
            raise ValueError(f"grid[{name!r}] must be a list of values, got {vals!r}")
        vals = [_plain(v) for v in vals]
        if not vals:
            raise ValueError(f"grid[{name!r}] is empty; give at least one value")
        for v in vals:  # each value alone, so the error names it
            try:
                _apply(base, [key], (v,))
            except _Refused as exc:
                raise ValueError(f"grid[{name!r}] value {v!r} is not allowed: {exc}") from None
        keys.append(key)
        values.append(vals)
    shared = _as_every_run_sets(base, keys, values)
    for key, vals in zip(keys, values):
        why = _unused_default(key, vals, base, shared)
        if why is not None:
            raise ValueError(why)
    return keys, values


# -- a config field no run reads ------------------------------------------------------
def _as_every_run_sets(base: _Base, keys: list[_Key], values: list[list[Any]]) -> dict[str, Any] | None:
    """The scenario's TOML with every dotted-path grid key set (to its first
    value): each run sets that key, whatever its value, so an item key the grid
    sets overrides a config default in every run as one the file sets does."""
    if base.data is None:
        return None
    data = copy.deepcopy(base.data)
    for key, vals in zip(keys, values):
        if key.kind == "path" and _config_field(key, base) is None:
            _set(data, list(key.parts), vals[0])
    return data


def _config_field(key: _Key, base: _Base) -> str | None:
    """The config field ``key`` sets, by name or by its dotted path (``table.field``)."""
    if key.kind == "config":
        return key.name
    fields = {f.name for f in dataclasses.fields(base.design.config_type)}
    if key.kind == "path" and len(key.parts) == 2 and key.parts[0] == base.design.config_table:
        return key.parts[1] if key.parts[1] in fields else None
    return None


def _beside_config(base: _Base, data: dict[str, Any], field: str, value: Any) -> str | None:
    """The scenario parsed with the config's ``field`` at ``value``, all but its
    config (what the field reached elsewhere), as text; None if it does not parse."""
    data = copy.deepcopy(data)
    table = base.design.config_table
    if not isinstance(data.get(table), dict):
        data[table] = {}
    data[table][field] = value
    try:
        sc = base.design.parse_scenario(data, source=base.source, default_name=base.default_name)
    except ValueError:
        return None
    if not dataclasses.is_dataclass(sc):
        return None
    return repr([getattr(sc, f.name) for f in dataclasses.fields(sc) if f.name != "config"])


def _distinct(values: list[Any]) -> list[Any]:
    """``values`` without None and repeats, in order (by ==: a value may be a table)."""
    out: list[Any] = []
    for v in map(_plain, values):
        if v is not None and v not in out:
            out.append(v)
    return out


def _item_ref(items: list[dict[str, Any]], i: int) -> str:
    """How a dotted path names ``items[i]``: its name when that is unique and not a number, else its index."""
    name = items[i].get("name")
    if isinstance(name, str) and name and not name.lstrip("-").isdigit():
        if [item.get("name") for item in items].count(name) == 1:  # a path finds the first of a name
            return name
    return str(i)


def _unused_default(key: _Key, vals: list[Any], base: _Base, data: dict[str, Any] | None) -> str | None:
    """Why the grid ``key`` cannot change any run, or None. The rule, read off the
    design's own parser rather than any design's names: a config field that the
    parser copies into each item of an array of tables that leaves the item key
    of that name out is the items' default; when every item sets its own (in the
    file or by the grid), no value of the field reaches the scenario beyond the
    config, so sweeping it would run one setting many times and read it as many."""
    field = _config_field(key, base)
    if field is None or data is None:
        return None
    table = base.design.config_table
    for name, items in data.items():
        if not (isinstance(items, list) and items and all(isinstance(i, dict) and field in i for i in items)):
            continue
        own = getattr(getattr(base.scenario, "config", None), field, None)
        probes = _distinct([*vals, own, *(i[field] for i in items)])
        if len(probes) < 2:
            continue
        seen = {_beside_config(base, data, field, v) for v in _distinct([*vals, *probes[:2]])}
        bare = copy.deepcopy(data)
        for item in bare[name]:
            del item[field]
        filled = [_beside_config(base, bare, field, v) for v in probes[:2]]
        if None in seen or len(seen) != 1 or None in filled or filled[0] == filled[1]:
            continue  # the field reaches the scenario, or the parser cannot tell us
        where = "the scenario" if base.source in ("", "<scenario>") else Path(base.source).name
        by_grid = " (some by this grid)" if base.data is not None and base.data.get(name) != items else ""
        instead = ", ".join(f"{name}.{_item_ref(items, i)}.{field}" for i in range(len(items)))
        each = " (one key per table)" if len(items) > 1 else ""
        return (
            f"grid: {key.name!r} cannot change any run: every [[{name}]] table in {where} sets its own "
            f"{field}{by_grid}, and [{table}].{field} only fills in one that leaves it out; "
            f"sweep {instead}{each} instead"
        )
    return None


def _recordings(sc) -> list[str]:
    """A hash of each recorded input's bytes (a scenario's ``replays``, each with
    a ``path``): a changed recording is new content."""
    out = []
    for rp in getattr(sc, "replays", ()):
        path = Path(getattr(rp, "path", ""))
        out.append(hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "")
    return out


def _design_module(design: Design) -> str:
    """The module whose ``DESIGN`` is ``design``, so a worker process can load a
    design registered in this one (a Design need not pickle)."""
    import sys

    path = designs.BUILTIN.get(design.name)
    if path:
        return path
    for name, module in list(sys.modules.items()):
        if getattr(module, "DESIGN", None) is design:
            return name
    raise ValueError(
        f"the {design.name} design is no module's DESIGN, so worker processes cannot load it; sweep it with workers=1"
    )


def _design(run: _Run) -> Design:
    """The run's design, registered here from its module if this process has not yet."""
    if run.design in designs.names():
        return designs.get(run.design)
    from importlib import import_module

    design = import_module(run.module).DESIGN
    designs.register(design)
    return design


@dataclasses.dataclass(frozen=True)
class _Run:
    """One run: everything a worker process needs, picklable."""

    index: int
    values: tuple  # the grid values, in grid key order
    seed: int
    design: str  # its name
    module: str  # the module whose DESIGN it is (for a worker process)
    scenario: Any  # the effective scenario (overrides applied)
    until: float
    sim: tuple  # ((sweep key, value), ...) set on the built simulation
    store: str
    key: str  # hash of the design, content and settings (not the seed)


def grid_runs(
    scenario, grid: Mapping[str, Any] | None = None, seeds: Iterable[int] = range(1), until: float | None = None
) -> tuple[list[str], list[_Run]]:
    """Check the grid and list the runs of a sweep: ``(grid keys, runs)``.
    Raises ValueError before anything runs."""
    base = _load(scenario)
    keys, values = _check_grid(grid, base)
    if isinstance(seeds, (int, str, bytes)) or not isinstance(seeds, Iterable):
        raise ValueError(f"seeds must be an iterable of integer seeds, e.g. range(3) or [0, 7]; got {seeds!r}")
    seeds = [_plain(s) for s in seeds]
    for s in seeds:
        if not is_whole(s):
            raise ValueError(f"seeds: {s!r} is not an integer seed")
    if not seeds:
        raise ValueError("seeds is empty; give at least one seed, e.g. range(3)")
    if until is None:
        until = base.scenario.until
    elif not is_real(until) or not 0 < until < math.inf:
        raise ValueError(f"until must be a finite number of virtual seconds > 0, got {until!r}")
    design = base.design
    if design.sweep_row is None:
        raise ValueError(f"the {design.name} design does not sweep (its Design has no sweep_row)")
    module = _design_module(design)
    runs: list[_Run] = []
    for combo in itertools.product(*values):
        try:
            sc = _apply(base, keys, combo)
        except _Refused as exc:
            setting = ", ".join(f"{k.name}={v!r}" for k, v in zip(keys, combo))
            raise ValueError(f"grid setting {setting} is not allowed: {exc}") from None
        # a file store cannot be shared by many runs: those run in memory
        store = sc.store if sc.store in ("memory", "duckdb") else "memory"
        eff = dataclasses.replace(sc, name="", source="", description="", seed=0, store=store)
        sim = tuple(
            (k.name, v) for k, v in zip(keys, combo) if k.kind == "sweep" and design.sweep_keys[k.name].sim is not None
        )
        # the effective scenario holds every override: a setting named by the grid or by
        # the scenario's own file is the same run
        content = json.dumps(
            {
                "design": design.name,
                "scenario": repr(eff),
                "until": float(until),
                "sim": [[k, repr(v)] for k, v in sim],
                "recordings": _recordings(sc),
            },
            sort_keys=True,
        )
        key = hashlib.sha256(content.encode()).hexdigest()
        for seed in seeds:
            runs.append(_Run(len(runs), tuple(combo), seed, design.name, module, eff, float(until), sim, store, key))
    return [k.name for k in keys], runs


# -- one run -------------------------------------------------------------------------
def _run_one(run: _Run) -> dict[str, Any]:
    """Build, run and measure one simulation (in a worker process or here)."""
    t0 = time.perf_counter()
    design = _design(run)
    with run.scenario.build(seed=run.seed, store=run.store) as sim:  # closed: a throwaway server stops
        for name, value in run.sim:
            design.sweep_keys[name].sim(sim, value)
        sim.run(run.until)
        with gc_paused():  # reading the finished run: see fanoutsim.kernel.gcpause
            checked = design.check(sim)
            row = {k: _plain(v) for k, v in design.sweep_row(sim, checked).items()}
    if not row_fits(design, tuple(row)):
        raise RuntimeError(
            f"the {design.name} design's sweep_row gave the columns {tuple(row)}; "
            f"its sweep_columns are {tuple(design.sweep_columns)}, then per reader "
            f"{', '.join(f'{c}[NAME]' for c in design.sweep_unit_columns) or 'none'}"
        )
    row["wall_s"] = time.perf_counter() - t0
    return row


def row_fits(design: Design, columns: tuple[str, ...]) -> bool:
    """``columns`` are a sweep row of ``design``: its ``sweep_columns``, then
    only per-reader columns ``<stat>[<reader>]`` of its ``sweep_unit_columns``."""
    fixed = tuple(design.sweep_columns)
    if columns[: len(fixed)] != fixed:
        return False
    return all(c.endswith("]") and c.partition("[")[0] in design.sweep_unit_columns for c in columns[len(fixed) :])


# -- the cache -----------------------------------------------------------------------
class Cache:
    """Finished runs in a DuckDB file; opened briefly for each read or write."""

    def __init__(self, path) -> None:
        self.path = Path(path)

    def check(self) -> None:
        """Raise ValueError naming the file when it exists and is not a DuckDB file
        (a directory, another kind of file, a damaged one); touches nothing."""
        import duckdb

        from fanoutsim.kernel.store.duckdb import has_duckdb_header

        path = self.path
        if not os.path.lexists(path):
            return
        if path.is_dir():
            raise ValueError(f"cache {path}: is a directory; the cache is a DuckDB file (e.g. {path}/cache.duckdb)")
        if not path.is_file():
            raise ValueError(f"cache {path}: is not a regular file; the cache is a DuckDB file")
        if path.stat().st_size == 0:
            return
        if not has_duckdb_header(path):
            raise ValueError(f"cache {path}: is not a DuckDB database file; give a .duckdb file or a new path")
        try:
            con = duckdb.connect(str(path), read_only=True)
            try:
                con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()
            finally:
                con.close()
        except duckdb.IOException:
            return  # held by another process: writing to it says so
        except duckdb.Error as exc:
            lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
            raise ValueError(f"cache {path}: cannot be read ({lines[0] if lines else type(exc).__name__})") from None

    def _connect(self):
        import duckdb

        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(self.path))
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (key VARCHAR, seed BIGINT, version VARCHAR, "
            f"design VARCHAR, config VARCHAR, result VARCHAR, PRIMARY KEY (key, seed, version))"
        )
        return con

    def lookup(self, runs: list[_Run], version: str) -> dict[int, dict]:
        if not runs or not self.path.exists():
            return {}
        wanted = pd.DataFrame(
            {"key": [r.key for r in runs], "seed": [r.seed for r in runs], "idx": [r.index for r in runs]}
        )
        con = self._connect()
        try:
            con.register("wanted", wanted)
            found = con.execute(
                f"SELECT w.idx, c.result FROM wanted w "
                f"JOIN {_TABLE} c ON c.key = w.key AND c.seed = w.seed AND c.version = ?",
                [version],
            ).fetchall()
        finally:
            con.close()
        design = _design(runs[0])
        out = {}
        for idx, result in found:
            row = json.loads(result)
            names = tuple(row)
            if names[-1:] == ("wall_s",) and row_fits(design, names[:-1]):  # changed columns: it runs again
                out[int(idx)] = row
        return out

    def store(self, rows: list[tuple[_Run, dict]], version: str, keys: list[str]) -> None:
        if not rows:
            return
        frame = pd.DataFrame(
            {
                "key": [r.key for r, _ in rows],
                "seed": [r.seed for r, _ in rows],
                "version": version,
                "design": [r.design for r, _ in rows],
                "config": [
                    json.dumps(
                        {
                            **dict(zip(keys, map(repr, r.values))),
                            "config": repr(getattr(r.scenario, "config", None)),
                            "until": r.until,
                            **{k: repr(v) for k, v in r.sim},
                        },
                        sort_keys=True,
                    )
                    for r, _ in rows
                ],
                "result": [json.dumps(res) for _, res in rows],
            }
        )
        con = self._connect()
        try:
            con.register("finished", frame)
            con.execute(f"INSERT OR IGNORE INTO {_TABLE} SELECT * FROM finished")
        finally:
            con.close()


# -- where the runs go: one path over a concurrent.futures executor ---------------------
class _InCaller(Executor):
    """An executor that runs each call here, in the caller, as it is
    submitted (``workers=1``, or a single run): nothing is pickled and
    nothing leaves the process. A call's exception is its future's; Ctrl-C
    (any BaseException) interrupts the caller, as a plain loop would."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future


def _pool(workers: int) -> ProcessPoolExecutor:
    """A pool of local worker processes, forked from a fork server that has
    imported fanoutsim (see :mod:`fanoutsim.sweep_worker`)."""
    methods = multiprocessing.get_all_start_methods()
    # not fork: a notebook kernel has threads, and forking them warns (and can deadlock)
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        # workers fork from a server that has imported fanoutsim (see fanoutsim.sweep_worker);
        # a server already running (an earlier sweep) keeps the preload it started with
        ctx.set_forkserver_preload(["fanoutsim.sweep_worker"])
    else:
        ctx = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where a sweep's runs go: the executor, how many runs may be out at
    once, and whether closing waits for the running ones (local processes
    are ours to wait for; a cluster's tasks are cancelled)."""

    executor: Executor
    window: int
    wait: bool


def _where(workers: int, client, todo: list[_Run]) -> _Where:
    """The executor for ``todo``: here for one worker or one run, a local
    pool of ``workers`` processes, or the Dask ``client``'s cluster (its
    workers checked first). What leaves the process is checked once to pickle."""
    if client is None and (workers == 1 or len(todo) <= 1):
        return _Where(_InCaller(), 1, True)
    if client is not None:
        check_cluster(client)  # before any task is sent
        _check_pickles(todo[0], "a Dask cluster", "sweep without a client")
        return _Where(client.get_executor(pure=False), len(todo), False)
    _check_pickles(todo[0], "worker processes", "use workers=1")
    return _Where(_pool(min(workers, len(todo))), len(todo), True)


def _check_pickles(run: _Run, where: str, instead: str) -> None:
    """Refuse a run that cannot be pickled here, by name, rather than in a
    pool's feeder thread or a cluster's serializer."""
    import pickle

    try:
        pickle.dumps(run)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ValueError(f"this sweep's runs cannot be sent to {where} ({exc}); {instead}") from None


def _failed(run: _Run, keys: list[str], exc: BaseException) -> RunFailed:
    setting = dict(zip(keys, run.values))
    where = ", ".join([*(f"{k}={v!r}" for k, v in setting.items()), f"seed={run.seed}"])
    return RunFailed(
        f"sweep run {run.index + 1} ({where}) failed: {type(exc).__name__}: {exc}; the runs "
        f"finished before it are kept in the cache, so the same sweep again runs only the rest",
        setting,
        run.seed,
    )


def _is_client(client) -> bool:
    return all(hasattr(client, a) for a in ("map", "run", "cancel", "scheduler_info", "get_executor"))


def check_cluster(client) -> dict[str, str]:
    """Ask every worker of the Dask ``client``'s cluster for its
    ``fanoutsim.__version__`` (no task is run); raise :class:`ClusterMismatch`
    naming the versions when one has no fanoutsim or another version, or when
    the cluster has no workers. Returns worker address -> version."""
    from pkgutil import resolve_name

    from fanoutsim import __version__

    # resolve_name is the standard library's, so a worker without fanoutsim can run it (and say so)
    found = client.run(resolve_name, "fanoutsim:__version__", on_error="return")
    address = getattr(getattr(client, "scheduler", None), "address", None) or "the client's scheduler"
    if not found:
        raise ClusterMismatch(
            f"the Dask cluster at {address} has no workers: start some (dask worker "
            f"{address}) or wait for them (client.wait_for_workers(n))",
            {},
        )
    reported = {
        w: (v if isinstance(v, str) else f"no fanoutsim ({type(v).__name__}: {v})") for w, v in sorted(found.items())
    }
    wrong = {w: v for w, v in reported.items() if v != __version__}
    if wrong:
        listed = "; ".join(f"{w}: {v if v.startswith('no fanoutsim') else 'fanoutsim ' + v}" for w, v in wrong.items())
        raise ClusterMismatch(
            f"refusing to sweep on the Dask cluster at {address}: this process runs "
            f"fanoutsim {__version__}, and {len(wrong)} of its {len(reported)} workers do "
            f"not ({listed}). Install fanoutsim {__version__} on every worker (the cache "
            f"key includes the version)",
            reported,
        )
    return reported


def _completed(out: dict[Future, _Run]) -> Iterator[Future]:
    """The futures of ``out`` (future -> run) as they complete, those done
    together in run order; the caller removes each it has read and may add
    more (a seam for the tests' interrupts too)."""
    while out:
        done, _ = wait(list(out), return_when=FIRST_COMPLETED)
        yield from sorted(done, key=lambda f: out[f].index)


def _run_all(where: _Where, todo: list[_Run], keys: list[str], finished: Callable[[_Run, dict], None]) -> None:
    """Every run of ``todo`` on ``where``'s executor, at most ``where.window``
    out at once; each row to ``finished`` as its run completes. A failed run
    stops the sweep with :class:`RunFailed`; on any way out, the runs not yet
    finished are cancelled (and a local pool's running ones waited for)."""
    left = iter(todo)
    out: dict[Future, _Run] = {}

    def submit_more() -> None:
        for run in itertools.islice(left, where.window - len(out)):
            out[where.executor.submit(_run_one, run)] = run

    try:
        submit_more()
        for future in _completed(out):
            run = out.pop(future)
            exc = future.exception()
            if exc is not None:
                if isinstance(exc, BrokenProcessPool) or not isinstance(exc, Exception):
                    raise exc  # the pool died, or an interrupt: not the run's failure
                raise _failed(run, keys, exc) from exc
            finished(run, future.result())
            submit_more()
    except KeyboardInterrupt:
        _end_running(where.executor, list(out))
        raise
    finally:  # an error, a failed run or Ctrl-C: nothing outstanding is left running
        for future in out:
            future.cancel()
        where.executor.shutdown(wait=where.wait)


def _end_running(executor: Executor, outstanding: list[Future]) -> None:
    """Interrupted: end a local pool's running runs now rather than wait for
    them, whose rows would not be kept anyway. Ctrl-C at a terminal reaches
    the workers too and ends them; SIGTERM or ``kill -INT`` reaches this
    process alone, and waiting could outlast whoever sent it (then killed,
    this process would leave its workers running)."""
    if not isinstance(executor, ProcessPoolExecutor):
        return
    # ProcessPoolExecutor has no public way to end its workers before Python 3.14
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        try:
            process.terminate()
        except (OSError, ValueError, AttributeError):  # exited already, or closed
            pass
    # the pool fails every outstanding future once it sees a worker gone; one cancelled
    # meanwhile makes its thread raise InvalidStateError (CPython 3.11), so the cancels wait for that
    wait(outstanding, timeout=30)


def _check_where(workers: int, client) -> None:
    if not is_whole(workers) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    if client is not None:
        if not _is_client(client):
            raise ValueError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
        if workers != 1:
            raise ValueError(
                f"give workers (local processes) or client (a Dask cluster), not both: "
                f"workers={workers!r} with a client"
            )


def _table(runs: list[_Run], keys: list[str], results: dict[int, dict]) -> pd.DataFrame:
    """One row per run, in grid then seed order: the grid keys, ``seed``, the
    design's columns, any per-reader columns the runs gave (``p99[enricher]``)
    and ``wall_s`` last (bools and ints kept as such)."""
    fixed = result_columns(runs[0].design)
    per_reader = list(dict.fromkeys(c for r in runs for c in results[r.index] if c not in fixed))
    columns = (*fixed[:-1], *per_reader, fixed[-1])  # wall_s stays last
    rows = []
    for run in runs:
        row = {**dict(zip(keys, run.values)), "seed": run.seed}
        row.update(results[run.index])
        rows.append(row)
    df = pd.DataFrame(rows, columns=[*keys, "seed", *columns])
    for col in columns:
        vals = [results[r.index].get(col, math.nan) for r in runs]
        if all(isinstance(v, bool) for v in vals):
            df[col] = df[col].astype(bool)
        elif all(is_whole(v) for v in vals):
            df[col] = df[col].astype("int64")
    df["seed"] = df["seed"].astype("int64")
    return df


# -- the sweep -----------------------------------------------------------------------
def sweep(
    scenario,
    grid: Mapping[str, Any] | None = None,
    seeds: Iterable[int] = range(1),
    workers: int = 1,
    until: float | None = None,
    cache: str | os.PathLike | None = "out/sweeps.duckdb",
    progress: bool = True,
    client=None,
) -> pd.DataFrame:
    """Run ``scenario`` (a file's path, a scenario object or a TOML dict, of any
    design) over the cartesian product of ``grid`` and ``seeds``; one row per
    run (see the module documentation for the keys and the columns).
    ``workers``: local processes; ``client``: a ``dask.distributed.Client``
    whose cluster runs the runs instead (give one or the other)."""
    from fanoutsim import __version__

    _check_where(workers, client)
    keys, runs = grid_runs(scenario, grid, seeds, until)
    store = Cache(cache) if cache is not None else None
    if store is not None:
        store.check()
    results: dict[int, dict] = store.lookup(runs, __version__) if store is not None else {}
    from_cache = len(results)
    todo = [r for r in runs if r.index not in results]
    where = _where(workers, client, todo) if todo else None

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
        if where is not None:
            _run_all(where, todo, keys, finished)
    finally:
        bar.close()
        if store is not None:  # what finished is kept, also when interrupted
            store.store(pending, __version__, keys)
    df = _table(runs, keys, results)
    df.attrs["ran"] = len(todo)
    df.attrs["from_cache"] = from_cache
    return df


def recommend(df: pd.DataFrame, scenario, budget: float | None = None) -> str:
    """The recommendation of ``scenario``'s design (a file's path, a scenario
    object or a TOML dict) from its sweep ``df``, as ``fanoutsim sweep``
    prints it: a setting and the rule that chose it, or ``recommendation:
    none: ...`` and why. ``budget``: the bar the setting must meet — the
    reactor's p99 fire -> dispatch and the outbox's p99 commit -> handled
    latency (seconds; defaults 1.5 and 2), the leases' duplicates per event
    delivered (default 0.01); ValueError for a design that recommends nothing
    or a budget it does not allow."""
    base = _load(scenario)
    design = base.design
    if design.sweep_recommend is None:
        raise ValueError(f"the {design.name} design recommends no setting from a sweep")
    if budget is not None and design.sweep_budget is not None:
        budget = design.sweep_budget.check(budget)
    return design.sweep_recommend(df, base.scenario, budget=budget)
