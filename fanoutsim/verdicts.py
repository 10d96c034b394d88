"""The checker's verdicts item by item: kept with a run, read back, told as a table.

A check names a cause for every duplicate and every loss
(:mod:`fanoutsim.kernel.check`), reading the run's trace; the report counts
them by cause. ``fanoutsim run`` keeps the verdicts one item at a time (the
design's ``verdicts``: :func:`fanoutsim.kernel.check.item_verdicts`'s rows)
under ``verdicts`` in ``report.json`` and, when the run has a store file or
database, in the store itself (:func:`fanoutsim.kernel.store.record.record_verdicts`),
so that ``fanoutsim explain`` tells the cause the report counted — the same
key and the same plain words (the design's ``causes``) — rather than guess it
again from the tables. :func:`read` finds them for ``explain FILE --duplicates
/ --lost`` and :func:`table` lays them out.

A file no check kept verdicts in (one ``fanoutsim serve`` wrote, or one a
server or a write has changed since) is told from its tables alone where the
design can (``Design.table_verdicts``: the reactor's store-only check), and
says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from fanoutsim.kernel.design import Design
from fanoutsim.kernel.report import cause_words
from fanoutsim.kernel.report import table as text_table
from fanoutsim.kernel.store.record import record_verdicts, recorded_verdicts

__all__ = ["Found", "of_check", "keep", "read", "table"]

FROM_CHECK = "the checker's verdicts at the end of the run"
FROM_TABLES = (
    "the tables alone (no check kept its verdicts in this file): a duplicate with no crash between its "
    "deliveries is 'unknown' here, where the trace would name its cause"
)


@dataclass(frozen=True)
class Found:
    """A run's verdicts: its ``design``, the ``rows`` and where they come from (``source``)."""

    design: Design
    rows: list[dict[str, Any]]
    source: str


def of_check(design: Design, checked) -> list[dict[str, Any]]:
    """The verdicts of ``checked`` item by item (none for a design that lists none)."""
    return [] if design.verdicts is None else design.verdicts(checked)


def keep(sim, rows: list[dict[str, Any]]) -> None:
    """Keep ``rows`` in the run's store (a file or a database; a memory store keeps nothing)."""
    store = getattr(sim, "store", None)
    if store is not None:
        record_verdicts(store, rows)


def read(path: str, design: str | None = None) -> Found:
    """The verdicts of the run at ``path``: a folder ``fanoutsim run --out``
    wrote (its ``report.json``), or a store file or database (what a check
    kept in it, else its tables alone where the design can tell them).
    ``design``: the design the caller means (an error if the run is another's)."""
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "report.json")):
        return _from_folder(path, design)
    return _from_store(os.fspath(path), design)


def _from_folder(path: str, design: str | None) -> Found:
    from fanoutsim import designs

    where = os.path.join(path, "report.json")
    try:
        with open(where, encoding="utf-8") as f:
            report = json.load(f)
    except ValueError as exc:
        raise ValueError(f"{where} is not a report fanoutsim wrote: {exc}") from None
    name = report.get("design") if isinstance(report, dict) else None
    if name not in designs.names():
        raise ValueError(f"{where} names no design fanoutsim knows ({name!r}): not a report fanoutsim run wrote")
    if design is not None and design != name:
        raise ValueError(f"{path} holds a run of the {name} design, not the {design} design")
    rows = report.get("verdicts")
    if rows is None:
        raise ValueError(
            f"{where} keeps no verdicts item by item (an older fanoutsim wrote it): run the scenario again"
        )
    return Found(designs.get(name), rows, FROM_CHECK)


def _from_store(db: str, design: str | None) -> Found:
    from fanoutsim import serve as srv
    from fanoutsim.kernel.runtime.control import server_info

    d = srv.file_design(db, design)
    info = None if srv.is_postgres(db) else server_info(db)
    if info is not None:
        raise ValueError(
            f"{db} is being served now (pid {info.get('pid')}), and a run that goes on has no final check: "
            f"list its items once it stops (fanoutsim explain FILE ID tells one item's story meanwhile)"
        )
    srv.existing(db)
    if d.realtime is None:
        raise ValueError(f"the {d.name} design cannot open a run's file (its Design has no realtime)")
    rt = d.realtime(None, db)
    try:
        rows = recorded_verdicts(rt.store)
        if rows is not None:
            return Found(d, rows, FROM_CHECK)
        if d.table_verdicts is not None:
            return Found(d, d.table_verdicts(rt), FROM_TABLES)
    finally:
        rt.close()
    raise ValueError(
        f"{srv.shown(db)} keeps no checker verdicts: the {d.name} checker reads a run's trace, which the file "
        f"does not keep. `fanoutsim run SCENARIO --store FILE` keeps them in the file (and --out DIR in "
        f"DIR/report.json); a served run is checked by no one"
    )


def table(found: Found, kinds: tuple[str, ...]) -> str:
    """The rows of ``kinds`` (``"duplicate"``, ``"lost"``) as a readable table
    per kind — the item, its reader, how many times it was delivered, the
    cause — and under it each cause once in plain words."""
    reader = {"reactor": "subscription"}.get(found.design.name, "consumer")
    out = [f"{found.design.name} run: {found.source}"]
    for kind in kinds:
        rows = [r for r in found.rows if r["kind"] == kind]
        title = "Duplicated" if kind == "duplicate" else "Lost"
        out.append("")
        if not rows:
            out.append(f"{title}: none")
            continue
        out.append(f"{title}: {len(rows):,} {'item' if len(rows) == 1 else 'items'}")
        cells = [[r["item"], r["reader"], f"{r['deliveries']:,}", r["cause"]] for r in rows]
        out += text_table(["item", reader, "deliveries", "cause"], cells, "<<><")
        for cause in dict.fromkeys(r["cause"] for r in rows):
            n = sum(1 for r in rows if r["cause"] == cause)
            words = cause_words(found.design.causes, kind, cause) or "see the checker"
            out.append(f"  {cause}, {n:,} {'item' if n == 1 else 'items'}: {words}")
    return "\n".join(out) + "\n"
