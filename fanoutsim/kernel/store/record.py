"""What a store records of itself: which design's run it holds, the checker's
verdicts of a checked run, and where a virtual-clock run's clock stopped
(:data:`END_KEY`: the now ``status`` reads that run's lags against).

A DuckDB file or a PostgreSQL database holds every registered design's tables
(:mod:`fanoutsim.designs.stores`), but the run in it is one design's. The
first runtime that opens it records its design in ``fanoutsim_meta`` (key
``design``), and a runtime of another design is refused by name — so a file
made by ``fanoutsim run --store`` is not served, written or read as another
design's. A memory store keeps nothing past its process and records nothing.

A file or database written before designs were recorded records none. Its
design is then the one whose tables hold rows beyond the ones a new store
starts with (the leases design's ``history`` row): that design may open it
(and records itself), another is refused by name. One with no such rows is
still empty, and is the first opener's; one with rows of two designs is
refused, naming both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fanoutsim.kernel.store.base import Store
from fanoutsim.kernel.timeutil import from_us

DESIGN_KEY = "design"


def _rows_beyond_new(store: Store) -> list[str]:
    """The designs (parts) whose tables hold more rows than a new store's."""
    from fanoutsim.kernel.store.memory import MemoryStore

    parts = store.parts
    fresh = MemoryStore(parts)
    return [part.name for part in parts if any(store.row_count(t) > len(fresh.rows(t)) for t in part.tables)]


def claim(store: Store, design: str) -> None:
    """Record that ``store`` holds a run of ``design``, or raise StoreError
    naming the design it holds (see the module's docstring)."""
    if not store.keeps_meta:
        return
    from fanoutsim.kernel.store.duckdb import StoreError

    recorded = store.meta(DESIGN_KEY)
    if recorded is None:
        found = _rows_beyond_new(store)
        if len(found) > 1:
            raise StoreError(
                f"{store.where} records no design, and the tables of the {' and '.join(found)} "
                f"designs hold rows; refusing to open it as the {design} design"
            )
        if found and found[0] != design:
            raise StoreError(
                f"{store.where} holds a run of the {found[0]} design, not of the {design} design "
                f"(it records no design: it was written by an older fanoutsim, and its "
                f"{found[0]} tables hold rows)"
            )
        store.set_meta(DESIGN_KEY, design)
    elif recorded != design:
        raise StoreError(
            f"{store.where} holds a run of the {recorded} design, not of the {design} design "
            f"(open it with the {recorded} design, or give a new store)"
        )


def open_claimed(opener: Callable[[object], Store], spec: object, design: str | None) -> Store:
    """``opener(spec)``, claimed for ``design`` (None: not claimed); a store
    opened here and refused is closed again."""
    store = opener(spec)
    if design is None:
        return store
    try:
        claim(store, design)
    except BaseException:
        if store is not spec:
            store.close()
        raise
    return store


# The checker's verdicts, item by item (:func:`fanoutsim.kernel.check.item_verdicts`),
# kept beside the tables of a checked run: the checker reads the run's trace,
# which the file does not keep, so that what ``fanoutsim explain FILE`` says of
# a duplicate or a loss is what the report said.
VERDICTS_KEY = "verdicts"


def record_verdicts(store: Store, rows: list[dict[str, Any]]) -> None:
    """Keep a check's verdicts (JSON rows) in ``store`` (a memory store: nowhere)."""
    if store.keeps_meta:
        store.set_meta(VERDICTS_KEY, json.dumps(rows, separators=(",", ":")))


def recorded_verdicts(store: Store) -> list[dict[str, Any]] | None:
    """The verdicts :func:`record_verdicts` kept in ``store``; None when it
    keeps none (never checked, or changed since: :func:`forget_verdicts`)."""
    text = store.meta(VERDICTS_KEY) if store.keeps_meta else None
    if not text:
        return None
    rows: list[dict[str, Any]] = json.loads(text)
    return rows


def recorded_for(store: Store, item: str) -> list[dict[str, Any]] | None:
    """The kept verdicts of one item (an empty list: the check found it
    neither duplicated nor lost); None when ``store`` keeps none."""
    rows = recorded_verdicts(store)
    return None if rows is None else [r for r in rows if r["item"] == str(item)]


def forget_verdicts(store: Store) -> None:
    """Drop the kept verdicts of ``store``, and its recorded end
    (:func:`forget_end`): the run goes on (served, written to), so neither the
    check of its end nor that end tells it any more."""
    if store.keeps_meta and store.meta(VERDICTS_KEY):
        store.set_meta(VERDICTS_KEY, "")
    forget_end(store)


# Where a virtual-clock run's clock stopped (epoch microseconds), kept as the
# clock moves. Its rows are stamped on that clock (a virtual 2026-01-01), so a
# reader measuring an age in them (a lag) measures it as of this end, the now
# the run's report used; the wall clock would add months. A wall-clock process
# that carries the run on drops it, and the wall clock is now again.
END_KEY = "virtual_end_us"


def record_end(store: Store, at_us: int) -> None:
    """Keep ``at_us`` as the end of the virtual run in ``store`` (a memory store: nowhere)."""
    if store.keeps_meta:
        store.set_meta(END_KEY, str(int(at_us)))


def recorded_end(store: Store) -> int | None:
    """The end :func:`record_end` kept in ``store``; None when it keeps none
    (no virtual run, carried on since, or a value no clock can show)."""
    text = store.meta(END_KEY) if store.keeps_meta else None
    if not text:
        return None
    try:
        at_us = int(text)
        from_us(at_us)  # a date a status can print
    except (ValueError, OverflowError):
        return None
    return at_us


def forget_end(store: Store) -> None:
    """Drop the end kept in ``store``: a wall-clock process carries the run on."""
    if store.keeps_meta and store.meta(END_KEY):
        store.set_meta(END_KEY, "")


__all__ = [
    "DESIGN_KEY",
    "VERDICTS_KEY",
    "claim",
    "open_claimed",
    "record_verdicts",
    "recorded_verdicts",
    "recorded_for",
    "forget_verdicts",
    "END_KEY",
    "record_end",
    "recorded_end",
    "forget_end",
]
