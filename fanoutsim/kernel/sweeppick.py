"""What every design's sweep recommendation does the same way, written once.

A sweep's table (:func:`fanoutsim.sweep`) has one row per run: the grid keys,
``seed``, then the results. A design recommends a value of some of the grid
keys, its *settings* (the reactor's poll interval and batch limit, the
outbox's safety poll, a lease length); every other grid key is a *condition*
the setting must meet the bar under (a rate, a share of lost hints, a
handler's mean run time). So a setting is judged by its worst result over the
conditions, each result first reduced over the seeds: a poll interval that
keeps the p99 within budget at 2 firings/s but not at 20 is not recommended
for a sweep that went to 20.

Which keys are settings, which results count and which way is worse is each
design's (``designs/<d>/sweep.py``); the grouping and the reductions are here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["grid_keys", "worst_by_setting", "swept", "none_line"]


def grid_keys(df: Any) -> list[str]:
    """The grid keys of a sweep's table (:func:`fanoutsim.sweep`): its columns
    before ``seed`` (also of the table read back from its Parquet or CSV file);
    none when it has no ``seed``."""
    columns = list(df.columns)
    return columns[: columns.index("seed")] if "seed" in columns else []


def swept(df: Any, candidates: Sequence[str]) -> list[str]:
    """Those of ``candidates`` that are columns of ``df`` (grid keys or not: a
    hand-made table may lack ``seed``), in the order given."""
    return [k for k in candidates if k in df.columns]


def worst_by_setting(df: Any, settings: Sequence[str], results: Mapping[str, tuple[str, str]]) -> tuple[Any, list[str]]:
    """One row per value of ``settings``: for each of ``results`` (column ->
    ``(over seeds, over conditions)``, each ``"mean"``, ``"max"`` or
    ``"min"``), the column reduced over the seeds of each grid point, then
    over the conditions — every grid key that is not a setting — by the
    second, which is the worse end (``"max"`` for a latency, ``"min"`` for a
    validity flag). Returns the table (the settings, then the results, and
    ``conditions``: how many grid points each setting was judged at) and the
    condition keys."""
    settings = list(settings)
    conditions = [k for k in grid_keys(df) if k not in settings]
    missing = [c for c in [*settings, *results] if c not in df.columns]
    if missing:
        raise KeyError(f"no column(s) {', '.join(map(repr, missing))} in the sweep; columns: {', '.join(df.columns)}")
    frame = df[[*settings, *conditions, *results]].copy()
    for column in results:
        if frame[column].dtype == bool:
            frame[column] = frame[column].astype(float)  # min of a mean over seeds is 1.0 iff every run was True
    points = frame.groupby(settings + conditions, sort=True, dropna=False).agg(
        **{c: (c, how[0]) for c, how in results.items()}
    )
    if not conditions:
        table = points.reset_index()
        table["conditions"] = 1
        return table, conditions
    grouped = points.reset_index().groupby(settings, sort=True, dropna=False)
    table = grouped.agg(**{c: (c, how[1]) for c, how in results.items()}, conditions=(settings[0], "size"))
    return table.reset_index(), conditions


def none_line(why: str) -> str:
    """The line a recommendation prints when it has none, and why."""
    return f"recommendation: none: {why}"
