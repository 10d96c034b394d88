"""The leased-consumer design's tables: their columns and their part of the transaction interface (the port).

Every adapter — :mod:`.memory`, :mod:`.sql` (DuckDB, and PostgreSQL through the
kernel's dialect layer) — implements it; the contract suite runs each against it.
Named databases: :func:`check_database` (a name), :class:`in_database` (a
transaction on one) and :func:`database_rows` (its committed rows), written
against the port alone."""

from __future__ import annotations

import re
from abc import abstractmethod
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Literal, Protocol, TypedDict

# -- the tables ----------------------------------------------------------------------
# table -> columns, in the order DataFrames show them: the event log, consumers,
# their per-partition checkpoints and sparse resolutions, leases, retries, dead
# letters, the history row
TABLES: dict[str, tuple[str, ...]] = {
    "events": ("seq", "event_id", "commit_seq", "ordinal", "partition", "kind", "payload", "committed_at"),
    "lease_consumers": (
        "consumer",
        "start_seq",
        "start_commit",
        "batch_limit",
        "in_flight_limit",
        "lease_seconds",
        "revision",
    ),
    "checkpoints": ("consumer", "partition", "seq", "commit_seq"),
    "resolutions": ("consumer", "event_id", "seq", "partition", "commit_seq", "kind"),
    "leases": (
        "consumer",
        "event_id",
        "seq",
        "partition",
        "token",
        "incarnation",
        "attempt",
        "leased_at",
        "expires_at",
    ),
    "retries": ("consumer", "event_id", "seq", "partition", "attempts", "not_before", "error"),
    "dead_letters": ("consumer", "event_id", "seq", "partition", "attempts", "error", "payload", "dead_at"),
    "history": ("incarnation", "last_commit", "last_seq", "leases_granted"),
}
TIMESTAMP_COLUMNS = frozenset({"committed_at", "leased_at", "expires_at", "not_before", "dead_at"})


# -- the rows ------------------------------------------------------------------------
# Rows cross the port as dicts (see fanoutsim.kernel.store.base): timestamps are
# int microseconds since the epoch. The TypedDicts say which keys each row has
# and what they hold; the columns above say their order. (The columns a later
# schema added, nullable in SQL, are filled by its migration: never None in a row.)
class EventRow(TypedDict):
    """One ``events`` row: an event of the log at position ``seq``."""

    seq: int
    event_id: str
    commit_seq: int  # the commit that published it (several events may share one)
    ordinal: int  # its place within that commit
    partition: str
    kind: str
    payload: str | None
    committed_at: int


class LeaseConsumerRow(TypedDict):
    """One ``lease_consumers`` row: a durable consumer and its limits."""

    consumer: str
    start_seq: int
    start_commit: int
    batch_limit: int
    in_flight_limit: int
    lease_seconds: float
    revision: int


class CheckpointRow(TypedDict):
    """One ``checkpoints`` row: the last event of a partition's contiguous done prefix."""

    consumer: str
    partition: str
    seq: int
    commit_seq: int


class ResolutionRow(TypedDict):
    """One ``resolutions`` row: an event resolved past its partition's checkpoint."""

    consumer: str
    event_id: str
    seq: int
    partition: str
    commit_seq: int
    kind: str


class LeaseRow(TypedDict):
    """One ``leases`` row: an event leased to a consumer until ``expires_at``."""

    consumer: str
    event_id: str
    seq: int
    partition: str
    token: str
    incarnation: int
    attempt: int
    leased_at: int
    expires_at: int


class RetryRow(TypedDict):
    """One ``retries`` row: a nacked event, not leased again before ``not_before``."""

    consumer: str
    event_id: str
    seq: int
    partition: str
    attempts: int
    not_before: int
    error: str | None


class DeadLetterRow(TypedDict):
    """One ``dead_letters`` row: an event that ran out of attempts."""

    consumer: str
    event_id: str
    seq: int
    partition: str
    attempts: int
    error: str | None
    payload: str | None
    dead_at: int


class HistoryRow(TypedDict):
    """The one ``history`` row: the incarnation and the log's counters."""

    incarnation: int
    last_commit: int
    last_seq: int
    leases_granted: int


# -- the interface -------------------------------------------------------------------
class LeaseTx(Protocol):
    """The leased-consumer design's part of :class:`~fanoutsim.kernel.store.base.Tx`."""

    __slots__ = ()

    # Orderings: events by ``seq``; lease_consumers by ``consumer``;
    # checkpoints by ``(consumer, partition)``; leases, retries, dead_letters
    # and resolutions by ``(consumer, seq)``. ``history`` is one row.
    # A row a read returns is to read, not to change: an adapter may hand out
    # its own (the memory one does, for events, leases, retries, checkpoints,
    # resolutions and get_history). lock_history and a consumer's row come as
    # the caller's own copies, to change and write back; table_rows copies.

    # -- named databases ------------------------------------------------------------
    @abstractmethod
    def use_database(self, name: str) -> None:
        """Every later call of this transaction reads and writes the tables of
        the named database ``name`` (:data:`DEFAULT_DATABASE`: the tables the
        store shows); a database used for the first time is made empty — its
        own log, consumers and history row at incarnation 1. Call it before
        anything else in the transaction (:func:`in_database` does): after a
        write it raises :class:`RuntimeError`. The choice stays with the store
        until the next call, so a transaction that does not call it works on
        the database the last one chose."""

    @abstractmethod
    def table_rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` of the current database, in the contract's order."""

    @abstractmethod
    def clear_database(self) -> None:
        """Delete every row of the current database's tables and put back the
        first history row (incarnation 1, counters 0): the start of a restore."""

    # -- history: the incarnation and the log's counters ----------------------
    @abstractmethod
    def get_history(self) -> HistoryRow:
        """The one history row: ``incarnation`` (1 at first), ``last_commit``,
        ``last_seq`` and ``leases_granted`` (0 at first); they only grow."""

    @abstractmethod
    def set_history(self, row: HistoryRow) -> None:
        """Overwrite the history row with ``row``'s four columns."""

    # -- locks: several processes on one database (see Tx.row_locks) ------------
    # Every transition of a consumer locks the consumer's row before it reads
    # anything else of it, and every change of the log (a publish, a lease
    # grant's counter, retention, a position resolved against the horizon) locks
    # the history row: consumers first (several: in name order), history last.
    # A store one process holds runs one transaction at a time: a lock is a read.
    @abstractmethod
    def lock_history(self) -> HistoryRow:
        """The history row, locked until this transaction ends."""

    @abstractmethod
    def lock_lease_consumer(self, consumer: str) -> LeaseConsumerRow | None:
        """The consumer's row, locked until this transaction ends (None: no such consumer)."""

    @abstractmethod
    def lock_lease_consumers(self) -> list[LeaseConsumerRow]:
        """Every consumer's row, by name, each locked until this transaction ends."""

    # -- events -----------------------------------------------------------------
    @abstractmethod
    def insert_event(self, row: EventRow) -> None:
        """Append one event; a ``seq`` or ``event_id`` already there raises :class:`KeyError`."""

    @abstractmethod
    def get_event(self, event_id: str) -> EventRow | None: ...

    @abstractmethod
    def get_event_at(self, seq: int) -> EventRow | None:
        """The retained event at log position ``seq``, or None."""

    @abstractmethod
    def event_window(self, consumer: str, after: int, limit: int, partition: str | None = None) -> list[EventRow]:
        """Per partition (only ``partition``, if given), the first ``limit``
        retained events with ``seq > after`` and past ``consumer``'s checkpoint
        of that partition; all of them by ``seq``. (``limit`` 1: each
        partition's first required event.)"""

    @abstractmethod
    def delete_event(self, seq: int) -> bool:
        """Delete the event at ``seq`` (interest retention: no consumer needs
        it); whether there was one."""

    @abstractmethod
    def event_bounds(self) -> tuple[int | None, int | None]:
        """``(lowest, highest)`` retained seq, or ``(None, None)``."""

    @abstractmethod
    def prune_events(self, cutoff: int, fence: int | None, limit: int | None = None) -> list[str]:
        """Delete events with ``committed_at < cutoff`` and, unless ``fence``
        is None, ``commit_seq < fence`` (lowest seq first, at most ``limit``);
        returns their event ids in seq order."""

    # -- consumers and checkpoints ----------------------------------------------
    @abstractmethod
    def get_lease_consumer(self, consumer: str) -> LeaseConsumerRow | None: ...

    @abstractmethod
    def put_lease_consumer(self, row: LeaseConsumerRow) -> None:
        """Insert or overwrite one consumer row."""

    @abstractmethod
    def delete_lease_consumer(self, consumer: str) -> bool:
        """Delete the consumer's row (not its other rows); whether there was one."""

    @abstractmethod
    def list_lease_consumers(self) -> list[LeaseConsumerRow]: ...

    @abstractmethod
    def list_checkpoints(self, consumer: str) -> list[CheckpointRow]:
        """The consumer's checkpoint rows, by partition: ``seq`` and
        ``commit_seq`` of the last event of the contiguous done prefix."""

    @abstractmethod
    def set_checkpoint(self, consumer: str, partition: str, seq: int, commit_seq: int) -> None: ...

    @abstractmethod
    def clear_checkpoints(self, consumer: str) -> int:
        """Delete the consumer's checkpoints; how many there were."""

    # -- sparse resolutions: done events past a checkpoint ----------------------
    @abstractmethod
    def insert_resolution(self, row: ResolutionRow) -> None:
        """Hold one resolved event past its partition's checkpoint; the same
        ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_resolutions(self, consumer: str, partition: str | None = None) -> list[ResolutionRow]: ...

    @abstractmethod
    def delete_resolution(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def clear_resolutions(self, consumer: str) -> int:
        """Delete the consumer's resolutions; how many there were."""

    # -- leases -------------------------------------------------------------------
    @abstractmethod
    def insert_lease(self, row: LeaseRow) -> None:
        """A lease of ``(consumer, event_id)``; a second one raises :class:`KeyError`."""

    @abstractmethod
    def get_lease(self, consumer: str, event_id: str) -> LeaseRow | None: ...

    @abstractmethod
    def list_leases(self, consumer: str | None = None) -> list[LeaseRow]: ...

    @abstractmethod
    def delete_lease(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def expired_leases(self, now: int, limit: int) -> list[LeaseRow]:
        """Leases with ``expires_at <= now``, by ``(expires_at, consumer, seq)``."""

    @abstractmethod
    def has_lease_due(self, now: int) -> bool:
        """Whether :meth:`expired_leases` at ``now`` could return a row (the
        earliest ``expires_at`` is at or before ``now``). False means certainly
        none; an adapter unsure (one answering from a bound of its committed
        rows) answers True, and recovery reads as before."""

    # -- retries and dead letters ---------------------------------------------------
    @abstractmethod
    def put_retry(self, row: RetryRow) -> None:
        """Insert or overwrite the retry of ``(consumer, event_id)``."""

    @abstractmethod
    def get_retry(self, consumer: str, event_id: str) -> RetryRow | None: ...

    @abstractmethod
    def delete_retry(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def list_retries(self, consumer: str | None = None) -> list[RetryRow]: ...

    @abstractmethod
    def clear_retries(self, consumer: str) -> int:
        """Delete the consumer's retries; how many there were."""

    @abstractmethod
    def insert_dead_letter(self, row: DeadLetterRow) -> None:
        """Retain a dead letter; the same ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_dead_letters(self, consumer: str | None = None) -> list[DeadLetterRow]: ...

    @abstractmethod
    def clear_dead_letters(self, consumer: str) -> int:
        """Delete the consumer's dead letters; how many there were."""


# -- named databases ---------------------------------------------------------------
DEFAULT_DATABASE = "default"
_DB_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")


def check_database(name: object) -> str:
    """A database name: lowercase letters, digits and ``_``, starting with a letter, at most 63."""
    if not isinstance(name, str) or not _DB_NAME.fullmatch(name):
        raise ValueError(
            f"database must be a name of lowercase letters, digits and '_' starting with a "
            f"letter (at most 63), got {name!r}"
        )
    return name


class LeaseStoreTx(LeaseTx, Protocol):
    """A transaction of a store composed with the leases tables: the port, and
    what the kernel's :class:`~fanoutsim.kernel.store.base.Tx` adds around it
    that the steps call."""

    @property
    def row_locks(self) -> bool: ...

    def after_locks(self, now: int) -> int: ...


class LeaseStore(Protocol):
    """A store composed with the leases tables: its transactions speak the port.

    (The adapters build their transaction classes from the parts at run time,
    which a type checker cannot follow; this is what the composition promises.)"""

    def transaction(self) -> AbstractContextManager[LeaseStoreTx, Literal[False]]: ...

    def rows(self, table: str) -> list[dict[str, Any]]: ...


class in_database:
    """``with in_database(store, name) as tx:`` — a transaction of ``store`` on
    the named database ``name`` (``use_database`` first, then the block)."""

    __slots__ = ("t", "name")

    def __init__(self, store: LeaseStore, name: str = DEFAULT_DATABASE) -> None:
        self.t, self.name = store.transaction(), name

    def __enter__(self) -> LeaseStoreTx:
        tx = self.t.__enter__()
        try:
            tx.use_database(self.name)
        except BaseException as exc:
            self.t.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return tx

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        return self.t.__exit__(exc_type, exc, tb)


def database_rows(store: LeaseStore, table: str, database: str = DEFAULT_DATABASE) -> list[dict[str, Any]]:
    """The committed rows of ``table`` of the named database (``store.rows``
    for the default one)."""
    if database == DEFAULT_DATABASE:
        return store.rows(table)
    if table not in TABLES:
        raise KeyError(f"unknown table {table!r}; the leases tables: {', '.join(TABLES)}")
    with in_database(store, database) as tx:
        return tx.table_rows(table)
