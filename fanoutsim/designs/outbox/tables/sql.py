"""The outbox design's tables in SQL: the DuckDB adapter of :mod:`.port` (PostgreSQL runs the
same statements through the kernel's dialect layer); its statements are :mod:`.statements`."""

from __future__ import annotations

from fanoutsim.kernel.store.base import check_limit
from fanoutsim.kernel.store.base import row_of as _row

from . import statements as sql
from .port import TABLES, OutboxTx

# -- the DuckDB adapter ---------------------------------------------------------------
_O = TABLES["outbox"]

# The adapter's hint (see DuckDBTx): an upper bound of the highest committed
# outbox seq (0: none), raised by each committed insert, never lowered by a
# prune. None (absent): not known yet.
_HIGH = "outbox.high"


class OutboxDuckDBTx(OutboxTx):
    """The outbox's methods of the DuckDB adapter's transaction (a mixin of
    :class:`~fanoutsim.kernel.store.duckdb.DuckDBTx`).

    :meth:`has_outbox_past` answers from a hint when it can: the highest
    committed seq (an upper bound), loaded by one statement the first time it
    is asked for and changed only after a commit; a transaction that has
    written asks SQL, since its own rows are not in it yet."""

    __slots__ = ()

    def reserve_outbox_seq(self):
        return self._run(sql.RESERVE_OUTBOX_SEQ).fetchone()[0]

    def insert_outbox(self, row):
        self._run(sql.INSERT_OUTBOX, [row[k] for k in _O])
        hints, seq = self.hints, row["seq"]

        def committed():
            high = hints.get(_HIGH)
            if high is not None and seq > high:
                hints[_HIGH] = seq

        self._on_commit(committed)

    def has_outbox_past(self, after):
        if self.begun:
            return self._run(sql.HAS_OUTBOX_PAST, [after]).fetchone()[0]
        high = self.hints.get(_HIGH)
        if high is None:
            high = self.hints[_HIGH] = self._run(sql.OUTBOX_MAX).fetchone()[0] or 0
        return high > after

    def fetch_outbox(self, after, limit):
        rows = self._run(sql.FETCH_OUTBOX, [after, check_limit(limit)]).fetchall()
        return [_row(_O, r) for r in rows]

    def outbox_bounds(self):
        low = self._run(sql.OUTBOX_MIN).fetchone()[0]
        return (low, self._run(sql.OUTBOX_LAST).fetchone()[0])

    def prune_outbox(self, cutoff, limit=None):
        limit = 2**62 if limit is None else check_limit(limit)
        return sorted(r[0] for r in self._run(sql.PRUNE_OUTBOX, [cutoff, limit]).fetchall())

    def get_cursor(self, consumer):
        r = self._run(sql.GET_CURSOR, [consumer]).fetchone()
        return None if r is None else r[0]

    def set_cursor(self, consumer, seq):
        self._run(sql.SET_CURSOR, [consumer, seq])

    def list_cursors(self):
        return [_row(TABLES["cursors"], r) for r in self._run(sql.ALL_ROWS["cursors"]).fetchall()]

    def park(self, row):
        self._run(sql.PARK, [row[k] for k in TABLES["parked"]])

    def list_parked(self, consumer=None):
        return [_row(TABLES["parked"], r) for r in self._run(sql.LIST_PARKED, [consumer, consumer]).fetchall()]

    def defer(self, consumer, seq, due_at):
        self._run(sql.DEFER, [consumer, seq, due_at])

    def fetch_due(self, consumer, now, limit):
        rows = self._run(sql.FETCH_DUE, [consumer, now, check_limit(limit)]).fetchall()
        return [_row(TABLES["deferred"], r) for r in rows]

    def next_due(self, consumer):
        return self._run(sql.NEXT_DUE, [consumer]).fetchone()[0]

    def delete_deferred(self, consumer, seq):
        return self._run(sql.DELETE_DEFERRED, [consumer, seq]).fetchone() is not None

    def upsert_page(self, row):
        self._run(sql.UPSERT_PAGE, [row[k] for k in TABLES["pages"]])

    def get_page(self, page_id):
        r = self._run(sql.GET_PAGE, [page_id]).fetchone()
        return None if r is None else _row(TABLES["pages"], r)
