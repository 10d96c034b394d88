"""The leased-consumer design's tables in SQL: the DuckDB adapter of :mod:`.port` (PostgreSQL runs
the same statements through the kernel's dialect layer); its statements are :mod:`.statements`."""

from __future__ import annotations

from fanoutsim.kernel.store.base import check_limit
from fanoutsim.kernel.store.base import row_of as _row

from . import statements as sql
from .port import DEFAULT_DATABASE, TABLES, LeaseTx, check_database

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
        return self._one(
            "lease_consumers", sql.LOCK_LEASE_CONSUMER if self.row_locks else sql.GET_LEASE_CONSUMER, [consumer]
        )

    def lock_lease_consumers(self):
        return self._all(
            "lease_consumers", sql.LOCK_LEASE_CONSUMERS if self.row_locks else sql.HERE_ROWS["lease_consumers"], None
        )

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
