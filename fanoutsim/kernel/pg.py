"""A throwaway PostgreSQL server of its own, for ``store="postgres"``.

The ``pgserver`` package (the ``postgres`` extra) bundles PostgreSQL 16's
binaries; :class:`EmbeddedServer` runs ``initdb`` in a new temporary folder,
starts the server on a Unix socket in it (no TCP port, so nothing else on the
machine can reach it) and, at :meth:`~EmbeddedServer.close`, stops it and
removes the folder. Run as root, pgserver runs the server as a ``pgserver``
system user (PostgreSQL refuses to run as root), creating that user once.

The server is throwaway, so it does not wait for the disk: ``fsync``,
``synchronous_commit`` and ``full_page_writes`` are off (a committed
transaction survives the death of any client process, which is what the crash
tests kill, but not a power cut, which nothing here needs).

Starting takes seconds; within :func:`announced` (``fanoutsim run --store
postgres`` and ``fanoutsim pg start`` turn it on) a start says on stderr what
starts where, then how long it took.

A user's own server needs none of this: give the store a
``postgresql://...`` DSN.

**A shared one** (``fanoutsim pg start|url|stop``): :func:`start_shared` runs
the same server in a folder of its own (``DEFAULT_SHARED_DIR`` unless given)
that outlives the process that started it, so that several processes — the
roles of ``fanoutsim serve --store``, a notebook, ``status`` — share one
database without a server of the user's; :func:`shared_url` gives its URI
(a Unix socket in its folder: only this machine's users reach it) and
:func:`stop_shared` stops it, keeping its data for the next start.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any


class ServerError(RuntimeError):
    """The embedded server could not be started."""


DEFAULT_SHARED_DIR = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "fanoutsim", "pg"
)


def _pgserver() -> ModuleType:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns of a missing XDG_RUNTIME_DIR
            import pgserver
    except ImportError:
        raise ServerError(
            "the embedded PostgreSQL is the pgserver package's; install it with: pip install 'fanoutsim[postgres]'"
        ) from None
    return pgserver


def _tune(dsn: str) -> str:
    """A throwaway server does not wait for the disk (see the module's docstring);
    returns its version (``16.4``)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            con.execute(f"ALTER SYSTEM SET {name} = off")
        con.execute("SELECT pg_reload_conf()")
        row = con.execute("SHOW server_version").fetchone()
    return "" if row is None else str(row[0]).split()[0]


# Starting a server takes seconds (initdb, then the postmaster): within
# :func:`announced` it says so on stderr, so that a command is not silent for
# them. Off by default: a notebook's or a test's output stays its own.
_ANNOUNCE: ContextVar[bool] = ContextVar("fanoutsim_pg_announce", default=False)


@contextmanager
def announced(enabled: bool = True) -> Iterator[None]:
    """Within the block (``enabled``), a server that starts says on stderr
    where, and when it is ready (its folder and timing; never a password)."""
    token = _ANNOUNCE.set(enabled)
    try:
        yield
    finally:
        _ANNOUNCE.reset(token)


class _Start:
    """The two lines of a start within :func:`announced`: what starts where, then ready."""

    def __init__(self, what: str) -> None:
        self.began = time.monotonic()
        self.on = _ANNOUNCE.get()
        if self.on:
            print(f"fanoutsim: starting {what} ...", file=sys.stderr, flush=True)

    def ready(self, version: str) -> None:
        if self.on:
            shown = f"PostgreSQL {version}" if version else "PostgreSQL"
            print(f"fanoutsim: {shown} ready in {time.monotonic() - self.began:.1f} s", file=sys.stderr, flush=True)


def _running(folder: str) -> Any:  # pgserver's PostmasterInfo (pgserver ships no types)
    """The postmaster of the server in ``folder`` if one runs (pgserver's record of it), else None."""
    _pgserver()
    from pathlib import Path

    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(Path(folder).expanduser().resolve())
    return info if info is not None and info.is_running() else None


def shared_url(folder: str = DEFAULT_SHARED_DIR) -> str | None:
    """The URI of the shared server in ``folder`` (None: none runs there)."""
    info = _running(folder)
    return None if info is None else info.get_uri()


def start_shared(folder: str = DEFAULT_SHARED_DIR) -> str:
    """Start the shared server in ``folder`` (made if missing; one that runs
    there already is kept) and return its URI; it runs on after this process."""
    url = shared_url(folder)
    if url is not None:
        return url
    pgserver = _pgserver()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
        start = _Start(f"the shared PostgreSQL (pgserver) in {folder}")
        server = pgserver.get_server(folder, cleanup_mode=None)  # None: not stopped when this process ends
        started: str = server.get_uri()
        start.ready(_tune(started))
    except Exception as exc:  # initdb or pg_ctl failed: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ServerError(f"could not start the embedded PostgreSQL in {folder}: {first}") from None
    return started


def stop_shared(folder: str = DEFAULT_SHARED_DIR, timeout: float = 30.0) -> bool:
    """Stop the shared server in ``folder`` — a fast shutdown: its clients are
    disconnected, what they committed is kept — and wait until it has exited.
    False if none ran there."""
    import signal
    import time

    info = _running(folder)
    if info is None:
        return False
    os.kill(info.pid, signal.SIGINT)  # PostgreSQL's fast shutdown
    deadline = time.monotonic() + timeout
    while info.process.is_running() and info.process.status() != "zombie":
        if time.monotonic() > deadline:
            raise ServerError(f"the embedded PostgreSQL in {folder} (pid {info.pid}) did not stop in {timeout:g} s")
        time.sleep(0.05)
    return True


class EmbeddedServer:
    """One PostgreSQL 16 server in a temporary folder; ``dsn`` reaches it.
    ``close()`` stops it and removes the folder (also at interpreter exit)."""

    def __init__(self) -> None:
        try:
            pgserver = _pgserver()
        except ServerError:
            raise ServerError(
                "store 'postgres' starts a PostgreSQL of its own with the pgserver package; "
                "install it with: pip install 'fanoutsim[postgres]'"
            ) from None
        self.folder = tempfile.mkdtemp(prefix="fanoutsim-pg-")
        self._server = None
        try:
            start = _Start(f"a private PostgreSQL (pgserver) in {self.folder}")
            self._server = pgserver.get_server(self.folder, cleanup_mode="delete")
            self.dsn = self._server.get_uri()
            start.ready(_tune(self.dsn))
        except BaseException as exc:  # initdb or pg_ctl failed, or Ctrl-C / SIGTERM: leave nothing behind
            self.close()
            if not isinstance(exc, Exception):
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ServerError(f"could not start the embedded PostgreSQL: {first}") from None

    @property
    def pid(self) -> int | None:
        """The postmaster's process id, while it runs."""
        return None if self._server is None else self._server.get_pid()

    def close(self) -> None:
        server, self._server = self._server, None
        try:
            if server is not None:
                server.cleanup()
            elif os.path.isdir(self.folder):  # a start cut short: its postmaster may run already
                stop_shared(self.folder)
        except Exception:  # already stopped; the folder goes below anyway
            pass
        if os.path.isdir(self.folder):
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedServer({self.dsn!r})" if self._server is not None else "EmbeddedServer(closed)"
