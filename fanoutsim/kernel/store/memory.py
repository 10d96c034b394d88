"""The in-memory store: Python dicts with sorted indexes and an undo log.

Writes apply to the tables at once and push their inverse onto the open
transaction's undo log; rollback replays the log backwards, so a crash inside a
transaction leaves the tables exactly as they were. A lock serialises
transactions (the real-time runtime has threads); under the virtual clock no
transaction ever spans a yield, so the lock is never contended.

The kernel keeps the transaction, the undo log, failed-transaction handling
and ``runner_log``; each design's :class:`~.base.StorePart` brings its tables:
its state on the store (``memory_init``), its ``Tx`` methods (``memory_tx``, a
mixin of :class:`MemoryTx`) and its whole-table reads (``memory_rows``).
Every index a part keeps must say what its rows say, or the two adapters
would answer the same call differently: each write that changes a key column
updates its index in the same step, and its undo does too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Hashable, Iterable
from functools import cache
from types import TracebackType
from typing import Any, Literal, NoReturn, TypeVar

from fanoutsim.kernel.store.base import (
    FAILED_TX,
    SWALLOWED_TX,
    Store,
    StorePart,
    Tx,
    check_parts,
    compose_tx,
    tables_of,
    timestamp_columns_of,
)

K = TypeVar("K", bound=Hashable)


_MISSING = object()  # no entry under the key before a _put


class _Failed:
    """Stands in for the store in a transaction that a failed write ended, so
    that any further use raises, as DuckDB does for an aborted transaction."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(FAILED_TX.format(self.error))


class MemoryTx(Tx):
    """The store's transaction, and its own ``with`` block: the engine opens one
    for nearly every step, so a store keeps one and each ``with`` starts it
    afresh (once it holds the lock): two calls, and no object, per transaction.

    A part's mixin reaches the store as ``self.s`` (a stand-in that raises once
    a write failed) and undoes its writes through ``self.undo``; ``_duplicate``,
    ``_unique``, ``_put``, ``_pop`` and ``_clear`` are the writes they share."""

    __slots__ = ("s", "store", "undo", "failed")

    def __init__(self, store: MemoryStore) -> None:
        # Any: a part's state lives on the store as attributes its memory_init
        # set, which MemoryStore does not declare (and after a failed write, a _Failed)
        self.s: Any = store
        self.store = store
        # what undoes each write: a function, or a _put's (table, key, entry before)
        self.undo: list[Callable[[], object] | tuple[dict[Any, Any], Hashable, object]] = []
        self.failed: BaseException | None = None

    def __enter__(self) -> MemoryTx:
        # ``s``, ``undo`` and ``failed`` are as a transaction starts: each end puts them back
        store = self.store
        store._lock.acquire()
        if store._open:
            store._lock.release()
            raise RuntimeError("nested transactions are not supported")
        store._open = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        store = self.store
        if exc_type is None and self.failed is None:  # commit: the writes are already in place
            undo = self.undo
            if undo:
                store.writes += 1
                undo.clear()
            store._open = False
            store._lock.release()
            return False
        store._rollback(self)
        if exc_type is None:  # the block swallowed a failed write
            raise RuntimeError(SWALLOWED_TX.format(self.failed)) from self.failed
        return False  # re-raise

    def _duplicate(self, what: str) -> KeyError:
        # SQL aborts the transaction on a constraint violation; so do we (the
        # undo log still holds the earlier writes for the rollback)
        self.failed = KeyError(f"duplicate {what}")
        self.s = _Failed(self.failed)
        return self.failed

    def _unique(self, keys: Container[K], key: K, what: str) -> K:
        """``key``, for a row inserted under it; one ``keys`` already holds is a
        duplicate ``what`` and fails the transaction (see :meth:`_duplicate`)."""
        if key in keys:
            raise self._duplicate(f"{what} {key}")
        return key

    def _put(self, table: dict[Any, Any], key: Hashable, value: object) -> None:
        """Insert or overwrite one entry; the undo puts back what was there
        (kept as a tuple: the commonest write makes no closure)."""
        self.undo.append((table, key, table.get(key, _MISSING)))
        table[key] = value

    def _pop(self, table: dict[Any, Any], key: Hashable) -> bool:
        """Delete one entry (False: there was none); the undo puts it back."""
        if key not in table:
            return False
        value = table.pop(key)
        self.undo.append(lambda: table.__setitem__(key, value))
        return True

    def _clear(self, table: dict[tuple[Any, ...], Any], owner: str) -> int:
        """Delete every entry of ``owner`` (the first part of the key: a reader, say)."""
        gone = {k: v for k, v in table.items() if k[0] == owner}
        for k in gone:
            del table[k]
        self.undo.append(lambda: table.update(gone))
        return len(gone)

    # -- runner_log -----------------------------------------------------
    def log_runner(self, at: int, event: str, detail: str | None = None) -> int:
        s = self.s
        seq = len(s.runner_log) + 1
        s.runner_log.append({"seq": seq, "happened_at": at, "event": event, "detail": detail})
        self.undo.append(s.runner_log.pop)
        return seq


@cache
def _tx_class(mixins: tuple[type, ...]) -> type:
    """MemoryTx with the parts' methods (one class per set of parts)."""
    return compose_tx(MemoryTx, mixins)


def _runner_log(store: MemoryStore) -> list[dict[str, Any]]:
    return [dict(r) for r in store.runner_log]


class MemoryStore(Store[MemoryTx]):
    """The kernel's tables and those of ``parts`` (StoreParts), in memory."""

    def __init__(self, parts: Iterable[StorePart] = ()) -> None:
        self.parts = check_parts(parts)
        self.tables = tables_of(self.parts)
        self.timestamp_columns = timestamp_columns_of(self.parts)
        self.runner_log: list[dict[str, Any]] = []
        for part in self.parts:
            part.memory_init(self)
        # the one transaction object, started afresh by each with-block
        self._tx: MemoryTx = _tx_class(tuple(part.memory_tx for part in self.parts))(self)
        self._readers: dict[str, Callable[[MemoryStore], list[dict[str, Any]]]] = {"runner_log": _runner_log}
        for part in self.parts:
            self._readers.update(part.memory_rows)
        # Re-entrant, so that a second ``transaction()`` in the thread holding the
        # lock gets through and finds ``_open`` set (an error, not a deadlock);
        # another thread just waits. No thread ids to look up on the hot path.
        self._lock = threading.RLock()
        self._open = False

    def __repr__(self) -> str:
        return "MemoryStore()"

    # -- transactions ---------------------------------------------------
    # The store's transaction is its own with-block (not base.Transaction)
    def transaction(self) -> MemoryTx:
        return self._tx

    def _begin(self) -> MemoryTx:
        return self._tx.__enter__()

    def _commit(self, tx: MemoryTx) -> None:
        if tx.undo:
            self.writes += 1
            tx.undo.clear()
        self._open = False
        self._lock.release()

    def _rollback(self, tx: MemoryTx) -> None:
        try:
            for undo in reversed(tx.undo):
                if type(undo) is tuple:  # a _put: the entry as it was
                    table, key, before = undo
                    if before is _MISSING:
                        del table[key]
                    else:
                        table[key] = before
                else:
                    undo()
        finally:
            tx.undo.clear()
            tx.s, tx.failed = self, None
            self._open = False
            self._lock.release()

    # -- reading whole tables -------------------------------------------
    def rows(self, table: str) -> list[dict[str, Any]]:
        with self._lock:  # another thread's transaction may be half applied
            if self._open:  # then it is this thread's own
                raise RuntimeError("rows() reads committed rows; call it outside the open transaction")
            reader = self._readers.get(table)
            if reader is None:
                raise KeyError(f"unknown table {table!r}")
            return reader(self)
