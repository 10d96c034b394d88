"""The leased-consumer design's tables: its part of the store (seed 003).

The event log (``events``), durable consumers (``lease_consumers``) and their
per-partition ``checkpoints`` and sparse ``resolutions``, ``leases``,
``retries``, ``dead_letters``, and
the one ``history`` row (the incarnation a restore bumps, and the log's
counters): their columns, their part of the ``Tx`` interface, the memory
adapter's state and methods, the DuckDB schema and statements, composed by the
kernel's store as :data:`PART`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
import re
from bisect import bisect_left, bisect_right, insort
from types import SimpleNamespace

from fanoutsim.designs.leases import tables_sql as sql
from fanoutsim.kernel.store.base import StorePart, check_limit
from fanoutsim.kernel.store.base import row_of as _row

# -- the tables ----------------------------------------------------------------------
# table -> columns, in the order DataFrames show them: the event log, consumers,
# their per-partition checkpoints and sparse resolutions, leases, retries, dead
# letters, the history row
TABLES: dict[str, tuple[str, ...]] = {
    "events": ("seq", "event_id", "commit_seq", "ordinal", "partition", "kind", "payload", "committed_at"),
    "lease_consumers": ("consumer", "start_seq", "start_commit", "batch_limit", "in_flight_limit",
                        "lease_seconds", "revision"),
    "checkpoints": ("consumer", "partition", "seq", "commit_seq"),
    "resolutions": ("consumer", "event_id", "seq", "partition", "commit_seq", "kind"),
    "leases": ("consumer", "event_id", "seq", "partition", "token", "incarnation", "attempt",
               "leased_at", "expires_at"),
    "retries": ("consumer", "event_id", "seq", "partition", "attempts", "not_before", "error"),
    "dead_letters": ("consumer", "event_id", "seq", "partition", "attempts", "error", "payload", "dead_at"),
    "history": ("incarnation", "last_commit", "last_seq", "leases_granted"),
}
TIMESTAMP_COLUMNS = frozenset({"committed_at", "leased_at", "expires_at", "not_before", "dead_at"})


# -- the interface -------------------------------------------------------------------
class LeaseTx(ABC):
    """The leased-consumer design's part of :class:`~fanoutsim.kernel.store.base.Tx`."""

    __slots__ = ()

    # Orderings: events by ``seq``; lease_consumers by ``consumer``;
    # checkpoints by ``(consumer, partition)``; leases, retries, dead_letters
    # and resolutions by ``(consumer, seq)``. ``history`` is one row.

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
    def table_rows(self, table: str) -> list[dict]:
        """Every row of ``table`` of the current database, in the contract's order."""

    @abstractmethod
    def clear_database(self) -> None:
        """Delete every row of the current database's tables and put back the
        first history row (incarnation 1, counters 0): the start of a restore."""

    # -- history: the incarnation and the log's counters ----------------------
    @abstractmethod
    def get_history(self) -> dict:
        """The one history row: ``incarnation`` (1 at first), ``last_commit``,
        ``last_seq`` and ``leases_granted`` (0 at first); they only grow."""

    @abstractmethod
    def set_history(self, row: dict) -> None:
        """Overwrite the history row with ``row``'s four columns."""

    # -- locks: several processes on one database (see Tx.row_locks) ------------
    # Every transition of a consumer locks the consumer's row before it reads
    # anything else of it, and every change of the log (a publish, a lease
    # grant's counter, retention, a position resolved against the horizon) locks
    # the history row: consumers first (several: in name order), history last.
    # A store one process holds runs one transaction at a time: a lock is a read.
    @abstractmethod
    def lock_history(self) -> dict:
        """The history row, locked until this transaction ends."""

    @abstractmethod
    def lock_lease_consumer(self, consumer: str) -> dict | None:
        """The consumer's row, locked until this transaction ends (None: no such consumer)."""

    @abstractmethod
    def lock_lease_consumers(self) -> list[dict]:
        """Every consumer's row, by name, each locked until this transaction ends."""

    # -- events -----------------------------------------------------------------
    @abstractmethod
    def insert_event(self, row: dict) -> None:
        """Append one event; a ``seq`` or ``event_id`` already there raises :class:`KeyError`."""

    @abstractmethod
    def get_event(self, event_id: str) -> dict | None: ...

    @abstractmethod
    def get_event_at(self, seq: int) -> dict | None:
        """The retained event at log position ``seq``, or None."""

    @abstractmethod
    def event_window(self, consumer: str, after: int, limit: int, partition: str | None = None) -> list[dict]:
        """Per partition (only ``partition``, if given), the first ``limit``
        retained events with ``seq > after`` and past ``consumer``'s checkpoint
        of that partition; all of them by ``seq``. (``limit`` 1: each
        partition's first required event.)"""

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
    def get_lease_consumer(self, consumer: str) -> dict | None: ...

    @abstractmethod
    def put_lease_consumer(self, row: dict) -> None:
        """Insert or overwrite one consumer row."""

    @abstractmethod
    def delete_lease_consumer(self, consumer: str) -> bool:
        """Delete the consumer's row (not its other rows); whether there was one."""

    @abstractmethod
    def list_lease_consumers(self) -> list[dict]: ...

    @abstractmethod
    def list_checkpoints(self, consumer: str) -> list[dict]:
        """The consumer's checkpoint rows, by partition: ``seq`` and
        ``commit_seq`` of the last event of the contiguous done prefix."""

    @abstractmethod
    def set_checkpoint(self, consumer: str, partition: str, seq: int, commit_seq: int) -> None: ...

    @abstractmethod
    def clear_checkpoints(self, consumer: str) -> int:
        """Delete the consumer's checkpoints; how many there were."""

    # -- sparse resolutions: done events past a checkpoint ----------------------
    @abstractmethod
    def insert_resolution(self, row: dict) -> None:
        """Hold one resolved event past its partition's checkpoint; the same
        ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_resolutions(self, consumer: str, partition: str | None = None) -> list[dict]: ...

    @abstractmethod
    def delete_resolution(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def clear_resolutions(self, consumer: str) -> int:
        """Delete the consumer's resolutions; how many there were."""

    # -- leases -------------------------------------------------------------------
    @abstractmethod
    def insert_lease(self, row: dict) -> None:
        """A lease of ``(consumer, event_id)``; a second one raises :class:`KeyError`."""

    @abstractmethod
    def get_lease(self, consumer: str, event_id: str) -> dict | None: ...

    @abstractmethod
    def list_leases(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def delete_lease(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def expired_leases(self, now: int, limit: int) -> list[dict]:
        """Leases with ``expires_at <= now``, by ``(expires_at, consumer, seq)``."""

    @abstractmethod
    def has_lease_due(self, now: int) -> bool:
        """Whether :meth:`expired_leases` at ``now`` could return a row (the
        earliest ``expires_at`` is at or before ``now``). False means certainly
        none; an adapter unsure (one answering from a bound of its committed
        rows) answers True, and recovery reads as before."""

    # -- retries and dead letters ---------------------------------------------------
    @abstractmethod
    def put_retry(self, row: dict) -> None:
        """Insert or overwrite the retry of ``(consumer, event_id)``."""

    @abstractmethod
    def get_retry(self, consumer: str, event_id: str) -> dict | None: ...

    @abstractmethod
    def delete_retry(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def list_retries(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def clear_retries(self, consumer: str) -> int:
        """Delete the consumer's retries; how many there were."""

    @abstractmethod
    def insert_dead_letter(self, row: dict) -> None:
        """Retain a dead letter; the same ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_dead_letters(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def clear_dead_letters(self, consumer: str) -> int:
        """Delete the consumer's dead letters; how many there were."""


# -- the memory adapter -----------------------------------------------------------------
DEFAULT_DATABASE = "default"
_DB_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
# the memory adapter's attributes holding one database's tables
_ATTRS = ("events", "event_seqs", "event_ids", "event_parts", "lease_consumers", "cp_index", "res_index",
          "res_part", "leases", "retries", "dead_letters", "history")


def check_database(name) -> str:
    """A database name: lowercase letters, digits and ``_``, starting with a letter, at most 63."""
    if not isinstance(name, str) or not _DB_NAME.fullmatch(name):
        raise ValueError(f"database must be a name of lowercase letters, digits and '_' starting with a "
                         f"letter (at most 63), got {name!r}")
    return name


def memory_init(s) -> None:
    """The leased-consumer design's tables on a new MemoryStore: the default
    database's as attributes of the store, a named one's as a namespace in
    ``s.lease_dbs``; ``s.lease_db`` the current one."""
    _empty(s)
    s.lease_dbs: dict[str, SimpleNamespace] = {}
    s.lease_db = DEFAULT_DATABASE


def _empty(s) -> None:
    s.events: dict[int, dict] = {}
    s.event_seqs: list[int] = []  # sorted
    s.event_ids: dict[str, int] = {}
    s.event_parts: dict[str, list[int]] = {}  # partition -> its seqs, sorted
    s.lease_consumers: dict[str, dict] = {}
    s.cp_index: dict[str, dict[str, dict]] = {}  # consumer -> partition -> checkpoint row
    s.res_index: dict[str, dict[str, dict[str, dict]]] = {}  # consumer -> partition -> event_id -> row
    s.res_part: dict[tuple[str, str], str] = {}  # (consumer, event_id) -> partition
    s.leases: dict[tuple[str, str], dict] = {}
    s.retries: dict[tuple[str, str], dict] = {}
    s.dead_letters: dict[tuple[str, str], dict] = {}
    s.history = {"incarnation": 1, "last_commit": 0, "last_seq": 0, "leases_granted": 0}


def _drop_event(s, seq: int) -> dict:
    row = s.events.pop(seq)
    del s.event_seqs[bisect_left(s.event_seqs, seq)]
    del s.event_ids[row["event_id"]]
    part = s.event_parts[row["partition"]]
    del part[bisect_left(part, seq)]
    if not part:
        del s.event_parts[row["partition"]]
    return row


def _restore_event(s, row: dict) -> None:
    seq = row["seq"]
    s.events[seq] = row
    insort(s.event_seqs, seq)
    s.event_ids[row["event_id"]] = seq
    insort(s.event_parts.setdefault(row["partition"], []), seq)


def _add_resolution(s, row: dict) -> None:
    c, eid, part = row["consumer"], row["event_id"], row["partition"]
    s.res_index.setdefault(c, {}).setdefault(part, {})[eid] = row
    s.res_part[(c, eid)] = part


def _drop_resolution(s, consumer: str, event_id: str) -> dict:
    part = s.res_part.pop((consumer, event_id))
    by = s.res_index[consumer]
    row = by[part].pop(event_id)
    if not by[part]:
        del by[part]
        if not by:
            del s.res_index[consumer]
    return row


class LeaseMemoryTx(LeaseTx):
    """The leased-consumer design's methods of the memory adapter's transaction
    (a mixin of :class:`~fanoutsim.kernel.store.memory.MemoryTx`)."""

    __slots__ = ()

    def _d(self):
        """The current database's tables (the store itself for the default one)."""
        s = self.s
        return s if s.lease_db == DEFAULT_DATABASE else s.lease_dbs[s.lease_db]

    def use_database(self, name):
        s = self.s
        if s.lease_db == name:
            return
        check_database(name)
        if self.undo:
            raise RuntimeError("use_database must come first in a transaction")
        if name != DEFAULT_DATABASE and name not in s.lease_dbs:
            ns = SimpleNamespace()
            _empty(ns)
            s.lease_dbs[name] = ns
        s.lease_db = name

    def table_rows(self, table):
        return MEMORY_ROWS[table](self._d())

    def clear_database(self):
        d = self._d()
        before = {a: getattr(d, a) for a in _ATTRS}
        _empty(d)

        def undo():
            for a, v in before.items():
                setattr(d, a, v)

        self.undo.append(undo)

    def get_history(self):
        return dict(self._d().history)

    def lock_history(self):
        return self.get_history()

    def lock_lease_consumer(self, consumer):
        return self.get_lease_consumer(consumer)

    def lock_lease_consumers(self):
        return self.list_lease_consumers()

    def set_history(self, row):
        s = self._d()
        before = s.history
        s.history = {k: row[k] for k in TABLES["history"]}

        def undo():
            s.history = before

        self.undo.append(undo)

    def insert_event(self, row):
        s = self._d()
        seq, eid = row["seq"], row["event_id"]
        if seq in s.events:
            raise self._duplicate(f"events.seq {seq}")
        if eid in s.event_ids:
            raise self._duplicate(f"events.event_id {eid}")
        _restore_event(s, {k: row[k] for k in TABLES["events"]})
        self.undo.append(lambda: _drop_event(s, seq))

    def get_event(self, event_id):
        s = self._d()
        seq = s.event_ids.get(event_id)
        return None if seq is None else dict(s.events[seq])

    def get_event_at(self, seq):
        row = self._d().events.get(seq)
        return None if row is None else dict(row)

    def event_window(self, consumer, after, limit, partition=None):
        s = self._d()
        limit = check_limit(limit)
        cps = s.cp_index.get(consumer, {})
        events, out = s.events, []
        parts = s.event_parts.items() if partition is None else (
            [(partition, s.event_parts[partition])] if partition in s.event_parts else [])
        for part, seqs in parts:
            cp = cps.get(part)
            i = bisect_right(seqs, after if cp is None else max(after, cp["seq"]))
            out.extend(seqs[i:i + limit])
        if partition is None:
            out.sort()
        return [dict(events[q]) for q in out]

    def event_bounds(self):
        seqs = self._d().event_seqs
        return (seqs[0], seqs[-1]) if seqs else (None, None)

    def prune_events(self, cutoff, fence, limit=None):
        s = self._d()
        if limit is not None:
            check_limit(limit)
        doomed = [q for q in s.event_seqs
                  if s.events[q]["committed_at"] < cutoff and (fence is None or s.events[q]["commit_seq"] < fence)]
        if limit is not None:
            doomed = doomed[:limit]
        out = []
        for q in doomed:
            row = _drop_event(s, q)
            self.undo.append(lambda row=row: _restore_event(s, row))
            out.append(row["event_id"])
        return out

    def get_lease_consumer(self, consumer):
        row = self._d().lease_consumers.get(consumer)
        return None if row is None else dict(row)

    def put_lease_consumer(self, row):
        self._put(self._d().lease_consumers, row["consumer"], {k: row[k] for k in TABLES["lease_consumers"]})

    def delete_lease_consumer(self, consumer):
        return self._pop(self._d().lease_consumers, consumer)

    def list_lease_consumers(self):
        c = self._d().lease_consumers
        return [dict(c[k]) for k in sorted(c)]

    def list_checkpoints(self, consumer):
        cps = self._d().cp_index.get(consumer, {})
        return [dict(cps[p]) for p in sorted(cps)]

    def set_checkpoint(self, consumer, partition, seq, commit_seq):
        self._index_put(self._d().cp_index, consumer, partition,
                        {"consumer": consumer, "partition": partition, "seq": seq, "commit_seq": commit_seq})

    def clear_checkpoints(self, consumer):
        return self._index_clear(self._d().cp_index, consumer)

    def insert_resolution(self, row):
        s = self._d()
        key = (row["consumer"], row["event_id"])
        if key in s.res_part:
            raise self._duplicate(f"resolutions {key}")
        row = {k: row[k] for k in TABLES["resolutions"]}
        _add_resolution(s, row)
        self.undo.append(lambda: _drop_resolution(s, *key))

    def list_resolutions(self, consumer, partition=None):
        by = self._d().res_index.get(consumer, {})
        rows = [r for p in ((partition,) if partition is not None else by) for r in by.get(p, {}).values()]
        rows.sort(key=lambda r: r["seq"])
        return [dict(r) for r in rows]

    def delete_resolution(self, consumer, event_id):
        s = self._d()
        if (consumer, event_id) not in s.res_part:
            return False
        row = _drop_resolution(s, consumer, event_id)
        self.undo.append(lambda: _add_resolution(s, row))
        return True

    def clear_resolutions(self, consumer):
        s = self._d()
        rows = [r for by in s.res_index.get(consumer, {}).values() for r in by.values()]
        for r in rows:
            _drop_resolution(s, consumer, r["event_id"])

        def undo():
            for r in rows:
                _add_resolution(s, r)

        self.undo.append(undo)
        return len(rows)

    def _index_put(self, index: dict, outer, inner, value) -> None:
        """Set ``index[outer][inner] = value`` with its undo."""
        by = index.setdefault(outer, {})
        had, old = inner in by, by.get(inner)
        by[inner] = value

        def undo():
            if had:
                index.setdefault(outer, {})[inner] = old
            else:
                index.get(outer, {}).pop(inner, None)

        self.undo.append(undo)

    def _index_clear(self, index: dict, outer) -> int:
        gone = index.pop(outer, None)
        if not gone:
            return 0
        self.undo.append(lambda: index.__setitem__(outer, gone))
        return len(gone)

    def insert_lease(self, row):
        s = self._d()
        key = (row["consumer"], row["event_id"])
        if key in s.leases:
            raise self._duplicate(f"leases {key}")
        self._put(s.leases, key, {k: row[k] for k in TABLES["leases"]})

    def get_lease(self, consumer, event_id):
        row = self._d().leases.get((consumer, event_id))
        return None if row is None else dict(row)

    def list_leases(self, consumer=None):
        return _by_consumer_seq(self._d().leases, consumer)

    def delete_lease(self, consumer, event_id):
        return self._pop(self._d().leases, (consumer, event_id))

    def has_lease_due(self, now):
        return any(r["expires_at"] <= now for r in self._d().leases.values())

    def expired_leases(self, now, limit):
        rows = [r for r in self._d().leases.values() if r["expires_at"] <= now]
        rows.sort(key=lambda r: (r["expires_at"], r["consumer"], r["seq"]))
        return [dict(r) for r in rows[:check_limit(limit)]]

    def put_retry(self, row):
        self._put(self._d().retries, (row["consumer"], row["event_id"]), {k: row[k] for k in TABLES["retries"]})

    def get_retry(self, consumer, event_id):
        row = self._d().retries.get((consumer, event_id))
        return None if row is None else dict(row)

    def delete_retry(self, consumer, event_id):
        return self._pop(self._d().retries, (consumer, event_id))

    def list_retries(self, consumer=None):
        return _by_consumer_seq(self._d().retries, consumer)

    def clear_retries(self, consumer):
        return self._clear(self._d().retries, consumer)

    def insert_dead_letter(self, row):
        s = self._d()
        key = (row["consumer"], row["event_id"])
        if key in s.dead_letters:
            raise self._duplicate(f"dead_letters {key}")
        self._put(s.dead_letters, key, {k: row[k] for k in TABLES["dead_letters"]})

    def list_dead_letters(self, consumer=None):
        return _by_consumer_seq(self._d().dead_letters, consumer)

    def clear_dead_letters(self, consumer):
        return self._clear(self._d().dead_letters, consumer)


def _by_consumer_seq(table: dict, consumer: str | None) -> list[dict]:
    rows = [r for r in table.values() if consumer is None or r["consumer"] == consumer]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [dict(r) for r in rows]


def _resolution_rows(s) -> list[dict]:
    rows = [r for by in s.res_index.values() for part in by.values() for r in part.values()]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [dict(r) for r in rows]


MEMORY_ROWS = {
    "events": lambda s: [dict(s.events[q]) for q in s.event_seqs],
    "lease_consumers": lambda s: [dict(s.lease_consumers[k]) for k in sorted(s.lease_consumers)],
    "checkpoints": lambda s: [dict(s.cp_index[c][p]) for c in sorted(s.cp_index) for p in sorted(s.cp_index[c])],
    "resolutions": lambda s: _resolution_rows(s),
    "leases": lambda s: _by_consumer_seq(s.leases, None),
    "retries": lambda s: _by_consumer_seq(s.retries, None),
    "dead_letters": lambda s: _by_consumer_seq(s.dead_letters, None),
    "history": lambda s: [dict(s.history)],
}


# -- the DuckDB adapter ---------------------------------------------------------------
# a connection -> (the connection, its current database), for those that left the default
_CURRENT: dict[int, tuple] = {}


# The adapter's hint (see DuckDBTx), one per database: a lower bound of the
# earliest committed ``expires_at`` (_NO_LEASE: none), lowered by each committed
# lease, never raised by a delete; dropped after a commit that read the expired
# leases (reloaded by one statement when next asked). Absent: not known yet.
_EARLIEST = "leases.earliest"
_NO_LEASE = 2**63


class LeaseDuckDBTx(LeaseTx):
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

    def use_database(self, name):
        # the connection's search path is the current database: a named one is
        # the schema ``riff_<name>`` (made on first use, outside the transaction:
        # an empty database), found before ``main`` where the kernel's tables are
        cur = _CURRENT.get(id(self.c))
        if (DEFAULT_DATABASE if cur is None or cur[0] is not self.c else cur[1]) == name:
            return
        check_database(name)
        if self.begun:  # as the memory adapter: after a write, the transaction belongs to its database
            raise RuntimeError("use_database must come first in a transaction")
        if name == DEFAULT_DATABASE:
            self.enter_namespace(None)
        else:
            self.enter_namespace(f"riff_{name}", sql.LEASE_SCHEMA + sql.RESOLUTIONS_SCHEMA + sql.FIRST_HISTORY)
        _CURRENT[id(self.c)] = (self.c, name)

    def table_rows(self, table):
        return self._all(table, sql.HERE_ROWS[table], None)

    def clear_database(self):
        for table in TABLES:
            self._run(f"DELETE FROM {table}")
        self._run(sql.FIRST_HISTORY)

    def _one(self, table, statement, params):
        r = self._run(statement, params).fetchone()
        return None if r is None else _row(TABLES[table], r)

    def _all(self, table, statement, params):
        return [_row(TABLES[table], r) for r in self._run(statement, params).fetchall()]

    def get_history(self):
        return self._one("history", sql.GET_HISTORY, None)

    def set_history(self, row):
        self._run(sql.SET_HISTORY, [row[k] for k in TABLES["history"]])

    def lock_history(self):
        return self._one("history", sql.LOCK_HISTORY if self.row_locks else sql.GET_HISTORY, None)

    def lock_lease_consumer(self, consumer):
        return self._one("lease_consumers", sql.LOCK_LEASE_CONSUMER if self.row_locks else sql.GET_LEASE_CONSUMER,
                         [consumer])

    def lock_lease_consumers(self):
        return self._all("lease_consumers",
                         sql.LOCK_LEASE_CONSUMERS if self.row_locks else sql.HERE_ROWS["lease_consumers"], None)

    def insert_event(self, row):
        self._run(sql.INSERT_EVENT, [row[k] for k in TABLES["events"]])

    def get_event(self, event_id):
        return self._one("events", sql.GET_EVENT, [event_id])

    def get_event_at(self, seq):
        return self._one("events", sql.GET_EVENT_AT, [seq])

    def event_window(self, consumer, after, limit, partition=None):
        return self._all("events", sql.EVENT_WINDOW, [consumer, after, partition, partition, check_limit(limit)])

    def event_bounds(self):
        return tuple(self._run(sql.EVENT_BOUNDS).fetchone())

    def prune_events(self, cutoff, fence, limit=None):
        limit = 2**62 if limit is None else check_limit(limit)
        rows = self._run(sql.PRUNE_EVENTS, [cutoff, fence, fence, limit]).fetchall()
        return [eid for _, eid in sorted(rows)]

    def get_lease_consumer(self, consumer):
        return self._one("lease_consumers", sql.GET_LEASE_CONSUMER, [consumer])

    def put_lease_consumer(self, row):
        self._run(sql.PUT_LEASE_CONSUMER, [row[k] for k in TABLES["lease_consumers"]])

    def delete_lease_consumer(self, consumer):
        return self._run(sql.DELETE_LEASE_CONSUMER, [consumer]).fetchone() is not None

    def list_lease_consumers(self):
        return self._all("lease_consumers", sql.HERE_ROWS["lease_consumers"], None)

    def list_checkpoints(self, consumer):
        return self._all("checkpoints", sql.LIST_CHECKPOINTS, [consumer])

    def set_checkpoint(self, consumer, partition, seq, commit_seq):
        self._run(sql.SET_CHECKPOINT, [consumer, partition, seq, commit_seq])

    def clear_checkpoints(self, consumer):
        return len(self._run(sql.CLEAR_CHECKPOINTS, [consumer]).fetchall())

    def insert_resolution(self, row):
        self._run(sql.INSERT_RESOLUTION, [row[k] for k in TABLES["resolutions"]])

    def list_resolutions(self, consumer, partition=None):
        return self._all("resolutions", sql.LIST_RESOLUTIONS, [consumer, partition, partition])

    def delete_resolution(self, consumer, event_id):
        return self._run(sql.DELETE_RESOLUTION, [consumer, event_id]).fetchone() is not None

    def clear_resolutions(self, consumer):
        return len(self._run(sql.CLEAR_RESOLUTIONS, [consumer]).fetchall())

    def insert_lease(self, row):
        self._run(sql.INSERT_LEASE, [row[k] for k in TABLES["leases"]])
        hints, key, expires = self.hints, (_EARLIEST, self._database()), row["expires_at"]

        def committed():
            earliest = hints.get(key)
            if earliest is not None and expires < earliest:
                hints[key] = expires

        self._on_commit(committed)

    def has_lease_due(self, now):
        if self.begun:
            return self._run(sql.HAS_LEASE_DUE, [now]).fetchone()[0]
        key = (_EARLIEST, self._database())
        earliest = self.hints.get(key)
        if earliest is None:
            found = self._run(sql.EARLIEST_EXPIRY).fetchone()[0]
            earliest = self.hints[key] = _NO_LEASE if found is None else found
        return earliest <= now

    def get_lease(self, consumer, event_id):
        return self._one("leases", sql.GET_LEASE, [consumer, event_id])

    def list_leases(self, consumer=None):
        return self._all("leases", sql.LIST_LEASES, [consumer, consumer])

    def delete_lease(self, consumer, event_id):
        return self._run(sql.DELETE_LEASE, [consumer, event_id]).fetchone() is not None

    def expired_leases(self, now, limit):
        rows = self._all("leases", sql.EXPIRED_LEASES, [now, check_limit(limit)])
        # recovery turns them into retries, or the hint was below the earliest
        # lease (acked since): it is read again once this commits
        hints, key = self.hints, (_EARLIEST, self._database())
        self._on_commit(lambda: hints.pop(key, None))
        return rows

    def put_retry(self, row):
        self._run(sql.PUT_RETRY, [row[k] for k in TABLES["retries"]])

    def get_retry(self, consumer, event_id):
        return self._one("retries", sql.GET_RETRY, [consumer, event_id])

    def delete_retry(self, consumer, event_id):
        return self._run(sql.DELETE_RETRY, [consumer, event_id]).fetchone() is not None

    def list_retries(self, consumer=None):
        return self._all("retries", sql.LIST_RETRIES, [consumer, consumer])

    def clear_retries(self, consumer):
        return len(self._run(sql.CLEAR_RETRIES, [consumer]).fetchall())

    def insert_dead_letter(self, row):
        self._run(sql.INSERT_DEAD_LETTER, [row[k] for k in TABLES["dead_letters"]])

    def list_dead_letters(self, consumer=None):
        return self._all("dead_letters", sql.LIST_DEAD_LETTERS, [consumer, consumer])

    def clear_dead_letters(self, consumer):
        return len(self._run(sql.CLEAR_DEAD_LETTERS, [consumer]).fetchall())


PART = StorePart(
    name="leases", tables=TABLES, timestamp_columns=TIMESTAMP_COLUMNS, tx=LeaseTx,
    memory_tx=LeaseMemoryTx, memory_init=memory_init, memory_rows=MEMORY_ROWS,
    duckdb_tx=LeaseDuckDBTx, duckdb_migrations=sql.MIGRATIONS, duckdb_rows=sql.ALL_ROWS,
)


class in_database:
    """``with in_database(store, name) as tx:`` — a transaction of ``store`` on
    the named database ``name`` (``use_database`` first, then the block)."""

    __slots__ = ("t", "name")

    def __init__(self, store, name: str = DEFAULT_DATABASE) -> None:
        self.t, self.name = store.transaction(), name

    def __enter__(self):
        tx = self.t.__enter__()
        try:
            tx.use_database(self.name)
        except BaseException as exc:
            self.t.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return tx

    def __exit__(self, exc_type, exc, tb):
        return self.t.__exit__(exc_type, exc, tb)


def database_rows(store, table: str, database: str = DEFAULT_DATABASE) -> list[dict]:
    """The committed rows of ``table`` of the named database (``store.rows``
    for the default one)."""
    if database == DEFAULT_DATABASE:
        return store.rows(table)
    if table not in TABLES:
        raise KeyError(f"unknown table {table!r}; the leases tables: {', '.join(TABLES)}")
    with in_database(store, database) as tx:
        return tx.table_rows(table)
