"""The outbox design's tables: its part of the store (seed 002).

A domain table (``pages``), the log (``outbox``, with its sequence, which
only grows: a pruned or rolled-back seq is never reused), per-consumer
``cursors``, ``parked`` (poison) rows and ``deferred`` work: their columns,
their part of the ``Tx`` interface, the memory adapter's state and methods,
the DuckDB schema and statements, composed by the kernel's store as :data:`PART`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right, insort

from fanoutsim.designs.outbox import tables_sql as sql
from fanoutsim.kernel.store.base import StorePart, check_limit
from fanoutsim.kernel.store.base import row_of as _row

# -- the tables ----------------------------------------------------------------------
# table -> columns, in the order DataFrames show them
TABLES: dict[str, tuple[str, ...]] = {
    "pages": ("id", "body", "updated_at"),
    "outbox": ("seq", "ts", "topic", "kind", "ref", "due_at"),
    "cursors": ("consumer", "seq"),
    "parked": ("consumer", "seq", "error", "attempts", "parked_at"),
    "deferred": ("consumer", "seq", "due_at"),
}
TIMESTAMP_COLUMNS = frozenset({"updated_at", "ts", "due_at", "parked_at"})


# -- the interface -------------------------------------------------------------------
class OutboxTx(ABC):
    """The outbox's part of :class:`~fanoutsim.kernel.store.base.Tx`."""

    __slots__ = ()

    # Orderings: outbox by ``seq``; cursors by ``consumer``; parked and
    # deferred by ``(consumer, seq)``; pages by ``id``.

    # -- outbox ------------------------------------------------------------
    @abstractmethod
    def reserve_outbox_seq(self) -> int:
        """The next outbox seq (1, 2, ...), never handed out twice: a sequence's
        nextval. A seq reserved and never inserted stays a gap."""

    @abstractmethod
    def insert_outbox(self, row: dict) -> None:
        """Append one outbox row (``seq`` from :meth:`reserve_outbox_seq`); a
        seq already in the table raises :class:`KeyError`."""

    @abstractmethod
    def fetch_outbox(self, after: int, limit: int) -> list[dict]:
        """Up to ``limit`` rows with ``seq > after``, in seq order."""

    @abstractmethod
    def has_outbox_past(self, after: int) -> bool:
        """Whether :meth:`fetch_outbox` past ``after`` could return a row (a
        row with ``seq > after`` is retained). False means certainly none; an
        adapter unsure (one answering from a bound of its committed rows)
        answers True, and the step reads as before."""

    @abstractmethod
    def outbox_bounds(self) -> tuple[int | None, int]:
        """``(oldest retained seq or None, last reserved seq or 0)``."""

    @abstractmethod
    def prune_outbox(self, cutoff: int, limit: int | None = None) -> list[int]:
        """Delete rows with ``ts < cutoff`` (lowest seq first, at most
        ``limit``), except rows still deferred for some consumer; returns the
        deleted seqs in order."""

    # -- cursors -------------------------------------------------------------
    @abstractmethod
    def get_cursor(self, consumer: str) -> int | None: ...

    @abstractmethod
    def set_cursor(self, consumer: str, seq: int) -> None:
        """Insert or overwrite the consumer's cursor."""

    @abstractmethod
    def list_cursors(self) -> list[dict]: ...

    # -- parked and deferred rows ------------------------------------------------
    @abstractmethod
    def park(self, row: dict) -> None:
        """Record a poison row (consumer, seq, error, attempts, parked_at);
        parking the same (consumer, seq) again overwrites it."""

    @abstractmethod
    def list_parked(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def defer(self, consumer: str, seq: int, due_at: int) -> None:
        """Remember that ``consumer`` owes the row ``seq`` at ``due_at``."""

    @abstractmethod
    def fetch_due(self, consumer: str, now: int, limit: int) -> list[dict]:
        """Deferred entries of ``consumer`` with ``due_at <= now``, by ``(due_at, seq)``."""

    @abstractmethod
    def next_due(self, consumer: str) -> int | None:
        """The earliest ``due_at`` the consumer still owes, or None."""

    @abstractmethod
    def delete_deferred(self, consumer: str, seq: int) -> bool: ...

    # -- the domain table ------------------------------------------------------
    @abstractmethod
    def upsert_page(self, row: dict) -> None: ...

    @abstractmethod
    def get_page(self, page_id: str) -> dict | None: ...


# -- the memory adapter -----------------------------------------------------------------
def memory_init(s) -> None:
    """The outbox's tables on a new MemoryStore."""
    s.outbox: dict[int, dict] = {}
    s.outbox_seqs: list[int] = []  # sorted
    s.outbox_last = 0  # the sequence's last value
    s.cursors: dict[str, int] = {}
    s.parked: dict[tuple[str, int], dict] = {}
    s.deferred: dict[tuple[str, int], int] = {}
    s.pages: dict[str, dict] = {}


def _drop_outbox(s, seq: int) -> dict:
    row = s.outbox.pop(seq)
    del s.outbox_seqs[bisect_left(s.outbox_seqs, seq)]
    return row


def _restore_outbox(s, row: dict) -> None:
    s.outbox[row["seq"]] = row
    insort(s.outbox_seqs, row["seq"])


class OutboxMemoryTx(OutboxTx):
    """The outbox's methods of the memory adapter's transaction (a mixin of
    :class:`~fanoutsim.kernel.store.memory.MemoryTx`)."""

    __slots__ = ()

    def reserve_outbox_seq(self):
        s = self.s
        s.outbox_last += 1

        def undo():
            s.outbox_last -= 1

        self.undo.append(undo)
        return s.outbox_last

    def insert_outbox(self, row):
        s = self.s
        seq = row["seq"]
        if seq in s.outbox:
            raise self._duplicate(f"outbox.seq {seq}")
        s.outbox[seq] = {k: row[k] for k in TABLES["outbox"]}  # the table's columns, in order
        insort(s.outbox_seqs, seq)
        self.undo.append(lambda: _drop_outbox(s, seq))

    def fetch_outbox(self, after, limit):
        s = self.s
        seqs = s.outbox_seqs
        start = bisect_right(seqs, after)
        return [dict(s.outbox[q]) for q in seqs[start:start + check_limit(limit)]]

    def has_outbox_past(self, after):
        seqs = self.s.outbox_seqs
        return bool(seqs) and seqs[-1] > after

    def outbox_bounds(self):
        s = self.s
        return (s.outbox_seqs[0] if s.outbox_seqs else None, s.outbox_last)

    def prune_outbox(self, cutoff, limit=None):
        s = self.s
        if limit is not None:
            check_limit(limit)
        owed = {seq for (_, seq) in s.deferred}
        doomed = [q for q in s.outbox_seqs if s.outbox[q]["ts"] < cutoff and q not in owed]
        if limit is not None:
            doomed = doomed[:limit]
        for q in doomed:
            row = _drop_outbox(s, q)
            self.undo.append(lambda row=row: _restore_outbox(s, row))
        return doomed

    def get_cursor(self, consumer):
        return self.s.cursors.get(consumer)

    def set_cursor(self, consumer, seq):
        self._put(self.s.cursors, consumer, seq)

    def list_cursors(self):
        c = self.s.cursors
        return [{"consumer": k, "seq": c[k]} for k in sorted(c)]

    def park(self, row):
        self._put(self.s.parked, (row["consumer"], row["seq"]), {k: row[k] for k in TABLES["parked"]})

    def list_parked(self, consumer=None):
        p = self.s.parked
        return [dict(p[k]) for k in sorted(p) if consumer is None or k[0] == consumer]

    def defer(self, consumer, seq, due_at):
        self._put(self.s.deferred, (consumer, seq), due_at)

    def fetch_due(self, consumer, now, limit):
        d = self.s.deferred
        due = sorted((at, seq) for (c, seq), at in d.items() if c == consumer and at <= now)
        return [{"consumer": consumer, "seq": seq, "due_at": at} for at, seq in due[:check_limit(limit)]]

    def next_due(self, consumer):
        if not self.s.deferred:  # the usual case, asked on every fetch
            return None
        return min((at for (c, _), at in self.s.deferred.items() if c == consumer), default=None)

    def delete_deferred(self, consumer, seq):
        d = self.s.deferred
        key = (consumer, seq)
        if key not in d:
            return False
        at = d.pop(key)
        self.undo.append(lambda: d.__setitem__(key, at))
        return True

    def upsert_page(self, row):
        self._put(self.s.pages, row["id"], {k: row[k] for k in TABLES["pages"]})

    def get_page(self, page_id):
        row = self.s.pages.get(page_id)
        return None if row is None else dict(row)


MEMORY_ROWS = {
    "outbox": lambda s: [dict(s.outbox[q]) for q in s.outbox_seqs],
    "cursors": lambda s: [{"consumer": k, "seq": s.cursors[k]} for k in sorted(s.cursors)],
    "parked": lambda s: [dict(s.parked[k]) for k in sorted(s.parked)],
    "deferred": lambda s: [{"consumer": c, "seq": q, "due_at": s.deferred[(c, q)]} for c, q in sorted(s.deferred)],
    "pages": lambda s: [dict(s.pages[k]) for k in sorted(s.pages)],
}


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


PART = StorePart(
    name="outbox", tables=TABLES, timestamp_columns=TIMESTAMP_COLUMNS, tx=OutboxTx,
    memory_tx=OutboxMemoryTx, memory_init=memory_init, memory_rows=MEMORY_ROWS,
    duckdb_tx=OutboxDuckDBTx, duckdb_migrations=sql.MIGRATIONS, duckdb_rows=sql.ALL_ROWS,
)
