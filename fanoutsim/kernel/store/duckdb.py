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
from collections.abc import Callable, Iterable, Sequence
from functools import cache, partial
from typing import Any

import duckdb

from fanoutsim.kernel.store import sql
from fanoutsim.kernel.store.base import (
    OneThreadTx,
    Store,
    StorePart,
    Tx,
    check_parts,
    compose_tx,
    row_of,
    tables_of,
    timestamp_columns_of,
)

# a statement's parameters, bound to its ``?`` in order
Params = Sequence[object] | None
# what a held write's sender asserts of its result (see DuckDBTx._hold)
Check = Callable[[duckdb.DuckDBPyConnection], object]
# the parts' hints (see DuckDBTx): a key per hint, each part's value its own
Hints = dict[str, Any]


class StoreError(RuntimeError):
    """A database file that cannot be opened as a fanoutsim store."""


def checked_schema_version(store: Any, found: Sequence[Any] | None, understood: int, error: type[Exception]) -> int:
    """The schema version a store's meta row ``found`` records (none: 0), or
    ``error`` when it is not a number or newer than the ``understood`` one."""
    text = found[0] if found else 0
    try:
        version = int(text)
    except ValueError:
        raise error(f"{store} has schema version {text!r}, not a number") from None
    if version > understood:
        raise error(
            f"{store} has schema version {version}, newer than this fanoutsim "
            f"understands ({understood}); upgrade fanoutsim"
        )
    return version


def has_duckdb_header(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` starts as a DuckDB database file does (its
    magic bytes), read without opening it as a database."""
    with open(path, "rb") as fh:
        return fh.read(16)[8:12] == b"DUCK"


def first_line(exc: BaseException) -> str:
    """A database's message without its hints and stack: the line that says what
    is wrong (DuckDB's and PostgreSQL's errors alike)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


_row = row_of


# The optimizer passes the store's statements need. Each statement is small and
# by key (an insert, an update or read of a few rows, a claim, a prune); DuckDB
# runs its ~50 optimizer passes on each, about 40% of a 0.45 ms update here.
# Filter pushdown turns ``WHERE id = ?`` into an index lookup (without it an
# update scans the table); top-N and limit pushdown keep ``ORDER BY ... LIMIT``
# reads from sorting all they match. An optimizer never changes a result, only
# the plan, so the rest are switched off for this connection's database only.
OPTIMIZERS_KEPT = ("filter_pushdown", "top_n", "limit_pushdown")


def _trim_optimizers(con: duckdb.DuckDBPyConnection) -> str:
    """The ``SET disabled_optimizers`` that leaves :data:`OPTIMIZERS_KEPT` on
    (the list comes from this DuckDB, so a newer one's new passes are off too)."""
    names = [r[0] for r in con.execute("SELECT name FROM duckdb_optimizers()").fetchall()]
    return "SET disabled_optimizers = '" + ",".join(n for n in names if n not in OPTIMIZERS_KEPT) + "'"


_READS: dict[str, bool] = {}


def _reads_only(statement: str) -> bool:
    r = _READS.get(statement)
    if r is None:
        r = _READS[statement] = statement.lstrip()[:6].upper() == "SELECT"
    return r


_OPENING: dict[str, str] = {}


def _opening(statement: str) -> str:
    """``BEGIN`` and the transaction's first write as one call (DuckDB binds the
    parameters to the last statement)."""
    r = _OPENING.get(statement)
    if r is None:
        r = _OPENING[statement] = "BEGIN; " + statement
    return r


# The most keys of one table the store keeps as a hint (DuckDBTx._insert_new):
# a day of bench-day's executions is 172k, and 250k ids take about 25 MB.
KEYS_KEPT = 250_000
_TOO_MANY = object()  # the hint of a table with more keys than that: not kept


def _scalar(result: duckdb.DuckDBPyConnection) -> Any:
    """The first value of a statement's one row (an aggregate's, a RETURNING's of one insert)."""
    row = result.fetchone()
    assert row is not None, "a statement that returns one row returned none"
    return row[0]


def _key_added(hints: Hints, keys: str, known: set[str], key: str) -> None:
    """A committed insert's key joins the hint, while the hint is that set and not too large."""
    if hints.get(keys) is known:
        if len(known) >= KEYS_KEPT:
            hints[keys] = _TOO_MANY
        else:
            known.add(key)


class DuckDBTx(Tx):
    """Every statement goes through :meth:`_run`: DuckDB aborts the whole
    transaction on any error, and a later COMMIT would then roll back without
    a word, so the error is kept in ``failed`` for the commit to refuse.

    ``BEGIN`` waits for the first write. The reads before it need no snapshot
    of their own: every transaction of this store holds the store's lock, and
    one process owns the file, so nothing can commit between them. A poll that
    finds nothing thus costs its reads alone, not BEGIN and COMMIT around them
    (at a 50 ms poll interval that was two thirds of an idle runner's work).

    A part's mixin runs its statements through ``_run``. It may also keep
    *hints* in ``self.hints`` (the store's dict, a key per part): what it
    knows of the committed rows (the newest firing of each stream, whether
    anything is pending, a small table as last read), so that a step can skip
    a statement that cannot find anything new. A hint says what the committed
    rows say; a write changes it only through :meth:`_on_commit`, so a rollback (a crash)
    leaves it as the tables are. It lives in the store object and dies with
    the process; a new store over the same file starts without hints."""

    __slots__ = ("c", "failed", "n", "_begun", "hints", "committed", "held")

    # the hints outlive the transaction: one process owns the database and
    # every transaction holds the store's lock, so only this store's commits
    # change what they bound
    keeps_hints = True

    def __init__(self, con: duckdb.DuckDBPyConnection, hints: Hints | None = None) -> None:
        self.c = con
        self.failed: BaseException | None = None
        self.n = 0  # statements run, for the store's count
        self._begun = False
        self.hints: Hints = {} if hints is None else hints
        # what to do to the hints once this commits
        self.committed: list[Callable[[], object]] | None = None
        self.held: tuple[str, Params, Check | None] | None = None  # a write not sent yet (see _hold)

    @property
    def begun(self) -> bool:
        """Whether this transaction has written. A held write is sent first,
        so the answer (and what a part does with it) is as if it had not been held."""
        if self.held is not None:
            self._release()
        return self._begun

    def _on_commit(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` after this transaction commits (in the order given);
        never if it rolls back."""
        if self.committed is None:
            self.committed = [fn]
        else:
            self.committed.append(fn)

    def _run(self, statement: str, params: Params = None) -> duckdb.DuckDBPyConnection:
        self._refuse_if_failed()  # say why, rather than DuckDB's "transaction is aborted"
        if self.held is not None:
            self._release()
        self.n += 1
        if not self._begun and not _reads_only(statement):
            # the first write opens the transaction, in the same round trip
            self._begun = True
            self.n += 1
            return self._send(_opening(statement), params)
        return self._send(statement, params)

    def _hold(self, statement: str, params: Params = None, check: Check | None = None) -> None:
        """Run a write whose result the caller does not need at once, perhaps later:
        a first write is held until the transaction sends anything else (then
        it opens the transaction, as in :meth:`_run`) or commits (then it goes
        alone, committed by DuckDB as it runs: one round trip, not BEGIN and
        COMMIT around it). Many of the engine's transactions are one such write
        (a watermark move, a finish, a claim). An error of a held write would be raised by
        whatever sends it (a later statement of the block, or the commit), so
        a part holds only writes that cannot fail on a constraint — an update
        by key of columns no key or index covers — and a caller sees every
        error where it would without holding.

        ``check``, if given, is called with the write's result once it is
        sent: what the caller would have asserted of it (the rows an update
        found), asserted whenever the write goes."""
        self._refuse_if_failed()
        if self.held is None and not self._begun:
            self.held = (statement, params, check)
        else:
            self._run_checked(statement, params, check)

    def _run_checked(self, statement: str, params: Params, check: Check | None) -> None:
        """:meth:`_run`, then ``check`` (if any) on the result: a held write sent."""
        result = self._run(statement, params)
        if check is not None:
            check(result)

    def _insert_new(self, statement: str, params: Params, keys: str, key: str | None) -> None:
        """Run an insert whose one constraint that can fail is its table's
        primary key, ``key`` (None: the caller cannot vouch for the row's
        values converting, or for ``key`` being the text the table reads back).
        ``keys`` is the statement that reads the table's keys as that text; it
        also names their hint.

        The store keeps those keys as a hint, read when first needed (a count,
        then the keys) and kept in step by each commit. An insert whose key is not
        among them cannot fail, so it is held (:meth:`_hold`): a transaction of
        that one insert (a dispatch, a firing) is sent alone, without BEGIN and
        COMMIT. Any other insert is sent now, so that DuckDB's error (a
        duplicate key) comes from this call, as it would without holding.
        A part that deletes rows of the table says so with :meth:`_keys_gone`.

        The hint holds at most :data:`KEYS_KEPT` keys: a table that grows past
        that (a long-lived file) has its inserts sent at once from then on,
        rather than the store's memory growing with it."""
        hints = self.hints
        # the keys (a set of str), _TOO_MANY or None (not read yet): told apart by
        # identity, which mypy does not follow for an object() sentinel
        known: Any = hints.get(keys)
        may_hold = key is not None and self.held is None and not self._begun and self.keeps_hints
        if may_hold and known is None:
            known = hints[keys] = self._committed_keys(keys)
        if known is _TOO_MANY:
            self._run(statement, params)
            return
        if may_hold and key not in known:
            self._hold(statement, params)
        else:
            self._run(statement, params)
        if key is None:  # a key in another spelling would not match the hint's
            self._on_commit(lambda: hints.pop(keys, None))
        elif known is not None:
            self._on_commit(partial(_key_added, hints, keys, known, key))

    def _committed_keys(self, keys: str) -> set[str] | object:
        """The hint ``keys`` as the table now holds it: its keys, or
        :data:`_TOO_MANY` past :data:`KEYS_KEPT` (counted first, not read)."""
        if _scalar(self._run(f"SELECT count(*) FROM ({keys})")) >= KEYS_KEPT:
            return _TOO_MANY
        return {r[0] for r in self._run(keys).fetchall()}

    def _keys_gone(self, keys: str, gone: Iterable[str]) -> None:
        """Once this commits, the keys ``gone`` (as the table reads them back)
        are no longer in the table that the hint ``keys`` holds."""
        hints = self.hints

        def committed() -> None:
            known = hints.get(keys)
            if known is not None and known is not _TOO_MANY:
                known.difference_update(gone)

        self._on_commit(committed)

    def _release(self) -> None:
        assert self.held is not None, "nothing held to release"
        statement, params, check = self.held
        self.held = None
        self._run_checked(statement, params, check)

    def _send(self, statement: str, params: Params) -> duckdb.DuckDBPyConnection:
        statement, params = sql.native_timestamps(statement, params)
        try:
            return self.c.execute(statement, params)
        except (duckdb.InterruptException, RuntimeError) as exc:
            if isinstance(exc, duckdb.InterruptException) or str(exc) == "Query interrupted":
                # a Ctrl-C that came while DuckDB ran the statement: it is the user's interrupt
                self.failed = exc
                raise KeyboardInterrupt from exc
            raise
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.ConstraintException) and "duplicate key" in str(exc).lower():
                self.failed = KeyError(f"duplicate key: {str(exc).strip()}")  # as the memory store says it
                raise self.failed from None
            self.failed = exc
            raise

    def enter_namespace(self, name: str | None, ddl: str = "") -> None:
        """Make schema ``name`` (``None``: ``main``) the first one later
        statements find, ``main`` after it; the first time, create it and run
        ``ddl`` in it. Outside a transaction (a connection setting)."""
        if name is None:
            self.c.execute("RESET search_path")
            return
        self.c.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
        self.c.execute(f"SET schema = '{name}'")
        if ddl:
            self.c.execute(ddl)
        self.c.execute(f"SET search_path = '{name},main'")

    # -- runner_log -----------------------------------------------------
    def log_runner(self, at: int, event: str, detail: str | None = None) -> int:
        return int(_scalar(self._run(sql.LOG_RUNNER, [at, event, detail])))


@cache
def _tx_class(mixins: tuple[type, ...]) -> type:
    """DuckDBTx with the parts' methods (one class per set of parts)."""
    return compose_tx(DuckDBTx, mixins)


class DuckDBStore(Store[DuckDBTx], OneThreadTx):
    """The kernel's tables and those of ``parts`` (StoreParts), in DuckDB:
    ``":memory:"`` or a file. A file is brought to the composed schema at open:
    every table's ``CREATE TABLE IF NOT EXISTS``, then every migration (each
    idempotent), then the schema version."""

    def __init__(self, path: str = ":memory:", parts: Iterable[StorePart] = ()) -> None:
        self.path = path
        self.parts = check_parts(parts)
        self.tables = tables_of(self.parts)
        self.timestamp_columns = timestamp_columns_of(self.parts)
        self.version = sql.schema_version(self.parts)
        self._all_rows = dict(sql.ALL_ROWS)
        for part in self.parts:
            self._all_rows.update(part.duckdb_rows)
        self._tx: Callable[[duckdb.DuckDBPyConnection, Hints], DuckDBTx] = _tx_class(
            tuple(part.duckdb_tx for part in self.parts)
        )
        if path != ":memory:" and os.path.lexists(path):
            if not os.path.isfile(path):
                raise StoreError(f"{path} is not a file; refusing to touch it")
            if os.path.getsize(path) > 0:
                if not has_duckdb_header(path):
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
        self.hints: Hints = {}  # the parts' hints (see DuckDBTx): bounds of the committed rows
        self._owner: int | None = None
        try:
            self.con.execute("SET TimeZone = 'UTC'")
            # the engine sends one small statement at a time: more threads only
            # add their scheduling to each (about 1.4x per statement measured)
            self.con.execute("SET threads = 1")
            self.con.execute(_trim_optimizers(self.con))
            self._migrate()
        except duckdb.Error as exc:  # a damaged file can open and fail at its first read
            self.con.close()
            raise StoreError(f"cannot use {path}: {first_line(exc)}") from None

    def _probe(self) -> None:
        """Check the schema version read-only: a refused file keeps its bytes and its WAL."""
        try:
            probe = self._connect(read_only=True)
        except duckdb.ConnectionException:
            return  # this process has it open read-write already: no WAL to replay; _migrate checks
        try:
            self._check_version(probe)
        except duckdb.Error as exc:  # damaged past its header
            raise StoreError(f"cannot use {self.path}: {first_line(exc)}") from None
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
            raise StoreError(f"cannot open {path}: {first_line(exc)}") from None

    def _check_version(self, con: duckdb.DuckDBPyConnection) -> None:
        if not _scalar(con.execute(sql.HAS_META)):
            return  # a DuckDB file fanoutsim has not used yet
        checked_schema_version(self.path, con.execute(sql.GET_SCHEMA_VERSION).fetchone(), self.version, StoreError)

    def __repr__(self) -> str:
        return f"DuckDBStore({self.path!r})"

    def _migrate(self) -> None:
        try:
            self._check_version(self.con)  # again: the file may have changed since the probe
        except StoreError:
            self.con.close()
            raise
        self.con.execute("BEGIN")
        self.con.execute(sql.schema(self.parts))
        for statements in sql.migrations(self.parts).values():  # each statement is idempotent
            for statement in statements:
                if callable(statement):  # a step SQL alone cannot say: a function of the connection
                    statement(self.con)
                else:
                    self.con.execute(statement)
        self.con.execute(sql.SET_SCHEMA_VERSION, [str(self.version)])
        self.con.execute("COMMIT")

    def _begin(self) -> DuckDBTx:
        self._acquire()
        return self._tx(self.con, self.hints)  # BEGIN comes with the first write

    def _commit(self, tx: DuckDBTx) -> None:
        try:
            check = None
            if tx.held is not None:  # its one write: sent alone, DuckDB commits it as it runs
                statement, params, check = tx.held
                tx.held = None
                tx.n += 1
                self.statements += tx.n
                result = tx._send(statement, params)
                self.writes += 1
            else:
                self.statements += tx.n + tx._begun  # BEGIN is in n; COMMIT is one more
                if not tx._begun:  # it only read: nothing to commit
                    return
                self.writes += 1
                try:
                    self.con.execute("COMMIT")
                except BaseException:
                    try:
                        self.con.execute("ROLLBACK")
                    except duckdb.Error:
                        pass  # the failed commit already ended the transaction
                    raise
            if tx.committed is not None:  # under the lock: no other transaction sees old hints
                for fn in tx.committed:
                    fn()
            if check is not None:  # committed already: a failed check says a hint was wrong
                check(result)
        finally:
            self._owner = None
            self._lock.release()

    def _rollback(self, tx: DuckDBTx) -> None:
        tx.held = None  # never sent: nothing of it to undo
        self.statements += tx.n + tx._begun
        try:
            if tx._begun:
                self.con.execute("ROLLBACK")
        finally:
            self._owner = None
            self._lock.release()

    def rows(self, table: str) -> list[dict[str, Any]]:
        statement = self._all_rows.get(table)
        if statement is None:
            raise KeyError(f"unknown table {table!r}")
        if self._owner == threading.get_ident():  # else: waiting on our own lock, forever
            raise RuntimeError("rows() reads committed rows; call it outside the open transaction")
        cols = self.tables[table]
        with self._lock:
            return [_row(cols, r) for r in self.con.execute(statement).fetchall()]

    # -- fanoutsim_meta (see .record) ----------------------------------------------
    keeps_meta = True

    @property
    def where(self) -> str:
        return self.path

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self.con.execute(sql.GET_META, [key]).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self.con.execute(sql.SET_META, [key, value])

    def row_count(self, table: str) -> int:
        if table not in self.tables:
            raise KeyError(f"unknown table {table!r}")
        with self._lock:
            return int(_scalar(self.con.execute(f"SELECT count(*) FROM {table}")))

    def close(self) -> None:
        self.con.close()
