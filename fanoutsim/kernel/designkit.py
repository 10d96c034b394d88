"""What several designs' :data:`DESIGN` records do the same way, written once.

A sweep row's latency figures (the same statistics, overall and per unit) and
its checker totals; on the wall clock, the scenario's workloads at a swept
rate and the units that join later; what ``status`` prints around a
design's body, and the now it measures lags against. Each design still says
which columns, which totals and which unit: only the arithmetic and the
bookkeeping are here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np

from fanoutsim.kernel.design import scale_workload_rates


def latency_stats(values: Iterable[float], stats: Sequence[str]) -> dict[str, float]:
    """The ``stats`` (any of ``p50``, ``p99``, ``mean``, ``max``) of ``values``
    in their units, NaN values left out; NaN each when none is left."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return dict.fromkeys(stats, math.nan)
    p50, p99 = np.percentile(arr, [50, 99], method="linear")
    every = {"p50": float(p50), "p99": float(p99), "mean": float(arr.mean()), "max": float(arr.max())}
    return {s: every[s] for s in stats}


def latency_columns(
    name: str, values: Iterable[float], stats: Sequence[str], unit: str | None = None
) -> dict[str, Any]:
    """``{name}_{stat}_s`` (``...[{unit}]`` for one unit's) for each of ``stats``."""
    got = latency_stats(values, stats)
    suffix = "" if unit is None else f"[{unit}]"
    return {f"{name}_{s}_s{suffix}": got[s] for s in stats}


def unit_latency_columns(name: str, frame: Any, unit: str, stats: Sequence[str]) -> dict[str, Any]:
    """:func:`latency_columns` of ``frame["latency_s"]`` for each value of the
    column ``unit`` in sorted order, so that one unit's p99 is not drowned by
    another's."""
    row: dict[str, Any] = {}
    for value, grp in frame.groupby(unit, sort=True):
        row.update(latency_columns(name, grp["latency_s"], stats, unit=value))
    return row


def checked_columns(checked: Any, totals: Sequence[str]) -> dict[str, Any]:
    """The checker's ``totals`` (whole numbers) and whether the run was valid."""
    return {**{key: int(checked.total[key]) for key in totals}, "valid": bool(checked.valid)}


def wall_workloads(scenario: Any, rate: float | None, add_default: Callable[[float], None] | None) -> tuple[Any, ...]:
    """The scenario's workloads to run on the wall clock: as written (``rate``
    None), none (``rate`` 0), or scaled so that their rates sum to ``rate``;
    with a ``rate`` and no workload to scale, ``add_default(rate)`` adds one
    (None: the role runs no workloads)."""
    workloads = tuple(scenario.workloads)
    if rate:
        workloads = scale_workload_rates(scenario, rate).workloads if workloads else ()
        if not workloads and add_default is not None:
            add_default(rate)
    elif rate is not None:
        workloads = ()
    return workloads


class _Closing(Protocol):
    def close(self) -> None: ...


R = TypeVar("R", bound=_Closing)


def populated(rt: R, populate: Callable[[], None]) -> R:
    """``rt`` once ``populate()`` has given it the scenario's parts; closed (its
    store let go) when that is refused, so a bad scenario leaves no runtime
    holding the file."""
    try:
        populate()
    except BaseException:
        rt.close()
        raise
    return rt


# which now a status measured against, as it says so (``clock`` and ``now_is``)
WALL = "wall"
VIRTUAL = "virtual"
NOW_IS = {
    WALL: "the wall clock",
    VIRTUAL: "the end of the virtual-clock run that wrote this store (its report's end): lags are as of then",
}


@dataclass(frozen=True)
class StatusClock:
    """The now a status measures ages (lags) against, and its clock (:data:`WALL`, :data:`VIRTUAL`)."""

    now_us: int
    clock: str


def status_clock(rt: Any) -> StatusClock:
    """The now of ``rt``'s status. A store a virtual-clock run wrote last
    (``fanoutsim run --store``) records where that clock stopped: its rows are
    stamped on that clock, so its lags are read as of then, the figure of the
    run's report. A running process, or a store a wall-clock process carried
    on since (which drops that record), is read against the wall clock."""
    from fanoutsim.kernel.store.record import recorded_end

    end = None if rt.running else recorded_end(rt.store)
    return StatusClock(rt.now_us(), WALL) if end is None else StatusClock(end, VIRTUAL)


def status_record(rt: Any, body: dict[str, Any], *, clock: StatusClock | None = None) -> dict[str, Any]:
    """What ``fanoutsim status`` prints of a run, the design's ``body`` in the
    middle: the process, the file (None over PostgreSQL), the now it measured
    against (``clock``: the one the body read, else :func:`status_clock`) and
    which it is, whether it runs, and its metrics last, read at that now."""
    from fanoutsim.kernel.timeutil import from_us

    clock = status_clock(rt) if clock is None else clock
    with rt.as_of(clock.now_us) if clock.clock == VIRTUAL else nullcontext():
        metrics = rt.metrics()
    return {
        "pid": os.getpid(),
        "db": getattr(rt.store, "path", None),
        "now": from_us(clock.now_us).isoformat(),
        "clock": clock.clock,
        "now_is": NOW_IS[clock.clock],
        "running": rt.running,
        **body,
        "metrics": metrics,
    }


def check_write(req: dict[str, Any], fields: Sequence[str], noun: str) -> None:
    """Refuse a write (``noun``: what it makes, "a commit") naming a field not
    in ``fields``, the first such by name, listing those there are."""
    unknown = sorted(set(req) - set(fields))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} of {noun}; fields: {', '.join(fields)}")


def text_field(req: dict[str, Any], key: str, noun: str | None = None, default: str | None = None) -> str:
    """``req[key]``, a non-empty string: required when ``noun`` names the write
    ("a commit"), else ``default`` when left out."""
    if noun is not None:
        value = req.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{noun} needs the field {key!r}, a non-empty string; got {value!r}")
        return value
    value = req.get(key, default)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def join_each(rt: Any, units: Iterable[Any], join: Callable[[Any], None]) -> None:
    """``join(unit)`` now, or ``unit.join_at`` seconds after the start when it
    is later (each unit has ``name`` and ``join_at``)."""
    from fanoutsim.kernel.runtime.control import later

    for unit in units:
        if unit.join_at > 0:
            later(rt, unit.join_at, partial(join, unit), name=f"fanoutsim-join-{unit.name}")
        else:
            join(unit)


def merged_with_untraced(
    traces: list[Any],
    kind: str,
    key: str,
    rows: Iterable[dict[str, Any]],
    trace_row: Callable[[dict[str, Any]], dict[str, Any]],
) -> Any:
    """Every process's trace merged by time, and ``trace_row(row)`` for each of
    the table's ``rows`` whose ``key`` no trace recorded a ``kind`` row for
    (a write by a process that kept no trace)."""
    import pandas as pd

    from fanoutsim.kernel.runtime.processes import merged_trace

    merged = merged_trace(traces)
    seen = set(merged.loc[merged["kind"] == kind, key].dropna())
    untraced = [r for r in rows if r[key] not in seen]
    if not untraced:
        return merged
    return merged_trace([merged, pd.DataFrame([trace_row(r) for r in untraced])])
