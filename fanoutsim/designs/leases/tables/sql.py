"""The leased-consumer design's tables in SQL: the DuckDB adapter of :mod:`.port` (PostgreSQL runs
the same statements through the kernel's dialect layer); its statements are :mod:`.statements`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from fanoutsim.kernel.store.base import check_limit
from fanoutsim.kernel.store.base import row_of as _row

from . import port
from . import statements as sql
from .port import DEFAULT_DATABASE, TABLES, LeaseTx, check_database

if TYPE_CHECKING:  # the mixin joins DuckDBTx (or PostgresTx, its twin) at run time: their _run and hints are its own
    from fanoutsim.kernel.store.duckdb import DuckDBTx as _Host
    from fanoutsim.kernel.store.duckdb import Params
else:
    _Host = object

RowT = TypeVar("RowT", bound=Mapping[str, object])


class _Table(Generic[RowT]):
    """A table's columns, and the row type a SELECT of them is."""

    __slots__ = ("cols",)

    def __init__(self, name: str) -> None:
        self.cols = TABLES[name]

    def row(self, values: Iterable[Any]) -> RowT:
        return cast(RowT, _row(self.cols, values))  # the statements select the table's columns, in order


_EVENTS: _Table[port.EventRow] = _Table("events")
_CONSUMERS: _Table[port.LeaseConsumerRow] = _Table("lease_consumers")
_CHECKPOINTS: _Table[port.CheckpointRow] = _Table("checkpoints")
_RESOLUTIONS: _Table[port.ResolutionRow] = _Table("resolutions")
_LEASES: _Table[port.LeaseRow] = _Table("leases")
_RETRIES: _Table[port.RetryRow] = _Table("retries")
_DEAD_LETTERS: _Table[port.DeadLetterRow] = _Table("dead_letters")
_HISTORY: _Table[port.HistoryRow] = _Table("history")

# -- the DuckDB adapter ---------------------------------------------------------------
# a connection -> (the connection, its current database), for those that left the default
_CURRENT: dict[int, tuple[object, str]] = {}


# The adapter's hint (see DuckDBTx), one per database: a lower bound of the
# earliest committed ``expires_at`` (_NO_LEASE: none), lowered by each committed
# lease, never raised by a delete; dropped after a commit that read the expired
# leases (reloaded by one statement when next asked). Absent: not known yet.
_EARLIEST = "leases.earliest"
_NO_LEASE = 2**63


class LeaseDuckDBTx(LeaseTx, _Host):
    """The leased-consumer design's methods of the DuckDB adapter's transaction
    (a mixin of :class:`~fanoutsim.kernel.store.duckdb.DuckDBTx`).

    :meth:`has_lease_due` answers from a hint when it can: per database, a
    lower bound of the earliest committed expiry, loaded by one statement the
    first time it is asked for and changed only after a commit; a transaction
    that has written asks SQL, since its own rows are not in it yet."""

    __slots__ = ()

    def _database(self) -> str:
        cur = _CURRENT.get(id(self.c))
        return DEFAULT_DATABASE if cur is None or cur[0] is not self.c else cur[1]

    def _earliest(self) -> str:
        """The key of this database's hint."""
        return f"{_EARLIEST}:{self._database()}"

    def use_database(self, name: str) -> None:
        # the connection's search path is the current database: a named one is
        # the schema ``riff_<name>`` (made on first use, outside the transaction:
        # an empty database), found before ``main`` where the kernel's tables are
        if self._database() == name:
            return
        check_database(name)
        if self.begun:  # as the memory adapter: after a write, the transaction belongs to its database
            raise RuntimeError("use_database must come first in a transaction")
        if name == DEFAULT_DATABASE:
            self.enter_namespace(None)
        else:
            self.enter_namespace(f"riff_{name}", sql.LEASE_SCHEMA + sql.RESOLUTIONS_SCHEMA + sql.FIRST_HISTORY)
        _CURRENT[id(self.c)] = (self.c, name)

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        return [_row(TABLES[table], r) for r in self._run(sql.HERE_ROWS[table]).fetchall()]

    def clear_database(self) -> None:
        for table in TABLES:
            self._run(f"DELETE FROM {table}")
        self._run(sql.FIRST_HISTORY)

    def _one(self, table: _Table[RowT], statement: str, params: Params) -> RowT | None:
        r = self._run(statement, params).fetchone()
        return None if r is None else table.row(r)

    def _all(self, table: _Table[RowT], statement: str, params: Params) -> list[RowT]:
        return [table.row(r) for r in self._run(statement, params).fetchall()]

    def _history(self, statement: str) -> port.HistoryRow:
        return cast(port.HistoryRow, self._one(_HISTORY, statement, None))  # every database has its history row

    def get_history(self) -> port.HistoryRow:
        return self._history(sql.GET_HISTORY)

    def set_history(self, row: port.HistoryRow) -> None:
        self._run(sql.SET_HISTORY, _values(row, "history"))

    def lock_history(self) -> port.HistoryRow:
        return self._history(sql.LOCK_HISTORY if self.row_locks else sql.GET_HISTORY)

    def lock_lease_consumer(self, consumer: str) -> port.LeaseConsumerRow | None:
        return self._one(_CONSUMERS, sql.LOCK_LEASE_CONSUMER if self.row_locks else sql.GET_LEASE_CONSUMER, [consumer])

    def lock_lease_consumers(self) -> list[port.LeaseConsumerRow]:
        return self._all(
            _CONSUMERS, sql.LOCK_LEASE_CONSUMERS if self.row_locks else sql.HERE_ROWS["lease_consumers"], None
        )

    def insert_event(self, row: port.EventRow) -> None:
        self._run(sql.INSERT_EVENT, _values(row, "events"))

    def get_event(self, event_id: str) -> port.EventRow | None:
        return self._one(_EVENTS, sql.GET_EVENT, [event_id])

    def get_event_at(self, seq: int) -> port.EventRow | None:
        return self._one(_EVENTS, sql.GET_EVENT_AT, [seq])

    def event_window(self, consumer: str, after: int, limit: int, partition: str | None = None) -> list[port.EventRow]:
        return self._all(_EVENTS, sql.EVENT_WINDOW, [consumer, after, partition, partition, check_limit(limit)])

    def delete_event(self, seq: int) -> bool:
        return self._run(sql.DELETE_EVENT, [seq]).fetchone() is not None

    def event_bounds(self) -> tuple[int | None, int | None]:
        bounds: tuple[int | None, int | None] = tuple(_one_row(self._run(sql.EVENT_BOUNDS).fetchone()))
        return bounds

    def prune_events(self, cutoff: int, fence: int | None, limit: int | None = None) -> list[str]:
        limit = 2**62 if limit is None else check_limit(limit)
        rows = self._run(sql.PRUNE_EVENTS, [cutoff, fence, fence, limit]).fetchall()
        return [eid for _, eid in sorted(rows)]

    def get_lease_consumer(self, consumer: str) -> port.LeaseConsumerRow | None:
        return self._one(_CONSUMERS, sql.GET_LEASE_CONSUMER, [consumer])

    def put_lease_consumer(self, row: port.LeaseConsumerRow) -> None:
        self._run(sql.PUT_LEASE_CONSUMER, _values(row, "lease_consumers"))

    def delete_lease_consumer(self, consumer: str) -> bool:
        return self._run(sql.DELETE_LEASE_CONSUMER, [consumer]).fetchone() is not None

    def list_lease_consumers(self) -> list[port.LeaseConsumerRow]:
        return self._all(_CONSUMERS, sql.HERE_ROWS["lease_consumers"], None)

    def list_checkpoints(self, consumer: str) -> list[port.CheckpointRow]:
        return self._all(_CHECKPOINTS, sql.LIST_CHECKPOINTS, [consumer])

    def set_checkpoint(self, consumer: str, partition: str, seq: int, commit_seq: int) -> None:
        self._run(sql.SET_CHECKPOINT, [consumer, partition, seq, commit_seq])

    def clear_checkpoints(self, consumer: str) -> int:
        return len(self._run(sql.CLEAR_CHECKPOINTS, [consumer]).fetchall())

    def insert_resolution(self, row: port.ResolutionRow) -> None:
        self._run(sql.INSERT_RESOLUTION, _values(row, "resolutions"))

    def list_resolutions(self, consumer: str, partition: str | None = None) -> list[port.ResolutionRow]:
        return self._all(_RESOLUTIONS, sql.LIST_RESOLUTIONS, [consumer, partition, partition])

    def delete_resolution(self, consumer: str, event_id: str) -> bool:
        return self._run(sql.DELETE_RESOLUTION, [consumer, event_id]).fetchone() is not None

    def clear_resolutions(self, consumer: str) -> int:
        return len(self._run(sql.CLEAR_RESOLUTIONS, [consumer]).fetchall())

    def insert_lease(self, row: port.LeaseRow) -> None:
        self._run(sql.INSERT_LEASE, _values(row, "leases"))
        hints, key, expires = self.hints, self._earliest(), row["expires_at"]

        def committed() -> None:
            earliest: int | None = hints.get(key)
            if earliest is not None and expires < earliest:
                hints[key] = expires

        self._on_commit(committed)

    def has_lease_due(self, now: int) -> bool:
        if self.begun:
            due: bool = _one_row(self._run(sql.HAS_LEASE_DUE, [now]).fetchone())[0]  # SQL's EXISTS
            return due
        key = self._earliest()
        earliest: int | None = self.hints.get(key)
        if earliest is None:
            found: int | None = _one_row(self._run(sql.EARLIEST_EXPIRY).fetchone())[0]
            earliest = self.hints[key] = _NO_LEASE if found is None else found
        return earliest <= now

    def get_lease(self, consumer: str, event_id: str) -> port.LeaseRow | None:
        return self._one(_LEASES, sql.GET_LEASE, [consumer, event_id])

    def list_leases(self, consumer: str | None = None) -> list[port.LeaseRow]:
        return self._all(_LEASES, sql.LIST_LEASES, [consumer, consumer])

    def delete_lease(self, consumer: str, event_id: str) -> bool:
        return self._run(sql.DELETE_LEASE, [consumer, event_id]).fetchone() is not None

    def expired_leases(self, now: int, limit: int) -> list[port.LeaseRow]:
        rows = self._all(_LEASES, sql.EXPIRED_LEASES, [now, check_limit(limit)])
        # recovery turns them into retries, or the hint was below the earliest
        # lease (acked since): it is read again once this commits
        hints, key = self.hints, self._earliest()
        self._on_commit(lambda: hints.pop(key, None))
        return rows

    def put_retry(self, row: port.RetryRow) -> None:
        self._run(sql.PUT_RETRY, _values(row, "retries"))

    def get_retry(self, consumer: str, event_id: str) -> port.RetryRow | None:
        return self._one(_RETRIES, sql.GET_RETRY, [consumer, event_id])

    def delete_retry(self, consumer: str, event_id: str) -> bool:
        return self._run(sql.DELETE_RETRY, [consumer, event_id]).fetchone() is not None

    def list_retries(self, consumer: str | None = None) -> list[port.RetryRow]:
        return self._all(_RETRIES, sql.LIST_RETRIES, [consumer, consumer])

    def clear_retries(self, consumer: str) -> int:
        return len(self._run(sql.CLEAR_RETRIES, [consumer]).fetchall())

    def insert_dead_letter(self, row: port.DeadLetterRow) -> None:
        self._run(sql.INSERT_DEAD_LETTER, _values(row, "dead_letters"))

    def list_dead_letters(self, consumer: str | None = None) -> list[port.DeadLetterRow]:
        return self._all(_DEAD_LETTERS, sql.LIST_DEAD_LETTERS, [consumer, consumer])

    def clear_dead_letters(self, consumer: str) -> int:
        return len(self._run(sql.CLEAR_DEAD_LETTERS, [consumer]).fetchall())


def _values(row: Mapping[str, object], table: str) -> list[object]:
    """``row``'s values in ``table``'s column order: an INSERT's parameters."""
    return [row[k] for k in TABLES[table]]


def _one_row(r: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row of an aggregate's answer, which always has one."""
    return cast(tuple[Any, ...], r)
