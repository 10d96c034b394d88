"""``fanoutsim serve``, ``write`` and ``status`` for every design.

A serving process runs one design's wall-clock runtime over a DuckDB file
(which it then owns: DuckDB lets one process hold a file) until SIGTERM or
SIGINT, and answers on a control endpoint on 127.0.0.1 whose address it
writes to ``FILE.serve.json`` with a token, readable by its owner only; every
request must carry the token, and a body over ``max_body_bytes`` gets 413
(see :mod:`fanoutsim.kernel.runtime.control`).
Nothing here knows a design: each comes from the registry
(:mod:`fanoutsim.designs`) and brings its ``realtime``, ``write`` and
``status`` (see :class:`fanoutsim.kernel.design.Design`).

* :func:`serve` — the design is the scenario's (``design = ...`` in its file)
  or, with no scenario, the one the file records; the file records it in its
  ``fanoutsim_meta`` table, and a file of one design is not served as another.
* :func:`write` — the design's write command (a firing for the reactor, a
  commit for the outbox, a publish for leases), through the server when one
  holds the file, else by opening the file.
* :func:`status` — the design's status as JSON, with ``design`` added; from
  the server, or read from the file (the server need not run).

SIGTERM and SIGINT stop the server gracefully (the work in hand finishes, a
``stop`` row is logged); SIGKILL is a crash, and the next ``serve`` on the
same file resumes from its tables.

**Over PostgreSQL** (``db`` a ``postgresql://`` URI) the database is shared:
several serving processes run on one, each with a ``role`` (a part of the
design's process, :attr:`~fanoutsim.kernel.design.Design.roles`; ``all`` by
default), and there is no sidecar and no control endpoint — ``write`` and
``status`` open the database themselves, like any other process. The design
is recorded in ``fanoutsim_meta`` as in a file; a serving process's start and
clean stop are ``runner_log`` rows. ``trace=PATH`` writes the process's trace
to a Parquet file at a clean stop (what a checker over several processes
merges; a killed process leaves none). Its folder is checked before serving
starts (:func:`trace_problem`), so that a session is not run for a trace that
cannot be written.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC
from typing import Any

from fanoutsim import designs
from fanoutsim.kernel.design import Design
from fanoutsim.kernel.runtime.control import (
    MAX_BODY_BYTES,
    ControlServer,
    check_max_body_bytes,
    server_info,
    server_request,
    sidecar,
    write_sidecar,
)
from fanoutsim.kernel.runtime.roles import check_role as design_role
from fanoutsim.kernel.store.duckdb import StoreError, first_line, has_duckdb_header
from fanoutsim.kernel.store.record import forget_verdicts

__all__ = [
    "serve",
    "write",
    "status",
    "explain",
    "presence",
    "falling_behind",
    "server_rows",
    "file_design",
    "recorded_design",
    "record_design",
    "sidecar",
    "write_sidecar",
    "MAX_BODY_BYTES",
    "existing",
    "shown",
    "is_postgres",
    "check_role",
    "check_store_uri",
]

_META_KEY = "design"
HEARTBEAT_S = 5.0  # how often a serving process writes its presence row
WINDOW_S = 20.0  # the span over which status judges whether the backlog grows
_SAMPLES = 5  # backlog samples across one window (its ends included)
_KEEP_SERVERS = 20  # presence rows kept per database, newest first


def is_postgres(db: str) -> bool:
    """``db`` names a PostgreSQL database (a ``postgresql://`` URI), not a DuckDB file."""
    return db.startswith(("postgresql://", "postgres://"))


def check_store_uri(store: str) -> str:
    """``--store`` of serve / write / status: a ``postgresql://`` URI (a DuckDB file goes with ``--db``)."""
    if store == "postgres":
        raise ValueError(
            "--store postgres would be a throwaway server no other process can reach; serve, "
            "write and status need a postgresql:// URI of a server of yours"
        )
    if not is_postgres(store):
        raise ValueError(f"--store {store!r} is not a postgresql:// URI (a DuckDB file goes with --db)")
    return store


def record_design(store, name: str) -> None:
    """Write the design's name into the store's ``fanoutsim_meta`` table (DuckDB or PostgreSQL)."""
    con = getattr(store, "con", None)
    if con is None:
        return
    statement = "INSERT OR REPLACE INTO fanoutsim_meta VALUES (?, ?)"
    translated = getattr(store, "translated", None)  # PostgreSQL's dialect
    con.execute(translated(statement) if translated is not None else statement, [_META_KEY, name])


def _pg_recorded(db: str) -> str | None:
    """The design a PostgreSQL database records; raises :class:`StoreError` if unreachable."""
    from fanoutsim.kernel.store.postgres import read_meta

    return read_meta(db, _META_KEY)[1]  # read only, worded as every command words it


def recorded_design(db: str) -> str | None:
    """The design ``db`` records (None: none, or the file cannot be read now)."""
    import duckdb

    if is_postgres(db):
        return _pg_recorded(db)
    if not os.path.isfile(db) or os.path.getsize(db) == 0:
        return None
    try:
        con = duckdb.connect(db, read_only=True)
    except duckdb.Error:
        return None  # held by another process, or not DuckDB: opening it says which, properly
    try:
        row = con.execute("SELECT value FROM fanoutsim_meta WHERE key = ?", [_META_KEY]).fetchone()
    except duckdb.Error:
        return None  # no fanoutsim_meta: not a fanoutsim file (yet)
    finally:
        con.close()
    return None if row is None else str(row[0])


def file_design(db: str, design: str | None = None) -> Design:
    """The design of the run in ``db``: its live server's, else the one the file
    records; ``design`` names it for a file that records none (and must agree
    with one that does)."""
    info = None if is_postgres(db) else server_info(db)
    if info is None and not is_postgres(db):
        existing(db)
        fanoutsim_file(db)  # a directory, another file, one fanoutsim did not make: refused untouched
    found = info.get("design") if info is not None else None
    found = found or recorded_design(db)
    if found is not None and design is not None and found != design:
        raise ValueError(f"{db} holds a run of the {found} design, not the {design} design")
    name = found or design
    if name is None:
        if is_postgres(db):
            existing(db)
        if not os.path.exists(db):
            raise ValueError(f"{db}: no such file")
        readable(db)  # a damaged or foreign file says so, not "records no design"
        raise ValueError(
            f"{db} records no design (it was not made by fanoutsim serve); "
            f"name it with --design, one of {', '.join(designs.names())}"
        )
    try:
        return designs.get(name)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None


def existing(db: str) -> None:
    """Reading a run needs its file (its database: one a serve made): a typo
    must not create an empty database."""
    if is_postgres(db):
        if recorded_design(db) is None:
            from fanoutsim.kernel.store.postgres import safe_dsn

            raise StoreError(f"{safe_dsn(db)} holds no fanoutsim run (start one with 'fanoutsim serve --store URI')")
        return
    if not os.path.exists(db):
        raise StoreError(f"{db}: no such file (start a run with 'fanoutsim serve --db {db}')")


def fanoutsim_file(db: str) -> None:
    """Raise :class:`StoreError` naming ``db`` unless it is a DuckDB file fanoutsim
    made (it has the ``fanoutsim_meta`` table); touches nothing. A file held by
    another process passes (opening it says so, properly)."""
    import duckdb

    if os.path.isdir(db):
        raise StoreError(f"{db} is a directory, not a DuckDB database file")
    if not os.path.isfile(db):
        raise StoreError(f"{db} is not a regular file, not a DuckDB database file")
    if not has_duckdb_header(db):
        raise StoreError(f"{db} is not a DuckDB database file; refusing to touch it")
    readable(db)
    try:
        con = duckdb.connect(db, read_only=True)
    except duckdb.IOException:
        return
    try:
        has = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'fanoutsim_meta'"
        ).fetchone()[0]
    finally:
        con.close()
    if not has:
        raise StoreError(
            f"{db} was not made by fanoutsim (it has no fanoutsim_meta table); refusing to touch "
            f"it (start a run in a new file with 'fanoutsim serve --db FILE')"
        )


def readable(db: str) -> None:
    """Raise :class:`StoreError` naming ``db`` when DuckDB cannot read it (damaged,
    not a database); touches nothing. A file held by another process passes."""
    import duckdb

    try:
        con = duckdb.connect(db, read_only=True)
        try:
            con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()
        finally:
            con.close()
    except duckdb.IOException:
        return  # held by another process: opening it says so, properly
    except duckdb.Error as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        raise StoreError(f"cannot open {db}: {lines[0] if lines else type(exc).__name__}") from None


def _needs(design: Design, member: str) -> None:
    if getattr(design, member) is None:
        raise ValueError(f"the {design.name} design does not run on the wall clock (its Design has no {member})")


def check_role(design: Design, role: str, db: str) -> None:
    """``role`` must be one of the design's (or several joined by commas), and a
    part (not ``all``) needs PostgreSQL."""
    design_role(design.roles, design.name, role)
    if role != "all" and not is_postgres(db):
        raise ValueError(
            f"role {role!r} needs a PostgreSQL store (--store postgresql://...): a DuckDB file is "
            f"held by one process, which runs every role"
        )


def serve(
    db: str,
    scenario=None,
    *,
    rate: float | None = None,
    port: int = 0,
    ready=None,
    stop_event: threading.Event | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    role: str = "all",
    trace: str | None = None,
    window: float = WINDOW_S,
) -> int:
    """Run ``scenario`` (its design) over ``db`` on the wall clock until
    SIGTERM/SIGINT (or ``stop_event``); returns an exit status. ``rate``: the
    design's workload at that many events per second instead of the
    scenario's (0: none). ``ready(port)`` is called once it serves (``port``
    None over PostgreSQL: no endpoint). Requests need the token written to
    ``FILE.serve.json``; bodies over ``max_body_bytes`` get 413. ``role``: the
    part of the design's process to run (over PostgreSQL); ``trace``: a
    Parquet file the process's trace is written to at a clean stop.
    ``window``: the seconds over which ``status`` judges whether the backlog
    grows ("falling behind"); the process samples it four times a window and
    writes its presence (pid, role, heartbeat, stop) into ``fanoutsim_meta``.
    ``GET /metrics`` serves the runtime's metrics to a scraper."""
    _check_serve_limits(max_body_bytes, port, window, trace)
    db = os.fspath(db)
    pg = is_postgres(db)
    new_file = not pg and not os.path.lexists(db)  # removed again if serving never starts
    design = _serve_design(db, scenario, role)
    try:
        rt = design.realtime(scenario, db, rate=rate, **({} if role == "all" else {"role": role}))
    except BaseException:
        if new_file:
            _remove_new_file(db)
        raise
    server, previous, serving, watch = None, {}, False, None
    ends = _Ends(db if pg else None)
    try:
        record_design(rt.store, design.name)
        forget_verdicts(rt.store)  # the run goes on: the check of its end (run --store) no longer tells it
        watch = _Watch(db, rt, design, role, float(window))

        def get_status() -> dict:
            return {"design": design.name, **design.status(rt), **watch.status()}

        def post_write(body: dict) -> Any:
            _needs(design, "write")
            return design.write(rt, body)

        # the handlers go in before the server writes FILE.serve.json: a caller
        # that sees the file may signal at once, and must get a clean stop
        stop = stop_event or threading.Event()
        _stop_on_signals(stop, previous)
        if not pg:  # over PostgreSQL every process opens the database itself
            server = _control_server(db, design, rt, get_status, post_write, port, max_body_bytes)
        ends.watch(stop)
        rt.start()
        serving = True
        if ready is not None:
            ready(None if server is None else server.port)
        ends.quietly(_run_until_stopped, rt, watch, stop, trace)
    finally:
        try:
            ends.close(server, watch, rt)
        finally:
            ends.unwatch()
            for sig, handler in previous.items():  # a caller's own handlers (pytest's, a notebook's) come back
                signal.signal(sig, handler)
            if new_file and not serving:  # refused before serving: no file is left behind
                _remove_new_file(db)
    if ends.lost is not None:
        raise ends.error()
    if ends.died is not None:
        why = f"{type(ends.died).__name__}: {first_line(ends.died)}"
        raise RuntimeError(
            f"a thread of the runtime failed ({why}; its traceback is above); stopped serving "
            "(serve again: the run resumes from its store)"
        )
    return 0


class _Ends:
    """What ends serving from a thread of the runtime. Over PostgreSQL (``db``
    a URI; None: a DuckDB file), the first error that says the connection to
    the database is gone (:attr:`lost`): every thread of the runtime meets it,
    and the main thread's heartbeat and stop too; each would print a traceback.
    Instead the first is kept, the process stops, and :meth:`error` is the one
    line serve ends with. Over either store, a runtime thread that dies of any
    other error (a bug) prints its traceback and stops the process too
    (:attr:`died`): a process that served on without that loop would look
    alive and do nothing."""

    def __init__(self, db: str | None) -> None:
        self.db = db
        self.lost: BaseException | None = None
        self.died: BaseException | None = None
        self.errors: tuple[type[BaseException], ...] = ()
        self.stop: threading.Event | None = None
        self.previous = threading.excepthook
        if db is not None:
            import psycopg

            self.errors = (psycopg.OperationalError,)  # of which connection_lost says which are a lost database

    def _end(self) -> None:
        if self.stop is not None:
            self.stop.set()

    def watch(self, stop: threading.Event) -> None:
        """From now on a runtime thread that dies stops the process (silently, of a lost connection)."""
        self.stop = stop
        threading.excepthook = self._hook

    def unwatch(self) -> None:
        if threading.excepthook == self._hook:  # not a later hook of someone else's
            threading.excepthook = self.previous

    def _lost(self, exc: BaseException | None) -> bool:
        if not self.errors or exc is None:
            return False
        from fanoutsim.kernel.store.postgres import connection_lost

        return connection_lost(exc)

    def _hook(self, args: Any) -> None:
        runtimes = getattr(args.thread, "name", "").startswith("fanoutsim-")
        if runtimes and self._lost(args.exc_value):
            self.lost = self.lost or args.exc_value  # said once, in one line, at the end
        else:
            self.previous(args)  # its traceback, as Python prints it
            if not runtimes:  # not the runtime's: serving goes on
                return
            self.died = self.died or args.exc_value
        self._end()

    def quietly(self, step: Callable[..., object], *args: Any) -> None:
        """``step(*args)``; a lost connection is kept, not raised (the clean-up goes on)."""
        try:
            step(*args)
        except self.errors as exc:
            if not self._lost(exc):  # a deadlock, say: an error of its own, not a lost database
                raise
            self.lost = self.lost or exc
            self._end()

    def close(self, server, watch: _Watch | None, rt) -> None:
        """Close what serve opened; a lost connection does not keep the rest open."""
        if server is not None:
            server.close()
        if watch is not None:
            self.quietly(watch.close)  # the stop, written where status finds it
        self.quietly(rt.stop)  # raises once its threads are joined if the database is gone
        self.quietly(rt.close)

    def error(self) -> StoreError:
        from fanoutsim.kernel.store.postgres import mask_secrets

        why = mask_secrets(first_line(self.lost))
        return StoreError(
            f"lost the connection to the database {shown(self.db or '')} ({why}); stopped serving "
            f"(serve again once it is back: the run resumes from the database)"
        )


def _serve_design(db: str, scenario, role: str):
    """The design to serve: the scenario's, which must be the one ``db``
    records (if any), else the recorded one (the reactor for a new database);
    it must run on the wall clock and have ``role``."""
    if scenario is not None:  # a bad role says so before the database is reached
        check_role(designs.design_of(scenario), role, db)
    recorded = recorded_design(db)
    if scenario is not None:
        design = designs.design_of(scenario)
        if recorded is not None and recorded != design.name:
            raise ValueError(
                f"{db} holds a run of the {recorded} design; the scenario is of the "
                f"{design.name} design (serve it over another file)"
            )
    else:
        design = designs.get(recorded or "reactor")
    _needs(design, "realtime")
    check_role(design, role, db)
    return design


def _stop_on_signals(stop: threading.Event, previous: dict) -> None:
    """SIGTERM and SIGINT set ``stop`` (only the main thread may install
    handlers); the handlers they replace go into ``previous``, to put back at
    the end (filled as each goes in, so a failure part-way still restores)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())


def _run_until_stopped(rt, watch: _Watch, stop: threading.Event, trace: str | None) -> None:
    """Sample the process's presence and backlog until ``stop``, then stop the
    runtime and write its trace to ``trace`` (a Parquet file) if asked."""
    watch.tick()
    while not stop.wait(0.2):
        watch.tick()
    rt.stop()
    if trace is not None:
        _write_trace(rt, trace)


def trace_problem(trace: str) -> str | None:
    """Why a trace cannot be written to ``trace`` at the stop (None: it can
    be, as far as can be told before): a folder there, or no writable folder
    for it (the write makes none)."""
    path = os.path.abspath(os.fspath(trace))
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        return "it is a folder; give the Parquet file to write"
    if not os.path.isdir(folder):
        return f"{folder} is not a folder" if os.path.exists(folder) else f"no folder {folder} to write it in"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


def _write_trace(rt, trace: str) -> None:
    """The trace to ``trace``, whole or not at all (written beside it, then
    renamed); a failure is an OSError naming ``trace``, not the database."""
    import pandas as pd

    part = f"{trace}.{os.getpid()}.part"
    try:
        pd.DataFrame(rt.trace()).to_parquet(part)
        os.replace(part, trace)
    except OSError as exc:
        try:
            os.remove(part)
        except OSError:
            pass
        raise OSError(exc.errno, f"could not write the trace: {exc.strerror or exc}", trace) from exc


def _check_serve_limits(max_body_bytes, port, window, trace: str | None = None) -> None:
    check_max_body_bytes(max_body_bytes)
    problem = None if trace is None else trace_problem(trace)
    if problem is not None:  # before serving: the trace is written only at the stop
        raise ValueError(f"trace {trace}: {problem}")
    if isinstance(window, bool) or not isinstance(window, (int, float)) or not 0.2 <= window < 86400:
        raise ValueError(f"window {window!r} must be a number of seconds from 0.2 to 86400")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a TCP port: give 1-65535, or 0 for any free one")


def _control_server(
    db: str, design: Design, rt, get_status, post_write, port: int, max_body_bytes: int
) -> ControlServer:
    """The started endpoint of a serving process over a DuckDB file (its sidecar written)."""
    try:
        return ControlServer(
            db,
            design.name,
            get_status,
            post_write,
            port=port,
            max_body_bytes=max_body_bytes,
            get_metrics=rt.metrics,
            explain=None if design.explain is None else (lambda item: design.explain(rt, item)),
            metric_help=design.metrics,
        ).start()
    except OSError as exc:
        if exc.filename is not None:  # FILE.serve.json could not be written: the CLI names it
            raise
        raise ValueError(
            f"control port {port} on 127.0.0.1: {exc.strerror or exc} (give another --port, or 0 for any free one)"
        ) from None


def _remove_new_file(db: str) -> None:
    import gc

    gc.collect()  # a half-opened store's connection, closed
    for name in (db, f"{db}.wal"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


def write(db: str, req: dict, design: str | None = None) -> Any:
    """The design's write command on ``db`` (``req``: its fields): through the
    server holding the file, or by opening it. ``design``: the design the
    caller means (an error if the file holds another)."""
    db = os.fspath(db)
    d = file_design(db, design)
    info = None if is_postgres(db) else server_info(db)
    if info is not None:
        return server_request(info, "/write", req)
    existing(db)
    _needs(d, "write")
    rt = d.realtime(None, db)
    try:
        answer = d.write(rt, req)
        forget_verdicts(rt.store)  # a new item: the check of the run's end no longer tells it
        return answer
    finally:
        rt.close()


def status(db: str, design: str | None = None) -> dict[str, Any]:
    """The status of the run in ``db``: from its server, or read from the file."""
    db = os.fspath(db)
    d = file_design(db, design)
    info = None if is_postgres(db) else server_info(db)
    if info is not None:
        return server_request(info, "/status")
    existing(db)
    _needs(d, "status")
    rt = d.realtime(None, db)
    try:
        found = {"design": d.name, **d.status(rt)}
        # read, not served: pid and running are of the processes that serve it (or served it last)
        found.update(pid=None, running=False, db=shown(db))
        con = getattr(rt.store, "con", None)
        if con is not None:
            found.update(presence(server_rows(con), d.backlog_name))
        return found
    finally:
        rt.close()


def shown(db: str) -> str:
    """``db`` as status shows it: a PostgreSQL URI without its password."""
    if not is_postgres(db):
        return db
    from fanoutsim.kernel.store.postgres import safe_dsn

    return safe_dsn(db)


def explain(db: str, item: str, design: str | None = None) -> str:
    """The story of one item of the run in ``db`` (a firing id, an outbox seq,
    an event id): through its server, or read from the file."""
    import urllib.parse

    db = os.fspath(db)
    d = file_design(db, design)
    if d.explain is None:
        raise ValueError(f"the {d.name} design tells no stories (its Design has no explain)")
    info = None if is_postgres(db) else server_info(db)
    if info is not None:
        return server_request(info, f"/explain?{urllib.parse.urlencode({'id': item})}")["story"]
    existing(db)
    rt = d.realtime(None, db)
    try:
        return d.explain(rt, item)
    finally:
        rt.close()


# -- watching a served run: its backlog over a window, its servers' presence ------------


def _now_iso() -> str:
    from datetime import datetime

    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _age_s(iso: str | None) -> float | None:
    from datetime import datetime

    if not iso:
        return None
    return max(time.time() - datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp(), 0.0)


def falling_behind(samples: list, name: str, window: float) -> str | None:
    """``"falling behind: pending +169 in 20 s"`` when the backlog rose at every
    sample across a whole window (one rise is noise; a rise at each of
    :data:`_SAMPLES` samples is a trend), else None. ``samples``: ``[[seconds,
    count], ...]``, oldest first."""
    if len(samples) < _SAMPLES or samples[-1][0] - samples[-_SAMPLES][0] < window * 0.9:
        return None
    recent = [n for _, n in samples[-_SAMPLES:]]
    if any(b <= a for a, b in zip(recent, recent[1:])):
        return None
    span = samples[-1][0] - samples[-_SAMPLES][0]
    return f"falling behind: {name} +{recent[-1] - recent[0]} in {span:.0f} s"


class _Watch:
    """What a serving process watches: its design's backlog, sampled every
    ``window / 4`` seconds, and its presence row in ``fanoutsim_meta``
    (``server:<host>:<pid>``: pid, role, start, heartbeat, stop, the recent
    backlog samples), written every :data:`HEARTBEAT_S` seconds over a
    connection of its own, so that ``status`` tells who serves, or served."""

    def __init__(self, db: str, rt, design: Design, role: str, window: float) -> None:
        self.db, self.rt, self.design, self.window = db, rt, design, window
        self.samples: list[list[float]] = []
        self.t0 = time.monotonic()
        self.next_sample = self.next_beat = 0.0
        self.record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "role": role,
            "design": design.name,
            "started_at": _now_iso(),
            "heartbeat_at": None,
            "stopped_at": None,
            "backlog": [],
        }
        self.key = f"server:{self.record['host']}:{self.record['pid']}"
        if is_postgres(db):
            import psycopg

            self.con = psycopg.connect(db, autocommit=True, connect_timeout=5)
            self.upsert = (
                "INSERT INTO fanoutsim_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            )
            self.delete = "DELETE FROM fanoutsim_meta WHERE key = %s"
        else:
            self.con = rt.store.con.cursor()  # its own connection to the file this process holds
            self.upsert = "INSERT OR REPLACE INTO fanoutsim_meta VALUES (?, ?)"
            self.delete = "DELETE FROM fanoutsim_meta WHERE key = ?"
        self._forget_old()

    def _forget_old(self) -> None:
        rows = sorted(server_rows(self.con), key=lambda r: r.get("started_at") or "", reverse=True)
        for old in rows[_KEEP_SERVERS - 1 :]:
            self.con.execute(self.delete, [f"server:{old.get('host')}:{old.get('pid')}"])

    def tick(self) -> None:
        """Sample the backlog and write the heartbeat when their time has come.
        A sample shows in :meth:`status` only once the heartbeat due with it is
        written: whoever sees the first sample may count on a presence row."""
        now = time.monotonic() - self.t0
        samples = self.samples
        if self.design.backlog is not None and now >= self.next_sample:
            self.next_sample = now + self.window / (_SAMPLES - 1)
            samples = [*samples, [round(now, 3), int(self.design.backlog(self.rt))]][-(_SAMPLES * 2) :]
        if now >= self.next_beat:
            self.next_beat = now + min(HEARTBEAT_S, self.window / (_SAMPLES - 1))
            self.beat(samples=samples)
        self.samples = samples

    def beat(self, stopped: bool = False, samples: list[list[float]] | None = None) -> None:
        samples = self.samples if samples is None else samples
        self.record.update(heartbeat_at=_now_iso(), backlog=samples[-_SAMPLES:])
        if stopped:
            self.record["stopped_at"] = self.record["heartbeat_at"]
        self.con.execute(self.upsert, [self.key, json.dumps(self.record)])

    def status(self) -> dict[str, Any]:
        """The backlog part of ``status``: now, the samples, and the warning."""
        name = self.design.backlog_name
        warning = falling_behind(self.samples, name, self.window)
        return {
            "backlog": {
                "name": name,
                "now": self.samples[-1][1] if self.samples else None,
                "window_s": self.window,
                "samples": self.samples[-_SAMPLES:],
            },
            "falling_behind": warning,
        }

    def close(self) -> None:
        try:
            self.beat(stopped=True)
        finally:
            self.con.close()


def server_rows(con) -> list[dict]:
    """The presence rows (``server:*``) of ``fanoutsim_meta`` over a DB-API connection."""
    mark = "%s" if con.__class__.__module__.startswith("psycopg") else "?"
    rows = con.execute(f"SELECT value FROM fanoutsim_meta WHERE key LIKE {mark}", ["server:%"]).fetchall()
    out = []
    for (value,) in rows:
        try:
            out.append(json.loads(value))
        except ValueError:
            continue
    return out


def _up(record: dict) -> bool:
    """A presence row of a live process: no stop, a recent heartbeat and, on this host, its pid alive."""
    if record.get("stopped_at"):
        return False
    age = _age_s(record.get("heartbeat_at"))
    if age is None or age > 3 * HEARTBEAT_S:
        return False
    if record.get("host") == socket.gethostname():
        from fanoutsim.kernel.runtime.control import process_alive

        return process_alive(int(record.get("pid", 0)))
    return True


def presence(rows: list[dict], name: str = "backlog", window: float = WINDOW_S) -> dict[str, Any]:
    """What ``status`` says of the processes that serve (or served) a run: each
    one's role, pid, start, last heartbeat and stop, who is up, and — from a
    live one's samples — whether the backlog grows."""
    servers = sorted(rows, key=lambda r: r.get("started_at") or "", reverse=True)
    listed = [
        {
            "role": r.get("role"),
            "pid": r.get("pid"),
            "host": r.get("host"),
            "up": _up(r),
            "started_at": r.get("started_at"),
            "heartbeat_at": r.get("heartbeat_at"),
            "stopped_at": r.get("stopped_at"),
        }
        for r in servers
    ]
    live = [r for r, shown in zip(servers, listed) if shown["up"]]
    out: dict[str, Any] = {"running": bool(live), "servers": listed}
    if listed:
        last = listed[0]
        out["pid"] = live[0].get("pid") if live else last["pid"]
        if not live:
            out["stopped_at"] = last["stopped_at"]
            out["last_heartbeat_at"] = last["heartbeat_at"]
    if live and live[0].get("backlog"):
        out["falling_behind"] = falling_behind(live[0]["backlog"], name, window)
    return out
