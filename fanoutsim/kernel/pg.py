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

A user's own server needs none of this: give the store a
``postgresql://...`` DSN.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import warnings


class ServerError(RuntimeError):
    """The embedded server could not be started."""


class EmbeddedServer:
    """One PostgreSQL 16 server in a temporary folder; ``dsn`` reaches it.
    ``close()`` stops it and removes the folder (also at interpreter exit)."""

    def __init__(self) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # platformdirs warns of a missing XDG_RUNTIME_DIR
                import pgserver
        except ImportError:
            raise ServerError("store 'postgres' starts a PostgreSQL of its own with the pgserver package; "
                              "install it with: pip install 'fanoutsim[postgres]'") from None
        self.folder = tempfile.mkdtemp(prefix="fanoutsim-pg-")
        self._server = None
        try:
            self._server = pgserver.get_server(self.folder, cleanup_mode="delete")
            self.dsn = self._server.get_uri()
            self._tune()
        except Exception as exc:  # initdb or pg_ctl failed: say why in one line, leave nothing behind
            self.close()
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ServerError(f"could not start the embedded PostgreSQL: {first}") from None

    def _tune(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as con:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                con.execute(f"ALTER SYSTEM SET {name} = off")
            con.execute("SELECT pg_reload_conf()")

    @property
    def pid(self) -> int | None:
        """The postmaster's process id, while it runs."""
        return None if self._server is None else self._server.get_pid()

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            try:
                server.cleanup()
            except Exception:  # already stopped; the folder goes below anyway
                pass
        if os.path.isdir(self.folder):
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "EmbeddedServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedServer({self.dsn!r})" if self._server is not None else "EmbeddedServer(closed)"
