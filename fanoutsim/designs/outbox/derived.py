"""Derived state: what a consumer builds from the feed, and how far it drifts.

Seed 002: "each consumer is either idempotent or fully rebuildable from base
tables", and "because derived consumers (indexer, exporter, recompute) are
rebuildable, a consumer that falls too far behind can be reset and replayed
from base tables". Delivery is at-least-once (a crash between a row's handling
and its cursor move hands the row over again), so a consumer that is neither
pays for every duplicate in its derived state. Duplicate counts do not show
that cost; the *drift* of the derived state from what the base tables say
does. Two consumers to compare:

:class:`PageIndex`
    idempotent and rebuildable — a search index's shape: page id -> the page's
    body. Handling a row reads the page from the base table (``pages``) and
    upserts it, so a row handled twice writes the same value twice.
    ``rebuild(pages)`` replaces the whole index from the base table, and a
    reset (:meth:`~.simulation.OutboxSimulation.reset_consumer`) then replays
    the retained log over it: the same state again.
:class:`ChangeCounter`
    neither — a per-page change counter (``counts[page] += 1``). Each extra
    delivery adds one for good; nothing in the base tables says what the
    count should be, so it cannot be rebuilt, only moved (``set_cursor``),
    which counts again whatever it replays.

Both keep their state in Python, outside the store: it stands for state in
another system (an index, a counter in another service), which a crash of the
dispatcher process does not roll back — that is why a re-delivered row lands
twice. :func:`drift` compares a view's state with what it should be:
:meth:`PageIndex.expected` is the ``pages`` table; :meth:`ChangeCounter.expected`
counts each committed outbox row once (the ``outbox`` table past the
consumer's first cursor, so it needs the rows retention has not pruned).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.steps import OutboxStore
    from fanoutsim.designs.outbox.tables.port import PageRow

# rows as a consumer and store.rows hand them over: plain dicts
Row = dict[str, Any]
# one committed page row by id (None: no such page)
ReadPage = Callable[[str], "PageRow | None"]


class View(Protocol):
    """What :func:`drift` reads of a derived view: its state, and what it should be."""

    @property
    def state(self) -> Mapping[str, object]: ...

    def expected(self, pages: list[Row], outbox: list[Row], start: int) -> Mapping[str, object]: ...


class PageIndex:
    """Idempotent, rebuildable: page id -> body. ``read_page(page_id)`` reads a
    page row from the base table (see :func:`page_reader`)."""

    rebuildable = True

    def __init__(self, read_page: ReadPage) -> None:
        if not callable(read_page):
            raise TypeError(f"read_page must be callable(page_id) -> row or None, got {read_page!r}")
        self.read_page = read_page
        self.state: dict[str, str | None] = {}
        self.rebuilds = 0

    def __call__(self, row: Row) -> None:
        page = self.read_page(row["ref"])
        self.state[row["ref"]] = None if page is None else page["body"]

    def rebuild(self, pages: list[Row]) -> None:
        """Replace the whole index from the base table's rows."""
        self.state = {p["id"]: p["body"] for p in pages}
        self.rebuilds += 1

    def expected(self, pages: list[Row], outbox: list[Row], start: int) -> dict[str, str | None]:
        """What the index must hold: every page's body as the base table has it."""
        return {p["id"]: p["body"] for p in pages}


class ChangeCounter:
    """Neither idempotent nor rebuildable: how many changes each page had."""

    rebuildable = False

    def __init__(self) -> None:
        self.state: Counter[str] = Counter()

    def __call__(self, row: Row) -> None:
        self.state[row["ref"]] += 1

    def expected(self, pages: list[Row], outbox: list[Row], start: int) -> dict[str, int]:
        """Each committed row past the consumer's first cursor ``start``, counted once."""
        return dict(Counter(r["ref"] for r in outbox if r["seq"] > start))


def page_reader(store: OutboxStore) -> ReadPage:
    """``read_page(page_id)``: one committed page row of ``store`` (None: no such page)."""

    def read_page(page_id: str) -> PageRow | None:
        with store.transaction() as tx:
            return tx.get_page(page_id)

    return read_page


def drift(view: View, pages: list[Row], outbox: list[Row], start: int = 0) -> pd.DataFrame:
    """Per key (page) the view's value against the expected one: ``key``,
    ``expected``, ``actual``, ``drift`` (actual - expected for counts; 1 when a
    value differs, else 0), sorted by key; only keys that are off."""
    want: Mapping[str, Any] = view.expected(pages, outbox, start)  # bodies or counts: compared, subtracted
    have: dict[str, Any] = dict(view.state)
    rows = []
    for key in sorted(set(want) | set(have)):
        e, a = want.get(key), have.get(key)
        if e == a:
            continue
        d = (a or 0) - (e or 0) if isinstance(e or a, int) and not isinstance(e or a, bool) else 1
        rows.append({"key": key, "expected": e, "actual": a, "drift": d})
    return pd.DataFrame(rows, columns=["key", "expected", "actual", "drift"])


__all__ = ["PageIndex", "ChangeCounter", "page_reader", "drift"]
