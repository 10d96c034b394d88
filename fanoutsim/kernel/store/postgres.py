"""The PostgreSQL store: the same tables in the database the designs were written for.

``PostgresStore("postgres")`` starts a throwaway server of its own
(:class:`fanoutsim.kernel.pg.EmbeddedServer`, removed at :meth:`close`);
``PostgresStore("postgresql://user@host/db")`` uses the user's server
(PostgreSQL 16 or newer). Every design's statements are its DuckDB ones
(``duckdb_tx``, ``duckdb_schema``, ``duckdb_migrations``, ``duckdb_rows`` of its
:class:`~.base.StorePart`), run through the dialect layer :mod:`.pgsql`: there
is no second copy of any statement.

Transactions are PostgreSQL's own, at its default isolation (READ COMMITTED),
which is what the seed systems run at: a transaction begins at its first
statement and commits or rolls back at the end of the ``with`` block. In one
process the store holds one connection and a lock, as the DuckDB store does,
so one transaction is open at a time; several processes (or stores) on one
database are real concurrent transactions, and what they do to each other —
a sequence value taken at insert and visible only at commit, two pollers
reading the same rows — is PostgreSQL's doing, not a model of it.

Opening refuses, with one line and before it writes anything: a malformed
DSN, a server that cannot be reached, a server older than 16, a search_path
naming a schema that does not exist (:func:`home_schema`), a database whose
fanoutsim schema is newer than this version. A scenario run, which starts from
empty tables, also refuses a schema that already holds fanoutsim's tables
(:func:`held_run`, read before anything is opened); the wall-clock processes
that share one database open it as it is. Bringing the schema up to date is
one transaction under an advisory lock (PostgreSQL's DDL is transactional), so
a failure leaves nothing half-created and two processes opening one database
at once do not race.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from fanoutsim.kernel.store import base, pgsql, sql
from fanoutsim.kernel.store import duckdb as _duckdb_store
from fanoutsim.kernel.store.duckdb import first_line
from fanoutsim.kernel.store.record import DESIGN_KEY
from fanoutsim.kernel.store.redact import mask_secrets

if TYPE_CHECKING:  # imported where a throwaway server is started, not before
    from fanoutsim.kernel.pg import EmbeddedServer

MIN_SERVER_VERSION = 160000
# pg_advisory_xact_lock key of the schema migration: "fnsm"
_MIGRATION_LOCK = 0x666E736D
_RUNNER_LOG_LOCK = 0x666E726C  # "fnrl": appends to runner_log
CONNECT_TIMEOUT = 5  # seconds, unless the DSN says otherwise


class StoreError(_duckdb_store.StoreError):
    """A PostgreSQL database that cannot be used as a fanoutsim store (a kind
    of the DuckDB store's error, so that whoever catches one catches both)."""


def safe_dsn(dsn: str) -> str:
    """``dsn`` with its password hidden, for messages (one it cannot parse: masked as it is)."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return mask_secrets(dsn)
    if "password" in params:
        params["password"] = "***"
    shown = " ".join(f"{k}={v}" for k, v in params.items() if v not in (None, ""))
    return shown or "(the default server)"


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection to the server is gone: psycopg's own
    (no SQLSTATE: closed, lost), a connection exception (class 08) or an
    operator's intervention (57P: shutdown, crash). Not a deadlock or a
    serialization failure, which are OperationalErrors too but end one
    transaction, not the connection."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(("08", "57P"))


def parse_uri(dsn: str) -> dict[str, Any]:
    """The parameters of a ``postgresql://`` URI, or :class:`StoreError`
    ``malformed PostgreSQL URI: <what is wrong>`` (a port that is not a number
    included: libpq would take it for a service name and fail a host lookup; a
    second ``@`` before the host: libpq would take the rest of the password for
    the host, and quote it in its error)."""
    authority = dsn.split("://", 1)[-1].split("/", 1)[0]
    if authority.count("@") > 1:
        raise StoreError(
            f"malformed PostgreSQL URI: more than one @ before the host (in {mask_secrets(dsn)}); "
            "write an @ inside a user name or password as %40"
        )
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise StoreError(f"malformed PostgreSQL URI: {mask_secrets(first_line(exc))}") from None
    for port in str(params.get("port") or "").split(","):
        if port and not port.isdigit():
            raise StoreError(f"malformed PostgreSQL URI: port {port!r} is not a number (in {mask_secrets(dsn)})")
    return params


def _connect_to_read(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit connection to the URI's database, or the one-line
    StoreError of a malformed URI or of a server that does not answer."""
    params = parse_uri(dsn)
    extra: dict[str, Any] = {} if "connect_timeout" in params else {"connect_timeout": CONNECT_TIMEOUT}
    try:
        return psycopg.connect(dsn, autocommit=True, **extra)
    except psycopg.Error as exc:
        raise unreachable(dsn, exc) from None


def read_meta(dsn: str, key: str) -> tuple[bool, str | None]:
    """Whether the database (the URI's schema) holds fanoutsim's tables, and
    ``key``'s value in its ``fanoutsim_meta``; reads only: a reader of a run
    left behind must not make tables where there was none."""
    try:
        with _connect_to_read(dsn) as con:
            if _scalar(con.execute("SELECT to_regclass('fanoutsim_meta') IS NOT NULL")) is not True:
                return False, None
            row = con.execute("SELECT value FROM fanoutsim_meta WHERE key = %s", [key]).fetchone()
    except psycopg.Error as exc:
        raise unreachable(dsn, exc) from None
    return True, None if row is None else str(row[0])


# one name of a search_path setting as written: a quoted name, or up to the next comma
_PATH_NAME = re.compile(r'"(?:[^"]|"")*"|[^,\s][^,]*')


def home_schema(con: psycopg.Connection[Any], dsn: str) -> str:
    """The schema the connection creates tables in: its search_path's first
    one that exists. When none exists, a StoreError naming the one the path
    names, said before anything is written: PostgreSQL itself only says, at
    the first CREATE TABLE, that "no schema has been selected to create in"."""
    home = _scalar(con.execute("SELECT current_schema()"))
    if home is not None:
        return str(home)
    path = str(_scalar(con.execute("SELECT current_setting('search_path')")))
    named = [n.strip() for n in _PATH_NAME.findall(path) if n.strip().strip('"') != "$user"]
    if not named:
        raise StoreError(
            f"the search_path of PostgreSQL {safe_dsn(dsn)} names no schema to keep the tables in; "
            f"name one with options=-csearch_path%3Dname in the URI"
        )
    # as written in the path (quoted or not), so that CREATE SCHEMA makes the very schema it names
    raise StoreError(
        f"schema {named[0]} does not exist in PostgreSQL {safe_dsn(dsn)} (the URI's search_path names it); "
        f"create it first: CREATE SCHEMA {named[0]};"
    )


def held_run(dsn: str) -> str | None:
    """Why a scenario run, which starts from empty tables, must not use the
    URI's schema: it already holds fanoutsim's tables (an earlier run's, a
    served database's); None when it holds none. Reads only, so a refusal
    leaves the schema as it was; a schema that does not exist is refused
    as :func:`home_schema` says."""
    try:
        with _connect_to_read(dsn) as con:
            home = home_schema(con, dsn)
            meta = f"{pgsql._quote(home)}.fanoutsim_meta"  # the home's own, not one further down the path
            if _scalar(con.execute("SELECT to_regclass(%s) IS NOT NULL", [meta])) is not True:
                return None
            row = con.execute(f"SELECT value FROM {meta} WHERE key = %s", [DESIGN_KEY]).fetchone()
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL {safe_dsn(dsn)}: {mask_secrets(first_line(exc))}") from None
    design = f" (a run of the {row[0]} design)" if row and row[0] else ""
    # what to add to this very URI (one with options already: that parameter)
    option = "options=-csearch_path%3Dname"
    option = option if "options=" in dsn else ("&" if "?" in dsn else "?") + option
    return (
        f"schema {home} of PostgreSQL {safe_dsn(dsn)} already holds fanoutsim's tables{design}; "
        f"a scenario starts from empty tables, so give the run a new schema (CREATE SCHEMA name; and "
        f"{option} on the URI) or drop fanoutsim's tables in {home}"
    )


def _scalar(cur: psycopg.Cursor[Any]) -> Any:
    """The first column of the one row of a query that always returns one (``SELECT f(...)``)."""
    row = cur.fetchone()
    if row is None:
        raise StoreError("a query that returns one row returned none")
    return row[0]


def unreachable(dsn: str, exc: BaseException) -> StoreError:
    """The error for a server ``dsn`` names that could not be connected to."""
    return StoreError(f"cannot reach PostgreSQL at {safe_dsn(dsn)}: {mask_secrets(first_line(exc))}")


def is_dsn(spec: str) -> bool:
    """A string that names a PostgreSQL server (a ``postgresql://`` or ``postgres://`` URI)."""
    return spec.startswith(("postgresql://", "postgres://"))


class PostgresTx(base.Tx):
    """Every statement goes through :meth:`_run`, translated once (cached) by
    :func:`.pgsql.translate`. PostgreSQL aborts the whole transaction at any
    error and answers every later statement with an error of its own, so the
    first error is kept in ``failed`` and named instead, as in DuckDB."""

    __slots__ = ("c", "store", "failed", "n", "begun", "hints", "locked_at")

    keeps_hints = False  # other processes write the same database (see hints below)
    row_locks = True  # ... at the same time: a row read to be written back is locked

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.c = store.cur
        self.failed: BaseException | None = None
        self.n = 0
        self.begun = False
        self.locked_at: int | None = None  # the store's clock when the last row lock was granted
        # a part's hints (see DuckDBTx) live for this transaction only: other
        # processes write the same database, so nothing read earlier bounds it
        self.hints: dict[str, Any] = {}

    def _on_commit(self, fn: Callable[[], object]) -> None:
        """Hints are not kept past a transaction here: nothing to update."""

    def enter_namespace(self, name: str | None, ddl: str = "") -> None:
        """Make schema ``name`` (``None``: the store's own) the first one later
        statements find, the store's own after it; the first time, create it and
        run ``ddl`` in it. Outside a transaction (a session setting). A name is
        the store's schema's, so two stores in one database never share one."""
        home = self.store.home
        if name is None:
            self.c.execute("SELECT set_config('search_path', %s, false)", [pgsql._quote(home)])
            return
        ns = pgsql._quote(name if home == "public" else f"{home}__{name}")
        self.c.execute(f"CREATE SCHEMA IF NOT EXISTS {ns}")
        self.c.execute("SELECT set_config('search_path', %s, false)", [ns])
        for statement in pgsql.split(ddl):
            self.c.execute(self.store.translated(statement), ())
        self.c.execute("SELECT set_config('search_path', %s, false)", [f"{ns}, {pgsql._quote(home)}"])

    def _run(self, statement: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        self._refuse_if_failed()
        q = self.store.translated(statement)
        try:
            if not self.begun:
                self.c.execute("BEGIN")
                self.begun = True
                self.n += 1
            self.n += 1
            self.c.execute(q, () if params is None else params)
            if statement.endswith(" FOR UPDATE") and self.store.clock is not None:
                self.locked_at = self.store.clock()  # granted now: perhaps after another process committed
            return self.c
        except pg_errors.UniqueViolation as exc:
            self.failed = KeyError(f"duplicate key: {first_line(exc)}")  # as the memory store says it
            raise self.failed from None
        except psycopg.Error as exc:
            self.failed = exc
            raise

    def after_locks(self, now: int) -> int:
        locked = self.locked_at
        return now if locked is None or locked <= now else locked

    def _hold(
        self,
        statement: str,
        params: Sequence[Any] | None = None,
        check: Callable[[psycopg.Cursor[Any]], object] | None = None,
    ) -> None:
        """A write whose result the caller does not need at once: sent now,
        ``check`` run on its result (DuckDB's store may hold it back to send it
        alone; see DuckDBTx._hold)."""
        result = self._run(statement, params)
        if check is not None:
            check(result)

    def _insert_new(self, statement: str, params: Sequence[Any], keys: str, key: str | None) -> None:
        """An insert by primary key: sent now (see DuckDBTx._insert_new)."""
        self._run(statement, params)

    def _keys_gone(self, keys: str, gone: Iterable[Any]) -> None:
        """No hint of a table's keys outlives a transaction here."""

    # -- runner_log -----------------------------------------------------
    def log_runner(self, at: int, event: str, detail: str | None = None) -> int:
        # several processes may share the database: the next seq is max + 1 under a
        # lock held to this transaction's end (READ COMMITTED: the insert's own
        # snapshot, taken after the lock, sees the last holder's row)
        self._run("SELECT pg_advisory_xact_lock(?)", [_RUNNER_LOG_LOCK])
        return int(_scalar(self._run(sql.LOG_RUNNER, [at, event, detail])))

    # -- LISTEN/NOTIFY ----------------------------------------------------
    def notify(self, channel: str, payload: str) -> None:
        """``pg_notify(channel, payload)`` in this transaction: PostgreSQL
        delivers it to the channel's listeners at COMMIT (folding identical
        payloads of one transaction into one), and never if it rolls back."""
        self._run("SELECT pg_notify(?, ?)", [channel, payload])


@cache
def _tx_class(mixins: tuple[type, ...]) -> type:
    """PostgresTx with the parts' (DuckDB) methods: one class per set of parts."""
    return base.compose_tx(PostgresTx, mixins)


class _Connection:
    """What a migration step written as a function of a DuckDB connection
    calls (``con.execute(sql, params).fetchone()``), on this store's cursor."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def execute(self, statement: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        cur = self.store.cur
        cur.execute(self.store.translated(statement), () if params is None else params)
        return cur


class PostgresStore(base.Store[PostgresTx], base.OneThreadTx):
    """The kernel's tables and those of ``parts`` in PostgreSQL. ``dsn``:
    ``"postgres"`` (a throwaway server of its own) or a ``postgresql://`` URI.
    ``schema``: the PostgreSQL schema to keep the tables in (created if
    missing; default: the connection's own search path, ``public``)."""

    def __init__(
        self, dsn: str = "postgres", parts: Iterable[base.StorePart] = (), *, schema: str | None = None
    ) -> None:
        self.parts = base.check_parts(parts)
        self.tables = base.tables_of(self.parts)
        self.timestamp_columns = base.timestamp_columns_of(self.parts)
        self.version = sql.schema_version(self.parts)
        self.schema = schema
        self._all_rows = dict(sql.ALL_ROWS)
        for part in self.parts:
            self._all_rows.update(part.duckdb_rows)
        self._tx: Callable[[PostgresStore], PostgresTx] = _tx_class(tuple(part.duckdb_tx for part in self.parts))
        self._translated: dict[str, str] = {}
        self._table_info: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._lock = threading.Lock()
        self._owner: int | None = None
        self.statements = 0
        self.server: EmbeddedServer | None = None
        self.con: psycopg.Connection[Any] | None = None
        if dsn == "postgres":
            from fanoutsim.kernel.pg import EmbeddedServer, ServerError

            try:
                self.server = EmbeddedServer()
            except ServerError as exc:
                raise StoreError(str(exc)) from None
            self.dsn = self.server.dsn
        else:
            self.dsn = dsn
            self.shared = True  # a server others may reach (a throwaway one is ours alone)
        try:
            self._open()
        except BaseException:
            self._close_all()
            raise

    # -- opening ----------------------------------------------------------------------
    def _open(self) -> None:
        dsn = self.dsn
        if self.server is None:
            if not isinstance(dsn, str) or not is_dsn(dsn):
                raise StoreError(
                    f"store {mask_secrets(str(dsn))!r} is not a PostgreSQL URI: it must start with postgresql://"
                )
            params = parse_uri(dsn)
        else:
            params = {}
        extra: dict[str, Any] = {} if "connect_timeout" in params else {"connect_timeout": CONNECT_TIMEOUT}
        try:
            con = self.con = psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor, **extra)
        except psycopg.Error as exc:
            raise unreachable(dsn, exc) from None
        if con.info.server_version < MIN_SERVER_VERSION:
            raise StoreError(
                f"PostgreSQL at {safe_dsn(dsn)} is version {con.info.server_version // 10000}; "
                f"fanoutsim needs 16 or newer"
            )
        self.cur: psycopg.Cursor[Any] = con.cursor()  # a ClientCursor: the connection's factory
        con.execute("SET TIME ZONE 'UTC'")
        # the schema DuckDB's "main." names: this store's own
        self.home = self.schema if self.schema is not None else home_schema(con, dsn)
        if self.schema is not None:
            con.execute("SELECT set_config('search_path', %s, false)", [pgsql._quote(self.schema)])
        self._check_version()  # before anything is written: a newer schema is refused as it is
        self._migrate()

    def _check_version(self) -> None:
        con = self._live()
        if _scalar(con.execute("SELECT to_regclass('fanoutsim_meta') IS NOT NULL")) is not True:
            return
        found = con.execute(sql.GET_SCHEMA_VERSION).fetchone()
        _duckdb_store.checked_schema_version(self, found, self.version, StoreError)

    def _migrate(self) -> None:
        """Every table's CREATE TABLE IF NOT EXISTS, every migration (each
        idempotent), the schema version: one transaction, under a lock."""
        con = self._live()
        with con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
            self._check_version()  # again, under the lock: another process may have moved it
            if self.schema is not None:
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {pgsql._quote(self.schema)}")
            for statement in pgsql.FUNCTIONS:
                con.execute(statement)
            for statement in pgsql.split(sql.schema(self.parts)):
                con.execute(self.translated(statement), ())
            for steps in sql.migrations(self.parts).values():
                for step in steps:
                    if callable(step):
                        step(_Connection(self))
                    else:
                        for one in pgsql.split(step):
                            con.execute(self.translated(one), ())
            con.execute(self.translated(sql.SET_SCHEMA_VERSION), [str(self.version)])

    def _live(self) -> psycopg.Connection[Any]:
        """The store's connection; a StoreError once the store is closed."""
        if self.con is None:
            raise StoreError(f"{self} is closed")
        return self.con

    # -- the dialect ----------------------------------------------------------------------
    def translated(self, statement: str) -> str:
        """``statement`` (DuckDB's SQL) as PostgreSQL runs it; cached."""
        q = self._translated.get(statement)
        if q is None:
            q = self._translated[statement] = pgsql.translate(statement, self.table_info, self.home)
        return q

    def table_info(self, table: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A table's columns (in order) and primary key, from the catalog."""
        info = self._table_info.get(table)
        if info is None:
            cols = tuple(
                r[0]
                for r in self._live()
                .execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                    "AND NOT attisdropped ORDER BY attnum",
                    [table],
                )
                .fetchall()
            )
            key = tuple(
                r[0]
                for r in self._live()
                .execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary "
                    "ORDER BY array_position(i.indkey, a.attnum)",
                    [table],
                )
                .fetchall()
            )
            if not cols or not key:
                raise ValueError(f"INSERT OR REPLACE INTO {table}: no such table with a primary key")
            info = self._table_info[table] = (cols, key)
        return info

    # -- transactions ----------------------------------------------------------------------
    def _begin(self) -> PostgresTx:
        self._acquire()
        return self._tx(self)  # BEGIN comes with the first statement

    def _commit(self, tx: PostgresTx) -> None:
        self.statements += tx.n + tx.begun
        if not tx.begun:
            self._owner = None
            self._lock.release()
            return
        self.writes += 1
        try:
            self.cur.execute("COMMIT")
        except BaseException:
            self._quiet_rollback()
            raise
        finally:
            self._owner = None
            self._lock.release()

    def _rollback(self, tx: PostgresTx) -> None:
        self.statements += tx.n + tx.begun
        try:
            if tx.begun:
                self._quiet_rollback()
        finally:
            self._owner = None
            self._lock.release()

    def _quiet_rollback(self) -> None:
        try:
            self.cur.execute("ROLLBACK")
        except psycopg.Error:
            pass  # the connection is gone, or the transaction already ended

    def rows(self, table: str) -> list[dict[str, Any]]:
        statement = self._all_rows.get(table)
        if statement is None:
            raise KeyError(f"unknown table {table!r}")
        if self._owner == threading.get_ident():
            raise RuntimeError("rows() reads committed rows; call it outside the open transaction")
        cols = self.tables[table]
        with self._lock:
            cur = self._live().cursor()
            return [base.row_of(cols, r) for r in cur.execute(self.translated(statement), ()).fetchall()]

    # -- fanoutsim_meta (see .record) ----------------------------------------------
    keeps_meta = True

    @property
    def where(self) -> str:
        return str(self)

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self._live().execute(self.translated(sql.GET_META), [key]).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._live().execute(self.translated(sql.SET_META), [key, value])

    def row_count(self, table: str) -> int:
        if table not in self.tables:
            raise KeyError(f"unknown table {table!r}")
        with self._lock:
            return int(_scalar(self._live().execute(f"SELECT count(*) FROM {pgsql._quote(table)}")))

    # -- more connections -----------------------------------------------------------------
    def connect(self) -> psycopg.Connection[Any]:
        """A new connection (autocommit) to the same database, schema and time
        zone: for a LISTEN, or for a transaction that must not hold this
        store's lock (a writer that keeps its transaction open)."""
        con = psycopg.connect(
            self.dsn, autocommit=True, cursor_factory=psycopg.ClientCursor, connect_timeout=CONNECT_TIMEOUT
        )
        con.execute("SET TIME ZONE 'UTC'")
        if self.schema is not None:
            con.execute("SELECT set_config('search_path', %s, false)", [pgsql._quote(self.schema)])
        return con

    def channel(self, name: str) -> str:
        """A NOTIFY channel of this store's schema: ``name.schema`` (stores in
        other schemas of the database do not hear it)."""
        with self._lock:
            schema = _scalar(self._live().execute("SELECT current_schema()"))
        return f"{name}.{schema}"[:63]

    # -- closing ----------------------------------------------------------------------
    def _close_all(self) -> None:
        con, self.con = self.con, None
        if con is not None:
            con.close()
        server, self.server = self.server, None
        if server is not None:
            server.close()

    def close(self) -> None:
        self._close_all()

    def __repr__(self) -> str:
        where = "embedded" if self.server is not None else safe_dsn(self.dsn)
        return f"PostgresStore({where}{', schema=' + self.schema if self.schema else ''})"

    def __str__(self) -> str:
        return f"PostgreSQL {safe_dsn(self.dsn)}" + (f" schema {self.schema}" if self.schema else "")
