"""The DuckDB store: the same tables in SQL, in memory or in a file.

A file holds one run's durable state and outlives the process, which is what
the real-time runtime and its crash tests need. DuckDB lets one process hold a
file at a time; opening a file another process holds fails with an error that
names the file and, where DuckDB reports it, the holder.

A file this version cannot use — not DuckDB, or a newer fanoutsim schema — is
refused before anything could write to it: the header is read as plain bytes
and the schema version through a read-only connection, because a read-write
open replays a pending write-ahead log into the file and removes the log.
"""
from __future__ import annotations

import os
import threading

import duckdb

from fanoutsim.kernel.store import sql
from fanoutsim.kernel.store.base import FAILED_TX, TABLES, TIMESTAMP_COLUMNS, Store, Tx, check_limit, check_subscription_changes


class StoreError(RuntimeError):
    """A database file that cannot be opened as a fanoutsim store."""


def _first_line(exc: BaseException) -> str:
    """DuckDB's message without its hints and stack: the line that says what is wrong."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _row(cols: tuple[str, ...], values) -> dict:
    return dict(zip(cols, values))


_F, _S, _E = TABLES["reactor_firings"], TABLES["reactor_subscriptions"], TABLES["workflow_executions"]
_O = TABLES["outbox"]


_READS: dict[str, bool] = {}


def _reads_only(statement: str) -> bool:
    r = _READS.get(statement)
    if r is None:
        r = _READS[statement] = statement.lstrip()[:6].upper() == "SELECT"
    return r


class DuckDBTx(Tx):
    """Every statement goes through :meth:`_run`: DuckDB aborts the whole
    transaction on any error, and a later COMMIT would then roll back without
    a word, so the error is kept in ``failed`` for the commit to refuse.

    ``BEGIN`` waits for the first write. The reads before it need no snapshot
    of their own: every transaction of this store holds the store's lock, and
    one process owns the file, so nothing can commit between them. A poll that
    finds nothing thus costs its reads alone, not BEGIN and COMMIT around them
    (at a 50 ms poll interval that was two thirds of an idle runner's work)."""

    __slots__ = ("c", "failed", "n", "begun")

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.c = con
        self.failed = None
        self.n = 0  # statements run, for the store's count
        self.begun = False

    def _run(self, statement: str, params=None) -> duckdb.DuckDBPyConnection:
        if self.failed is not None:  # say why, rather than DuckDB's "transaction is aborted"
            raise RuntimeError(FAILED_TX.format(self.failed))
        self.n += 1
        try:
            if not self.begun and not _reads_only(statement):
                self.c.execute("BEGIN")  # the first write opens the transaction
                self.begun = True
                self.n += 1
            return self.c.execute(statement, params)
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.ConstraintException) and "duplicate key" in str(exc).lower():
                self.failed = KeyError(f"duplicate key: {str(exc).strip()}")  # as the memory store says it
                raise self.failed from None
            self.failed = exc
            raise

    def insert_firing(self, row):
        self._run(sql.INSERT_FIRING, [row[k] for k in _F])

    def fetch_firings(self, reactor, tenant, after, limit, after_id=None, until=None):
        check_limit(limit)
        if after_id is not None or until is not None:
            rows = self._run(sql.FETCH_FIRINGS_CURSOR,
                             [reactor, tenant, after, after, after, after_id, after_id, until, until,
                              limit]).fetchall()
        elif after is None:
            rows = self._run(sql.FETCH_FIRINGS_ALL, [reactor, tenant, limit]).fetchall()
        else:
            rows = self._run(sql.FETCH_FIRINGS_AFTER, [reactor, tenant, after, limit]).fetchall()
        return [_row(_F, r) for r in rows]

    def prune_firings(self, cutoff, conservative, limit=None):
        limit = 2**62 if limit is None else check_limit(limit)
        rows = self._run(sql.PRUNE_FIRINGS, [cutoff, conservative, limit]).fetchall()
        return [fid for _, fid in sorted((at, fid) for fid, at in rows)]

    def count_firings(self):
        return self._run(sql.COUNT_FIRINGS).fetchone()[0]

    def get_subscription(self, reactor, workflow, tenant):
        r = self._run(sql.GET_SUBSCRIPTION, [reactor, workflow, tenant]).fetchone()
        return None if r is None else _row(_S, r)

    def insert_subscription(self, row):
        self._run(sql.INSERT_SUBSCRIPTION, [row[k] for k in _S])

    def update_subscription(self, sub_id, changes):
        check_subscription_changes(changes)
        cols = tuple(changes)
        if not cols:
            return  # "SET" with nothing to set is not SQL
        self._run(sql.update_subscription(cols, TIMESTAMP_COLUMNS), [*changes.values(), sub_id])

    def delete_subscription(self, sub_id):
        return self._run(sql.DELETE_SUBSCRIPTION, [sub_id]).fetchone() is not None

    def list_subscriptions(self, tenant=None, enabled_only=False):
        rows = self._run(sql.LIST_SUBSCRIPTIONS, [tenant, tenant, enabled_only]).fetchall()
        return [_row(_S, r) for r in rows]

    def insert_execution(self, row):
        self._run(sql.INSERT_EXECUTION, [row[k] for k in _E])

    def requeue_running(self):
        rows = self._run(sql.REQUEUE_RUNNING).fetchall()
        return [eid for _, eid in sorted((at, eid) for eid, at in rows)]

    def claim_executions(self, now, limit):
        check_limit(limit)
        rows = [_row(_E, r) for r in self._run(sql.CLAIM_EXECUTIONS, [now, limit]).fetchall()]
        rows.sort(key=lambda r: (r["dispatched_at"], r["id"]))
        return rows

    def log_runner(self, at, event, detail=None):
        return self._run(sql.LOG_RUNNER, [at, event, detail]).fetchone()[0]

    def finish_execution(self, execution_id, now, status):
        self._run(sql.FINISH_EXECUTION, [status, now, execution_id])

    # == the outbox design (seed 002) =====================================
    def reserve_outbox_seq(self):
        return self._run(sql.RESERVE_OUTBOX_SEQ).fetchone()[0]

    def insert_outbox(self, row):
        self._run(sql.INSERT_OUTBOX, [row[k] for k in _O])

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

    # == the leased-consumer design (seed 003) ==============================
    def _one(self, table, statement, params):
        r = self._run(statement, params).fetchone()
        return None if r is None else _row(TABLES[table], r)

    def _all(self, table, statement, params):
        return [_row(TABLES[table], r) for r in self._run(statement, params).fetchall()]

    def get_history(self):
        return self._one("history", sql.GET_HISTORY, None)

    def set_history(self, row):
        self._run(sql.SET_HISTORY, [row[k] for k in TABLES["history"]])

    def insert_event(self, row):
        self._run(sql.INSERT_EVENT, [row[k] for k in TABLES["events"]])

    def get_event(self, event_id):
        return self._one("events", sql.GET_EVENT, [event_id])

    def event_heads(self, consumer, after):
        return self._all("events", sql.EVENT_HEADS, [consumer, after])

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

    def list_lease_consumers(self):
        return self._all("lease_consumers", sql.ALL_ROWS["lease_consumers"], None)

    def get_checkpoints(self, consumer):
        return dict(self._run(sql.GET_CHECKPOINTS, [consumer]).fetchall())

    def set_checkpoint(self, consumer, partition, seq):
        self._run(sql.SET_CHECKPOINT, [consumer, partition, seq])

    def clear_checkpoints(self, consumer):
        return len(self._run(sql.CLEAR_CHECKPOINTS, [consumer]).fetchall())

    def insert_lease(self, row):
        self._run(sql.INSERT_LEASE, [row[k] for k in TABLES["leases"]])

    def get_lease(self, consumer, event_id):
        return self._one("leases", sql.GET_LEASE, [consumer, event_id])

    def list_leases(self, consumer=None):
        return self._all("leases", sql.LIST_LEASES, [consumer, consumer])

    def delete_lease(self, consumer, event_id):
        return self._run(sql.DELETE_LEASE, [consumer, event_id]).fetchone() is not None

    def expired_leases(self, now, limit):
        return self._all("leases", sql.EXPIRED_LEASES, [now, check_limit(limit)])

    def put_retry(self, row):
        self._run(sql.PUT_RETRY, [row[k] for k in TABLES["retries"]])

    def get_retry(self, consumer, event_id):
        return self._one("retries", sql.GET_RETRY, [consumer, event_id])

    def delete_retry(self, consumer, event_id):
        return self._run(sql.DELETE_RETRY, [consumer, event_id]).fetchone() is not None

    def list_retries(self, consumer=None):
        return self._all("retries", sql.LIST_RETRIES, [consumer, consumer])

    def insert_dead_letter(self, row):
        self._run(sql.INSERT_DEAD_LETTER, [row[k] for k in TABLES["dead_letters"]])

    def list_dead_letters(self, consumer=None):
        return self._all("dead_letters", sql.LIST_DEAD_LETTERS, [consumer, consumer])


class DuckDBStore(Store):
    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        if path != ":memory:" and os.path.lexists(path):
            if not os.path.isfile(path):
                raise StoreError(f"{path} is not a file; refusing to touch it")
            if os.path.getsize(path) > 0:
                with open(path, "rb") as fh:
                    head = fh.read(16)
                if head[8:12] != b"DUCK":
                    raise StoreError(f"{path} is not a DuckDB database file; refusing to touch it")
                self._probe()
        elif path != ":memory:":
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise StoreError(f"cannot create {path}: the folder {folder} does not exist")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise StoreError(f"cannot create {path}: the folder {folder} is not writable")
        self.con = self._connect()
        self._lock = threading.Lock()
        self.statements = 0  # run inside transactions since opening: the load we put on DuckDB
        self._owner: int | None = None
        try:
            self.con.execute("SET TimeZone = 'UTC'")
            self._migrate()
        except duckdb.Error as exc:  # a damaged file can open and fail at its first read
            self.con.close()
            raise StoreError(f"cannot use {path}: {_first_line(exc)}") from None

    def _probe(self) -> None:
        """Check the schema version read-only: a refused file keeps its bytes and its WAL."""
        try:
            probe = self._connect(read_only=True)
        except duckdb.ConnectionException:
            return  # this process has it open read-write already: no WAL to replay; _migrate checks
        try:
            self._check_version(probe)
        except duckdb.Error as exc:  # damaged past its header
            raise StoreError(f"cannot use {self.path}: {_first_line(exc)}") from None
        finally:
            probe.close()

    def _connect(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        path = self.path
        try:
            return duckdb.connect(path, read_only=read_only)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                msg = msg.split(" See also")[0].strip()  # DuckDB's text names the holder's PID
                raise StoreError(f"{path} is held by another process ({msg})") from None
            raise StoreError(f"cannot open {path}: {msg.strip()}") from None
        except duckdb.ConnectionException:
            raise  # opened in another mode by this process: the caller decides
        except duckdb.Error as exc:  # a corrupt file (a checksum error), an internal error
            raise StoreError(f"cannot open {path}: {_first_line(exc)}") from None

    def _check_version(self, con: duckdb.DuckDBPyConnection) -> None:
        if not con.execute(sql.HAS_META).fetchone()[0]:
            return  # a DuckDB file fanoutsim has not used yet
        found = con.execute(sql.GET_SCHEMA_VERSION).fetchone()
        try:
            version = int(found[0]) if found else 0
        except ValueError:
            raise StoreError(f"{self.path} has schema version {found[0]!r}, not a number") from None
        if version > sql.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this fanoutsim "
                f"understands ({sql.SCHEMA_VERSION}); upgrade fanoutsim"
            )

    def __repr__(self) -> str:
        return f"DuckDBStore({self.path!r})"

    def _migrate(self) -> None:
        try:
            self._check_version(self.con)  # again: the file may have changed since the probe
        except StoreError:
            self.con.close()
            raise
        self.con.execute("BEGIN")
        self.con.execute(sql.SCHEMA)
        for version in sorted(sql.MIGRATIONS):  # each statement is idempotent
            for statement in sql.MIGRATIONS[version]:
                self.con.execute(statement)
        self.con.execute(sql.SET_SCHEMA_VERSION, [str(sql.SCHEMA_VERSION)])
        self.con.execute("COMMIT")

    def _begin(self) -> DuckDBTx:
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError("nested transactions are not supported")
        self._lock.acquire()
        self._owner = me
        return DuckDBTx(self.con)  # BEGIN comes with the first write

    def _commit(self, tx: DuckDBTx) -> None:
        self.statements += tx.n + tx.begun  # BEGIN is in n; COMMIT is one more
        if not tx.begun:  # it only read: nothing to commit
            self._owner = None
            self._lock.release()
            return
        try:
            self.con.execute("COMMIT")
        except BaseException:
            try:
                self.con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # the failed commit already ended the transaction
            raise
        finally:
            self._owner = None
            self._lock.release()

    def _rollback(self, tx: DuckDBTx) -> None:
        self.statements += tx.n + tx.begun
        try:
            if tx.begun:
                self.con.execute("ROLLBACK")
        finally:
            self._owner = None
            self._lock.release()

    def rows(self, table: str) -> list[dict]:
        if table not in sql.ALL_ROWS:
            raise KeyError(f"unknown table {table!r}")
        if self._owner == threading.get_ident():  # else: waiting on our own lock, forever
            raise RuntimeError("rows() reads committed rows; call it outside the open transaction")
        with self._lock:
            return [_row(TABLES[table], r) for r in self.con.execute(sql.ALL_ROWS[table]).fetchall()]

    def close(self) -> None:
        self.con.close()
