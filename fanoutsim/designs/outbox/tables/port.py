"""The outbox design's tables: their columns and their part of the transaction interface (the port).

Every adapter — :mod:`.memory`, :mod:`.sql` (DuckDB, and PostgreSQL through the
kernel's dialect layer) — implements it; the contract suite runs each against it."""

from __future__ import annotations

from abc import abstractmethod
from typing import Protocol, TypedDict

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


# -- the rows ------------------------------------------------------------------------
# Rows cross the port as dicts (see fanoutsim.kernel.store.base): timestamps are
# int microseconds since the epoch. The TypedDicts say which keys each row has
# and what they hold; the columns above say their order.
class PageRow(TypedDict):
    """One ``pages`` row: the domain table a commit writes with its outbox row."""

    id: str
    body: str | None
    updated_at: int


class OutboxRow(TypedDict):
    """One ``outbox`` row."""

    seq: int
    ts: int
    topic: str | None
    kind: str
    ref: str | None  # the page the row is about
    due_at: int | None  # a delayed row: not delivered before then


class CursorRow(TypedDict):
    """One ``cursors`` row: the last seq a consumer has handled."""

    consumer: str
    seq: int


class ParkedRow(TypedDict):
    """One ``parked`` row: a poison row a consumer gave up on."""

    consumer: str
    seq: int
    error: str | None
    attempts: int
    parked_at: int


class DeferredRow(TypedDict):
    """One ``deferred`` row: a row a consumer owes at ``due_at``."""

    consumer: str
    seq: int
    due_at: int


# -- the interface -------------------------------------------------------------------
class OutboxTx(Protocol):
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
    def insert_outbox(self, row: OutboxRow) -> None:
        """Append one outbox row (``seq`` from :meth:`reserve_outbox_seq`); a
        seq already in the table raises :class:`KeyError`."""

    @abstractmethod
    def fetch_outbox(self, after: int, limit: int) -> list[OutboxRow]:
        """Up to ``limit`` rows with ``seq > after``, in seq order. The rows are
        to read, not to change: an adapter may hand out its own (an outbox row
        never changes once written), and whoever passes one on copies it."""

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

    def past_cursor(self, consumer: str, limit: int) -> tuple[int | None, list[OutboxRow], int | None]:
        """One read of a consumer: ``(its cursor, up to limit rows past it, its
        next due time)`` — what :meth:`get_cursor`, :meth:`fetch_outbox` (when
        :meth:`has_outbox_past` says a row may be there) and :meth:`next_due`
        answer; ``(None, [], None)`` for a consumer without a cursor. (An adapter
        may answer it in one call: the memory one does.)"""
        cursor = self.get_cursor(consumer)
        if cursor is None:
            return None, [], None
        rows = self.fetch_outbox(cursor, limit) if self.has_outbox_past(cursor) else []
        return cursor, rows, self.next_due(consumer)

    @abstractmethod
    def set_cursor(self, consumer: str, seq: int) -> None:
        """Insert or overwrite the consumer's cursor."""

    @abstractmethod
    def list_cursors(self) -> list[CursorRow]: ...

    # -- parked and deferred rows ------------------------------------------------
    @abstractmethod
    def park(self, row: ParkedRow) -> None:
        """Record a poison row (consumer, seq, error, attempts, parked_at);
        parking the same (consumer, seq) again overwrites it."""

    @abstractmethod
    def list_parked(self, consumer: str | None = None) -> list[ParkedRow]: ...

    @abstractmethod
    def defer(self, consumer: str, seq: int, due_at: int) -> None:
        """Remember that ``consumer`` owes the row ``seq`` at ``due_at``."""

    @abstractmethod
    def fetch_due(self, consumer: str, now: int, limit: int) -> list[DeferredRow]:
        """Deferred entries of ``consumer`` with ``due_at <= now``, by ``(due_at, seq)``."""

    @abstractmethod
    def next_due(self, consumer: str) -> int | None:
        """The earliest ``due_at`` the consumer still owes, or None."""

    @abstractmethod
    def delete_deferred(self, consumer: str, seq: int) -> bool: ...

    # -- the domain table ------------------------------------------------------
    @abstractmethod
    def upsert_page(self, row: PageRow) -> None: ...

    @abstractmethod
    def get_page(self, page_id: str) -> PageRow | None: ...
