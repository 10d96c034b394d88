"""The DuckDB store: the same tables in SQL, in memory or in a file.

A file holds one run's durable state and outlives the process, which is what
the real-time runtime and its crash tests need. DuckDB lets one process hold a
file at a time; opening a file another process holds fails with an error that
names the file and, where DuckDB reports it, the holder.
"""
from __future__ import annotations

import os
import threading

import duckdb

from . import sql
from .base import TABLES, TIMESTAMP_COLUMNS, Store, Tx


class StoreError(RuntimeError):
    """A database file that cannot be opened as a fanoutsim store."""


def _row(cols: tuple[str, ...], values) -> dict:
    return dict(zip(cols, values))


_F, _S, _E = TABLES["reactor_firings"], TABLES["reactor_subscriptions"], TABLES["workflow_executions"]


class DuckDBTx(Tx):
    __slots__ = ("c",)

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.c = con

    def insert_firing(self, row):
        self.c.execute(sql.INSERT_FIRING, [row[k] for k in _F])

    def fetch_firings(self, reactor, tenant, after, limit):
        if after is None:
            rows = self.c.execute(sql.FETCH_FIRINGS_ALL, [reactor, tenant, limit]).fetchall()
        else:
            rows = self.c.execute(sql.FETCH_FIRINGS_AFTER, [reactor, tenant, after, limit]).fetchall()
        return [_row(_F, r) for r in rows]

    def prune_firings(self, cutoff, conservative, limit=None):
        limit = 2**62 if limit is None else limit
        return self.c.execute(sql.PRUNE_FIRINGS, [cutoff, conservative, limit]).fetchone()[0]

    def count_firings(self):
        return self.c.execute(sql.COUNT_FIRINGS).fetchone()[0]

    def get_subscription(self, reactor, workflow, tenant):
        r = self.c.execute(sql.GET_SUBSCRIPTION, [reactor, workflow, tenant]).fetchone()
        return None if r is None else _row(_S, r)

    def insert_subscription(self, row):
        self.c.execute(sql.INSERT_SUBSCRIPTION, [row[k] for k in _S])

    def update_subscription(self, sub_id, changes):
        cols = tuple(changes)
        unknown = set(cols) - set(_S)
        if unknown:
            raise KeyError(f"unknown reactor_subscriptions column(s): {sorted(unknown)}")
        self.c.execute(sql.update_subscription(cols, TIMESTAMP_COLUMNS), [*changes.values(), sub_id])

    def delete_subscription(self, sub_id):
        return self.c.execute(sql.DELETE_SUBSCRIPTION, [sub_id]).fetchone() is not None

    def list_subscriptions(self, tenant=None, enabled_only=False):
        rows = self.c.execute(sql.LIST_SUBSCRIPTIONS, [tenant, tenant, enabled_only]).fetchall()
        return [_row(_S, r) for r in rows]

    def insert_execution(self, row):
        self.c.execute(sql.INSERT_EXECUTION, [row[k] for k in _E])

    def claim_executions(self, now, limit):
        rows = [_row(_E, r) for r in self.c.execute(sql.CLAIM_EXECUTIONS, [now, limit]).fetchall()]
        rows.sort(key=lambda r: (r["dispatched_at"], r["id"]))
        return rows

    def finish_execution(self, execution_id, now, status):
        self.c.execute(sql.FINISH_EXECUTION, [status, now, execution_id])


class DuckDBStore(Store):
    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        if path != ":memory:" and os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, "rb") as fh:
                head = fh.read(16)
            if head[8:12] != b"DUCK":
                raise StoreError(f"{path} is not a DuckDB database file; refusing to touch it")
        try:
            self.con = duckdb.connect(path)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                raise StoreError(f"{path} is held by another process ({msg.strip()})") from None
            raise StoreError(f"cannot open {path}: {msg.strip()}") from None
        self.con.execute("SET TimeZone = 'UTC'")
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._migrate()

    def __repr__(self) -> str:
        return f"DuckDBStore({self.path!r})"

    def _migrate(self) -> None:
        has_meta = self.con.execute(sql.HAS_META).fetchone()[0]
        if has_meta:
            found = self.con.execute(sql.GET_SCHEMA_VERSION).fetchone()
            version = int(found[0]) if found else 0
            if version > sql.SCHEMA_VERSION:
                self.con.close()
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this fanoutsim "
                    f"understands ({sql.SCHEMA_VERSION}); upgrade fanoutsim"
                )
        self.con.execute("BEGIN")
        self.con.execute(sql.SCHEMA)
        self.con.execute(sql.SET_SCHEMA_VERSION, [str(sql.SCHEMA_VERSION)])
        self.con.execute("COMMIT")

    def _begin(self) -> DuckDBTx:
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError("nested transactions are not supported")
        self._lock.acquire()
        self._owner = me
        try:
            self.con.execute("BEGIN")
        except BaseException:
            self._owner = None
            self._lock.release()
            raise
        return DuckDBTx(self.con)

    def _commit(self, tx: DuckDBTx) -> None:
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
        try:
            self.con.execute("ROLLBACK")
        finally:
            self._owner = None
            self._lock.release()

    def rows(self, table: str) -> list[dict]:
        if table not in sql.ALL_ROWS:
            raise KeyError(f"unknown table {table!r}")
        with self._lock:
            return [_row(TABLES[table], r) for r in self.con.execute(sql.ALL_ROWS[table]).fetchall()]

    def close(self) -> None:
        self.con.close()
