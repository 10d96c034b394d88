"""The leased-consumer design's tables in memory: the memory adapter of :mod:`.port`."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Container, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from fanoutsim.kernel.store.base import check_limit

from .port import (
    DEFAULT_DATABASE,
    TABLES,
    CheckpointRow,
    DeadLetterRow,
    EventRow,
    HistoryRow,
    LeaseConsumerRow,
    LeaseRow,
    LeaseTx,
    ResolutionRow,
    RetryRow,
    check_database,
)

if TYPE_CHECKING:  # the mixin joins MemoryTx at run time (compose_tx): its s, undo and writes are the mixin's
    from fanoutsim.kernel.store.memory import MemoryTx as _Host
else:
    _Host = object

RowT = TypeVar("RowT", bound=Mapping[str, object])
V = TypeVar("V")


class _Owned(TypedDict):
    """The keys every per-consumer row has (a lease, a retry, a dead letter, a resolution)."""

    consumer: str
    seq: int


OwnedT = TypeVar("OwnedT", bound=_Owned)


# -- the memory adapter -----------------------------------------------------------------
class LeaseTables:
    """One database's tables in memory, with the indexes that answer the port's reads."""

    __slots__ = (
        "events",
        "event_seqs",
        "event_ids",
        "event_parts",
        "lease_consumers",
        "cp_index",
        "res_index",
        "res_part",
        "leases",
        "leases_of",
        "retries",
        "dead_letters",
        "history",
    )

    def __init__(self) -> None:
        self.events: dict[int, EventRow] = {}
        self.event_seqs: list[int] = []  # sorted
        self.event_ids: dict[str, int] = {}
        self.event_parts: dict[str, list[int]] = {}  # partition -> its seqs, sorted
        self.lease_consumers: dict[str, LeaseConsumerRow] = {}
        self.cp_index: dict[str, dict[str, CheckpointRow]] = {}  # consumer -> partition -> checkpoint row
        # consumer -> partition -> event_id -> row
        self.res_index: dict[str, dict[str, dict[str, ResolutionRow]]] = {}
        self.res_part: dict[tuple[str, str], str] = {}  # (consumer, event_id) -> partition
        self.leases: dict[tuple[str, str], LeaseRow] = {}
        self.leases_of: dict[str, dict[str, LeaseRow]] = {}  # consumer -> event_id -> its lease: a pull's read
        self.retries: dict[tuple[str, str], RetryRow] = {}
        self.dead_letters: dict[tuple[str, str], DeadLetterRow] = {}
        self.history: HistoryRow = {"incarnation": 1, "last_commit": 0, "last_seq": 0, "leases_granted": 0}


# Any: the store takes a part's state as attributes MemoryStore does not declare
def memory_init(s: Any) -> None:
    """The leased-consumer design's tables on a new MemoryStore: each database's
    in ``s.lease_dbs`` (the default one's from the start); ``s.lease_db`` the
    current one's name and ``s.lease_tables`` its tables (read by every call)."""
    s.lease_dbs = {DEFAULT_DATABASE: LeaseTables()}
    s.lease_db = DEFAULT_DATABASE
    s.lease_tables = s.lease_dbs[DEFAULT_DATABASE]


def _columns(row: RowT, table: str) -> RowT:
    """``row`` with ``table``'s columns only, in their order (a caller's extra keys are not stored)."""
    cols = TABLES[table]
    if tuple(row) == cols:  # the engine's rows: a copy at C speed
        return cast(RowT, dict(row))
    return cast(RowT, {k: row[k] for k in cols})


def _past(cps: dict[str, CheckpointRow], part: str, after: int) -> int:
    """Where a consumer's window of ``part`` starts: past ``after``, or past its checkpoint there."""
    cp = cps.get(part)
    return after if cp is None or cp["seq"] < after else cp["seq"]


def _window(events: dict[int, EventRow], seqs: list[int], past: int, limit: int) -> list[EventRow]:
    """The first ``limit`` events of one partition's ``seqs`` past ``past``."""
    if seqs[-1] <= past:
        return []
    i = bisect_right(seqs, past)
    return [events[q] for q in seqs[i : i + limit]]


def _drop_event(s: LeaseTables, seq: int) -> EventRow:
    row = s.events.pop(seq)
    del s.event_seqs[bisect_left(s.event_seqs, seq)]
    del s.event_ids[row["event_id"]]
    part = s.event_parts[row["partition"]]
    del part[bisect_left(part, seq)]
    if not part:
        del s.event_parts[row["partition"]]
    return row


def _restore_event(s: LeaseTables, row: EventRow) -> None:
    seq = row["seq"]
    s.events[seq] = row
    insort(s.event_seqs, seq)
    s.event_ids[row["event_id"]] = seq
    insort(s.event_parts.setdefault(row["partition"], []), seq)


def _add_lease(s: LeaseTables, key: tuple[str, str], row: LeaseRow) -> None:
    s.leases[key] = row
    s.leases_of.setdefault(key[0], {})[key[1]] = row


def _drop_lease(s: LeaseTables, key: tuple[str, str]) -> LeaseRow:
    row = s.leases.pop(key)
    of = s.leases_of[key[0]]
    del of[key[1]]
    if not of:
        del s.leases_of[key[0]]
    return row


def _seq(row: LeaseRow | ResolutionRow) -> int:
    return row["seq"]


def _add_resolution(s: LeaseTables, row: ResolutionRow) -> None:
    c, eid, part = row["consumer"], row["event_id"], row["partition"]
    s.res_index.setdefault(c, {}).setdefault(part, {})[eid] = row
    s.res_part[(c, eid)] = part


def _drop_resolution(s: LeaseTables, consumer: str, event_id: str) -> ResolutionRow:
    part = s.res_part.pop((consumer, event_id))
    by = s.res_index[consumer]
    row = by[part].pop(event_id)
    if not by[part]:
        del by[part]
        if not by:
            del s.res_index[consumer]
    return row


class LeaseMemoryTx(LeaseTx, _Host):
    """The leased-consumer design's methods of the memory adapter's transaction
    (a mixin of :class:`~fanoutsim.kernel.store.memory.MemoryTx`). Each method
    reads the current database's tables as ``self.s.lease_tables`` itself: a
    helper's call for it was 2 % of an ack's instructions. Reads of events,
    leases, retries, checkpoints, resolutions and the history return the
    tables' own rows (a copy each was 3.5 %): a write replaces a row, never
    changes it in place."""

    __slots__ = ()

    def use_database(self, name: str) -> None:
        s = self.s
        if s.lease_db == name:
            return
        check_database(name)
        if self.undo:
            raise RuntimeError("use_database must come first in a transaction")
        if name not in s.lease_dbs:
            s.lease_dbs[name] = LeaseTables()
        s.lease_db, s.lease_tables = name, s.lease_dbs[name]

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        s: LeaseTables = self.s.lease_tables
        return _dicts(_ROWS[table](s))

    def clear_database(self) -> None:
        store = self.s  # (the undo runs where a failed write may have replaced self.s)
        dbs: dict[str, LeaseTables] = store.lease_dbs
        name = store.lease_db
        before = dbs[name]  # the undo of a write before this one still holds these tables
        dbs[name] = store.lease_tables = LeaseTables()

        def undo() -> None:
            dbs[name] = before
            if store.lease_db == name:
                store.lease_tables = before

        self.undo.append(undo)

    def get_history(self) -> HistoryRow:
        s: LeaseTables = self.s.lease_tables
        return s.history

    def lock_history(self) -> HistoryRow:
        s: LeaseTables = self.s.lease_tables
        return s.history.copy()  # the caller's own: it counts in it, then writes it back

    def lock_lease_consumer(self, consumer: str) -> LeaseConsumerRow | None:
        return self.get_lease_consumer(consumer)

    def lock_lease_consumers(self) -> list[LeaseConsumerRow]:
        return self.list_lease_consumers()

    def set_history(self, row: HistoryRow) -> None:
        s: LeaseTables = self.s.lease_tables
        before = s.history
        s.history = _columns(row, "history")

        def undo() -> None:
            s.history = before

        self.undo.append(undo)

    def insert_event(self, row: EventRow) -> None:
        s: LeaseTables = self.s.lease_tables
        seq = self._unique(s.events, row["seq"], "events.seq")
        self._unique(s.event_ids, row["event_id"], "events.event_id")
        _restore_event(s, _columns(row, "events"))
        self.undo.append(lambda: _drop_event(s, seq))

    def get_event(self, event_id: str) -> EventRow | None:
        s: LeaseTables = self.s.lease_tables
        seq = s.event_ids.get(event_id)
        return None if seq is None else s.events[seq]

    def get_event_at(self, seq: int) -> EventRow | None:
        s: LeaseTables = self.s.lease_tables
        return s.events.get(seq)

    def event_window(self, consumer: str, after: int, limit: int, partition: str | None = None) -> list[EventRow]:
        s: LeaseTables = self.s.lease_tables
        limit = check_limit(limit)
        cps = s.cp_index.get(consumer) or {}
        parts = s.event_parts
        if partition is not None:  # an ack's walk: one partition, already in seq order
            seqs = parts.get(partition)
            return [] if seqs is None else _window(s.events, seqs, _past(cps, partition, after), limit)
        out: list[int] = []
        for part, seqs in parts.items():
            cp = cps.get(part)  # (_past, inline: a pull passes every partition)
            past = after if cp is None or cp["seq"] < after else cp["seq"]
            if seqs[-1] > past:  # (a partition read to its end has nothing to search)
                i = bisect_right(seqs, past)
                out += seqs[i : i + limit]
        out.sort()
        events = s.events
        return [events[q] for q in out]

    def delete_event(self, seq: int) -> bool:
        s: LeaseTables = self.s.lease_tables
        if seq not in s.events:
            return False
        row = _drop_event(s, seq)
        self.undo.append(partial(_restore_event, s, row))
        return True

    def event_bounds(self) -> tuple[int | None, int | None]:
        s: LeaseTables = self.s.lease_tables
        seqs = s.event_seqs
        return (seqs[0], seqs[-1]) if seqs else (None, None)

    def prune_events(self, cutoff: int, fence: int | None, limit: int | None = None) -> list[str]:
        s: LeaseTables = self.s.lease_tables
        if limit is not None:
            check_limit(limit)
        doomed = [
            q
            for q in s.event_seqs
            if s.events[q]["committed_at"] < cutoff and (fence is None or s.events[q]["commit_seq"] < fence)
        ]
        if limit is not None:
            doomed = doomed[:limit]
        out = []
        for q in doomed:
            row = _drop_event(s, q)
            self.undo.append(partial(_restore_event, s, row))
            out.append(row["event_id"])
        return out

    def get_lease_consumer(self, consumer: str) -> LeaseConsumerRow | None:
        s: LeaseTables = self.s.lease_tables
        row = s.lease_consumers.get(consumer)
        return None if row is None else row.copy()

    def put_lease_consumer(self, row: LeaseConsumerRow) -> None:
        s: LeaseTables = self.s.lease_tables
        self._put(s.lease_consumers, row["consumer"], _columns(row, "lease_consumers"))

    def delete_lease_consumer(self, consumer: str) -> bool:
        s: LeaseTables = self.s.lease_tables
        return self._pop(s.lease_consumers, consumer)

    def list_lease_consumers(self) -> list[LeaseConsumerRow]:
        s: LeaseTables = self.s.lease_tables
        c = s.lease_consumers
        return [c[k].copy() for k in sorted(c)]

    def list_checkpoints(self, consumer: str) -> list[CheckpointRow]:
        s: LeaseTables = self.s.lease_tables
        cps = s.cp_index.get(consumer, {})
        return [cps[p] for p in sorted(cps)]

    def set_checkpoint(self, consumer: str, partition: str, seq: int, commit_seq: int) -> None:
        s: LeaseTables = self.s.lease_tables
        self._index_put(
            s.cp_index,
            consumer,
            partition,
            CheckpointRow(consumer=consumer, partition=partition, seq=seq, commit_seq=commit_seq),
        )

    def clear_checkpoints(self, consumer: str) -> int:
        s: LeaseTables = self.s.lease_tables
        return self._index_clear(s.cp_index, consumer)

    def _new_key(
        self, keys: Container[tuple[str, str]], table: str, row: ResolutionRow | LeaseRow | DeadLetterRow
    ) -> tuple[str, str]:
        """``row``'s key, ``(consumer, event_id)``; one ``keys`` holds already fails the transaction."""
        return self._unique(keys, (row["consumer"], row["event_id"]), table)

    def insert_resolution(self, row: ResolutionRow) -> None:
        s: LeaseTables = self.s.lease_tables
        key = self._new_key(s.res_part, "resolutions", row)
        _add_resolution(s, _columns(row, "resolutions"))
        self.undo.append(lambda: _drop_resolution(s, *key))

    def list_resolutions(self, consumer: str, partition: str | None = None) -> list[ResolutionRow]:
        s: LeaseTables = self.s.lease_tables
        by = s.res_index.get(consumer)
        if not by:  # (most consumers most of the time: every event resolved in order)
            return []
        if partition is not None:
            rows = list(by.get(partition, {}).values())
        else:
            rows = [r for held in by.values() for r in held.values()]
        if len(rows) > 1:
            rows.sort(key=_seq)
        return rows

    def delete_resolution(self, consumer: str, event_id: str) -> bool:
        s: LeaseTables = self.s.lease_tables
        if (consumer, event_id) not in s.res_part:
            return False
        row = _drop_resolution(s, consumer, event_id)
        self.undo.append(lambda: _add_resolution(s, row))
        return True

    def clear_resolutions(self, consumer: str) -> int:
        s: LeaseTables = self.s.lease_tables
        rows = [r for by in s.res_index.get(consumer, {}).values() for r in by.values()]
        for r in rows:
            _drop_resolution(s, consumer, r["event_id"])

        def undo() -> None:
            for r in rows:
                _add_resolution(s, r)

        self.undo.append(undo)
        return len(rows)

    def _index_put(self, index: dict[str, dict[str, V]], outer: str, inner: str, value: V) -> None:
        """Set ``index[outer][inner] = value`` with its undo."""
        by = index.setdefault(outer, {})
        had, old = inner in by, by.get(inner)
        by[inner] = value

        def undo() -> None:
            if had:
                index.setdefault(outer, {})[inner] = cast(V, old)  # had: old is the value that was there
            else:
                index.get(outer, {}).pop(inner, None)

        self.undo.append(undo)

    def _index_clear(self, index: dict[str, dict[str, V]], outer: str) -> int:
        gone = index.pop(outer, None)
        if not gone:
            return 0
        self.undo.append(lambda: index.__setitem__(outer, gone))
        return len(gone)

    def insert_lease(self, row: LeaseRow) -> None:
        s: LeaseTables = self.s.lease_tables
        key = self._new_key(s.leases, "leases", row)
        _add_lease(s, key, _columns(row, "leases"))
        self.undo.append(lambda: _drop_lease(s, key))

    def get_lease(self, consumer: str, event_id: str) -> LeaseRow | None:
        s: LeaseTables = self.s.lease_tables
        return s.leases.get((consumer, event_id))

    def list_leases(self, consumer: str | None = None) -> list[LeaseRow]:
        s: LeaseTables = self.s.lease_tables
        if consumer is None:
            return _by_consumer_seq(s.leases, None, shared=True)
        rows = list(s.leases_of.get(consumer, {}).values())
        rows.sort(key=_seq)
        return rows

    def delete_lease(self, consumer: str, event_id: str) -> bool:
        s: LeaseTables = self.s.lease_tables
        key = (consumer, event_id)
        if key not in s.leases:
            return False
        row = _drop_lease(s, key)
        self.undo.append(lambda: _add_lease(s, key, row))
        return True

    def has_lease_due(self, now: int) -> bool:
        s: LeaseTables = self.s.lease_tables
        return any(r["expires_at"] <= now for r in s.leases.values())

    def expired_leases(self, now: int, limit: int) -> list[LeaseRow]:
        s: LeaseTables = self.s.lease_tables
        rows = [r for r in s.leases.values() if r["expires_at"] <= now]
        rows.sort(key=lambda r: (r["expires_at"], r["consumer"], r["seq"]))
        return [r.copy() for r in rows[: check_limit(limit)]]

    def put_retry(self, row: RetryRow) -> None:
        s: LeaseTables = self.s.lease_tables
        self._put(s.retries, (row["consumer"], row["event_id"]), _columns(row, "retries"))

    def get_retry(self, consumer: str, event_id: str) -> RetryRow | None:
        s: LeaseTables = self.s.lease_tables
        return s.retries.get((consumer, event_id))

    def delete_retry(self, consumer: str, event_id: str) -> bool:
        s: LeaseTables = self.s.lease_tables
        return self._pop(s.retries, (consumer, event_id))

    def list_retries(self, consumer: str | None = None) -> list[RetryRow]:
        s: LeaseTables = self.s.lease_tables
        return _by_consumer_seq(s.retries, consumer, shared=True)

    def clear_retries(self, consumer: str) -> int:
        s: LeaseTables = self.s.lease_tables
        return self._clear(s.retries, consumer)

    def insert_dead_letter(self, row: DeadLetterRow) -> None:
        s: LeaseTables = self.s.lease_tables
        self._put(s.dead_letters, self._new_key(s.dead_letters, "dead_letters", row), _columns(row, "dead_letters"))

    def list_dead_letters(self, consumer: str | None = None) -> list[DeadLetterRow]:
        s: LeaseTables = self.s.lease_tables
        return _by_consumer_seq(s.dead_letters, consumer)

    def clear_dead_letters(self, consumer: str) -> int:
        s: LeaseTables = self.s.lease_tables
        return self._clear(s.dead_letters, consumer)


def _by_consumer_seq(
    table: Mapping[tuple[str, str], OwnedT], consumer: str | None, *, shared: bool = False
) -> list[OwnedT]:
    """``table``'s rows (of ``consumer``'s, if given) by consumer and seq: copies,
    or with ``shared`` the table's own (a transaction's read, not a whole table's)."""
    rows = [r for r in table.values() if consumer is None or r["consumer"] == consumer]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return rows if shared else [r.copy() for r in rows]


def _resolution_rows(s: LeaseTables) -> list[ResolutionRow]:
    rows = [r for by in s.res_index.values() for part in by.values() for r in part.values()]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [r.copy() for r in rows]


# table -> its committed rows in the contract's order, read from one database's tables
_ROWS: dict[str, Callable[[LeaseTables], Sequence[Mapping[str, object]]]] = {
    "events": lambda s: [s.events[q].copy() for q in s.event_seqs],
    "lease_consumers": lambda s: [s.lease_consumers[k].copy() for k in sorted(s.lease_consumers)],
    "checkpoints": lambda s: [s.cp_index[c][p].copy() for c in sorted(s.cp_index) for p in sorted(s.cp_index[c])],
    "resolutions": _resolution_rows,
    "leases": lambda s: _by_consumer_seq(s.leases, None),
    "retries": lambda s: _by_consumer_seq(s.retries, None),
    "dead_letters": lambda s: _by_consumer_seq(s.dead_letters, None),
    "history": lambda s: [s.history.copy()],
}


def _dicts(rows: Sequence[Mapping[str, object]]) -> list[dict[str, Any]]:
    """Typed rows as the port's whole-table reads hand them on: a TypedDict row is a plain dict at run time."""
    return cast(list[dict[str, Any]], rows)


def _of_default(
    read: Callable[[LeaseTables], Sequence[Mapping[str, object]]],
) -> Callable[[Any], list[dict[str, Any]]]:
    """A reader of the store's rows (``store.rows``, given the store): the default database's."""
    return lambda store: _dicts(read(store.lease_dbs[DEFAULT_DATABASE]))


MEMORY_ROWS = {table: _of_default(read) for table, read in _ROWS.items()}
