"""What a store records of itself: which design's run it holds.

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

from collections.abc import Callable

from fanoutsim.kernel.store.base import Store

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


__all__ = ["DESIGN_KEY", "claim", "open_claimed"]
