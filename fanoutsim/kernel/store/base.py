"""The store interface: the only way the engine reads or writes durable state.

Rows cross this interface as plain dicts whose timestamps are ``int``
microseconds since the epoch (see :mod:`fanoutsim.kernel.timeutil`) and whose ids are
UUID strings. Orderings are part of the contract, because they decide which
row a batch takes and which a worker claims; both adapters must produce the
same sequence for the same calls, or runs would differ by store. The kernel's
own table, ``runner_log``, is ordered by ``seq``; each design's
:class:`StorePart` (its ``tables`` module) states the orderings of its tables.

Both adapters also fail alike:

* a duplicate key raises :class:`KeyError` and *fails the transaction*, as
  SQL aborts it: should the caller catch the error, every later call in the
  block raises :class:`RuntimeError`, and so does leaving the block normally,
  which commits nothing (DuckDB's COMMIT of an aborted transaction would roll
  back without a word);
* an update or finish of an id that does not exist changes nothing (SQL's
  ``UPDATE ... WHERE id = ?`` matching no row);
* a negative ``limit`` raises :class:`ValueError`, before anything runs;
* ``rows()`` on the thread holding the open transaction raises
  :class:`RuntimeError`: it reads committed rows, which that thread would
  wait for forever.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib import import_module
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar

from fanoutsim.kernel.validate import is_whole

# the kernel's own tables: table -> columns, in the order DataFrames show them.
# Each design adds its own with a StorePart (its ``tables`` module).
TABLES: dict[str, tuple[str, ...]] = {
    # the runner process's own life: one row per start and per clean stop, so a
    # start with no stop before it marks a crash, even a kill -9
    "runner_log": ("seq", "happened_at", "event", "detail"),
}
TIMESTAMP_COLUMNS = frozenset({"happened_at"})
# what a call on a transaction that a failed write ended says, in both adapters
FAILED_TX = "a write in this transaction failed ({}); leave the block so it rolls back"
SWALLOWED_TX = "transaction rolled back: a write in it failed ({})"


def check_limit(limit: int) -> int:
    """A row limit as SQL's ``LIMIT`` takes it: an int >= 0 (a negative slice
    bound would silently mean "all but the last few" in Python)."""
    if (type(limit) is not int and not is_whole(limit)) or limit < 0:  # an int is the common case: no call
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    return limit


class Tx(ABC):
    """One open transaction. Obtain it from :meth:`Store.transaction`. The
    kernel's part of the interface; each design's :class:`StorePart` adds its
    own (an ABC of abstract methods, ``tx``), which both adapters implement."""

    # the error of a write that failed in this transaction; it can no longer commit
    failed: BaseException | None = None
    # Whether other processes' transactions run at the same time as this one, on
    # the same rows (PostgreSQL): a part that reads a row to write it back then
    # locks it (SELECT ... FOR UPDATE). A store one process holds runs one
    # transaction at a time, and there a lock is a plain read.
    row_locks = False

    def after_locks(self, now: int) -> int:
        """``now`` (a step's time, read when it began), or the time at which this
        transaction's last row lock was granted if that is later: a step that
        waited for another process's transaction acts, and is traced, after it
        committed. ``now`` itself where no lock waits (one process, or a store
        with no wall clock: see :attr:`Store.clock`)."""
        return now

    def _refuse_if_failed(self) -> None:
        """Any use of a transaction after a failed write raises, as DuckDB does
        for an aborted one: also a step that would send no statement."""
        if self.failed is not None:
            raise RuntimeError(FAILED_TX.format(self.failed))

    # -- runner_log -----------------------------------------------------
    @abstractmethod
    def log_runner(self, at: int, event: str, detail: str | None = None) -> int:
        """Append one row to ``runner_log``; returns its ``seq`` (1, 2, ...)."""


@dataclass(frozen=True)
class StorePart:
    """One design's tables, as the store composes them (``MemoryStore(parts=...)``,
    ``DuckDBStore(path, parts=...)``); the kernel keeps the transactions, the
    undo log, failed-transaction handling, ``runner_log`` and schema versions.

    ``tables``: table -> columns in DataFrame order; ``timestamp_columns``: its
    columns holding epoch microseconds. ``tx``: its part of the ``Tx``
    interface (abstract methods). The memory adapter: ``memory_tx`` (a mixin
    of ``MemoryTx``, ``__slots__ = ()``, implementing ``tx``), ``memory_init(store)``
    (its dicts and indexes on a new ``MemoryStore``) and ``memory_rows`` (table
    -> ``fn(store)``: the committed rows in the contract's order). The DuckDB
    adapter: ``duckdb_tx`` (a mixin of ``DuckDBTx``), ``duckdb_schema`` (run at
    every open, before the migrations: ``CREATE TABLE IF NOT EXISTS ...``),
    ``duckdb_migrations`` (schema version -> statements bringing a file from
    the version before it, each idempotent: SQL, or a function of the
    connection for a step SQL alone cannot say) and ``duckdb_rows`` (table -> the
    SELECT of all its rows in the contract's order)."""

    name: str
    tables: Mapping[str, tuple[str, ...]]
    timestamp_columns: frozenset[str]
    tx: type
    memory_tx: type
    memory_init: Callable[[Any], None]
    memory_rows: Mapping[str, Callable[[Any], list[dict[str, Any]]]]
    duckdb_tx: type
    duckdb_schema: str = ""
    duckdb_migrations: Mapping[int, Sequence[str]] = field(default_factory=dict)
    duckdb_rows: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_package(cls, package: str, name: str, *, tx: type, memory_tx: type, duckdb_tx: type) -> StorePart:
        """The part of a design's ``tables`` package laid out as every built-in
        one is: ``port`` (``TABLES``, ``TIMESTAMP_COLUMNS``), ``memory``
        (``memory_init``, ``MEMORY_ROWS``), ``statements`` (``MIGRATIONS``,
        ``ALL_ROWS`` and, when it has one, ``SCHEMA``); the three classes named."""
        port, memory, statements = (import_module(f"{package}.{m}") for m in ("port", "memory", "statements"))
        return cls(
            name=name,
            tables=port.TABLES,
            timestamp_columns=port.TIMESTAMP_COLUMNS,
            tx=tx,
            memory_tx=memory_tx,
            memory_init=memory.memory_init,
            memory_rows=memory.MEMORY_ROWS,
            duckdb_tx=duckdb_tx,
            duckdb_schema=getattr(statements, "SCHEMA", ""),
            duckdb_migrations=statements.MIGRATIONS,
            duckdb_rows=statements.ALL_ROWS,
        )


def row_of(cols: tuple[str, ...], values: Iterable[Any]) -> dict[str, Any]:
    """One row of a table with columns ``cols`` (a SQL result's tuple), as a dict."""
    return dict(zip(cols, values))


def check_parts(given: Iterable[object]) -> tuple[StorePart, ...]:
    """The parts a store composes: StoreParts, no table named twice (nor one of the kernel's)."""
    parts: list[StorePart] = []
    seen = dict.fromkeys(TABLES, "the kernel")
    for part in tuple(given):
        if not isinstance(part, StorePart):
            raise TypeError(f"a store part must be a StorePart, got {part!r}")
        parts.append(part)
        for table in part.tables:
            if table in seen:
                raise ValueError(f"table {table!r} of part {part.name!r} is already a table of {seen[table]}")
            seen[table] = f"part {part.name!r}"
    return tuple(parts)


# What abc and typing.Protocol put on every class: not methods of a part.
_CLASS_MACHINERY = frozenset({"_abc_impl", "_is_protocol", "_is_runtime_protocol"})


def compose_tx(base: type, mixins: tuple[type, ...]) -> type:
    """``base`` (an adapter's transaction) with the parts' methods. A method two
    of them define would be one part's silently, so it is refused."""
    if not mixins:
        return base
    owner = {name: base.__name__ for name in dir(base) if not name.startswith("__")}
    for mixin in mixins:
        for name in vars(mixin):
            if name.startswith("__") or name in _CLASS_MACHINERY:
                continue
            if name in owner:
                raise ValueError(
                    f"{mixin.__name__}.{name} is {owner[name]}'s already; a store part "
                    "adds methods, it does not replace them"
                )
            owner[name] = mixin.__name__
    return type(base.__name__, (base, *mixins), {"__slots__": ()})


def tables_of(parts: Iterable[StorePart]) -> dict[str, tuple[str, ...]]:
    """Every table of the kernel and of ``parts``: table -> columns."""
    out = dict(TABLES)
    for part in parts:
        out.update(part.tables)
    return out


def timestamp_columns_of(parts: Iterable[StorePart]) -> frozenset[str]:
    return TIMESTAMP_COLUMNS.union(*(part.timestamp_columns for part in parts))


# the transaction an adapter's store begins (bare ``Store``: any Tx). Covariant, so
# that a MemoryStore is a Store: a store commits or rolls back only the
# transactions its own _begin returned, never another store's
if TYPE_CHECKING:  # a TypeVar's default (PEP 696) is typing's from Python 3.13: only mypy reads it
    import typing_extensions

    TxT = typing_extensions.TypeVar("TxT", bound=Tx, default=Tx, covariant=True)
else:
    TxT = TypeVar("TxT", bound=Tx, covariant=True)


class OneThreadTx:
    """A store whose transactions take a lock (a database connection is one
    thread's at a time): ``_acquire`` at begin holds it for this thread, and
    the adapter releases it at commit or rollback."""

    _lock: threading.Lock
    _owner: int | None  # the thread holding _lock, None: no transaction open

    def _acquire(self) -> None:
        me = threading.get_ident()
        if self._owner == me:  # else: waiting on our own lock, forever
            raise RuntimeError("nested transactions are not supported")
        self._lock.acquire()
        self._owner = me


class Store(ABC, Generic[TxT]):
    """A set of tables with transactions. Not re-entrant: one open tx at a time.
    ``tables`` (table -> columns) and ``timestamp_columns`` say which tables
    it holds: the kernel's and those of the parts it composes."""

    tables: Mapping[str, tuple[str, ...]] = TABLES
    timestamp_columns: frozenset[str] = TIMESTAMP_COLUMNS
    # the design's StoreParts it composes (see check_parts); none: the kernel's tables alone
    parts: tuple[StorePart, ...] = ()
    # Committed transactions that may have written, since this store object
    # opened (an adapter may count one that only read; never misses a write).
    # A runtime asleep until some row appears compares two readings rather
    # than asking its question after every step.
    writes: int = 0
    # Whether processes other than this one may write the tables (a PostgreSQL
    # server others reach): then ``writes`` does not see every write, and a
    # loop that sleeps until a write must also wake now and then.
    shared: bool = False
    # The wall clock (epoch microseconds) of the runtime over this store, set by
    # a wall-clock runtime (None: a virtual clock's, which no lock wait moves). A
    # store whose row locks wait for other processes reads it as each is granted
    # (Tx.after_locks).
    clock: Callable[[], int] | None = None

    @abstractmethod
    def _begin(self) -> TxT: ...

    @abstractmethod
    def _commit(self, tx: TxT) -> None: ...  # type: ignore[misc]  # its own tx: see TxT

    @abstractmethod
    def _rollback(self, tx: TxT) -> None: ...  # type: ignore[misc]  # its own tx: see TxT

    def transaction(self) -> AbstractContextManager[TxT, Literal[False]]:
        """``with store.transaction() as tx:`` — commit on normal exit; roll back
        every write on any exception (a Crash included)."""
        return Transaction(self)

    @abstractmethod
    def rows(self, table: str) -> list[dict[str, Any]]:
        """Committed rows of a table, in the contract's order (for DataFrames)."""

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a store records of itself (see .record): SQL stores keep fanoutsim_meta
    keeps_meta = False

    @property
    def where(self) -> str:
        """The store, as a message names it (no secret in it)."""
        return repr(self)

    def meta(self, key: str) -> str | None:
        """The value ``key`` has in ``fanoutsim_meta`` (None: none, or a store that keeps none)."""
        return None

    def set_meta(self, key: str, value: str) -> None:
        """Write ``key`` into ``fanoutsim_meta`` (a store that keeps none: nothing)."""

    def row_count(self, table: str) -> int:
        """How many committed rows ``table`` holds."""
        return len(self.rows(table))


class Transaction(Generic[TxT]):
    """The ``with`` block of :meth:`Store.transaction`. A small class rather than
    a generator-based context manager: the engine opens one for nearly every
    step, so its fixed cost is on every hot path."""

    __slots__ = ("store", "tx")

    def __init__(self, store: Store[TxT]) -> None:
        self.store = store
        self.tx: TxT | None = None

    def __enter__(self) -> TxT:
        self.tx = self.store._begin()
        return self.tx

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        tx = self.tx
        assert tx is not None, "__exit__ without __enter__"
        if exc_type is not None:
            self.store._rollback(tx)
            return False  # re-raise
        if tx.failed is not None:  # the block swallowed a failed write
            self.store._rollback(tx)
            raise RuntimeError(SWALLOWED_TX.format(tx.failed)) from tx.failed
        self.store._commit(tx)
        return False
