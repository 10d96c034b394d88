"""Real LISTEN/NOTIFY for the outbox dispatcher on the wall clock over PostgreSQL.

Over a :class:`~fanoutsim.kernel.store.postgres.PostgresStore`,
:class:`~fanoutsim.designs.outbox.realtime.OutboxRealtime` sends no modelled
hint: the writer's commit transaction calls ``pg_notify(channel, seq)`` beside
the page and the outbox row (``OutboxEngine.notify_in_tx``), so PostgreSQL
delivers the hint at COMMIT and never for a rolled-back one; and the listener
thread here holds a connection of its own that ``LISTEN``\\ s and reads
``notifies()``. What the model draws from a plan happens for real instead:

* PostgreSQL folds identical payloads sent in one transaction into one;
* everything notified while the listener has no connection — the dispatcher
  is down, its backend was killed, a ``silent`` window of the plan's
  ``Notifications`` closed it — is lost: NOTIFY does not queue for a listener
  that is not there. The listener reconnects (after ``reconnect`` seconds) and
  the safety poll finds the rows no hint announced — or, with the config's
  ``catch_up``, every consumer reads at once;
* a paused listener (:meth:`PgListener.pause`) reads nothing for a while; the
  server queues what arrives meanwhile, and it comes late, all at once.

Fault kinds of the real thing, called on the runtime:
``rt.kill_listener()`` terminates the listener's backend
(``pg_terminate_backend``), ``rt.pause_listener(seconds)`` pauses it, and
``rt.hold_commit(page, body, hold=seconds)`` commits a change whose
transaction (on a connection of its own, seq taken at insert) stays open for
``hold`` seconds: later commits become visible before it, which is the
late-commit hole, observed rather than drawn.

The plan's modelled ``drop``, ``delay`` and ``coalesce`` have no real
counterpart here and are refused.
"""

from __future__ import annotations

import threading
import time

import psycopg

from fanoutsim.kernel.runtime.wallclock import wall_us

CHANNEL = "fanoutsim_outbox"


def supports(store) -> bool:
    """A store whose transactions can NOTIFY and which can open a LISTEN connection."""
    return callable(getattr(store, "connect", None)) and callable(getattr(store, "channel", None))


def check_spec(spec) -> None:
    """Only ``silent`` windows of a ``Notifications`` spec are real on PostgreSQL."""
    if spec is None:
        return
    delay = getattr(spec.delay, "mean", spec.delay)
    modelled = [
        name
        for name, off in (("drop", spec.drop == 0), ("coalesce", not spec.coalesce), ("delay", delay == 0))
        if not off
    ]
    if modelled:
        raise ValueError(
            f"Notifications({', '.join(modelled)}=...) is the model's; over PostgreSQL the hints are "
            "real (PostgreSQL folds identical payloads itself): use only silent=..., or "
            "kill_listener() / pause_listener()"
        )


class PgListener:
    """The LISTEN side of one runtime; ``send`` is the NOTIFY side (in a transaction)."""

    def __init__(self, rt, reconnect: float = 0.2) -> None:
        self.rt = rt
        self.store = rt.store
        self.channel = self.store.channel(CHANNEL)
        self.reconnect = reconnect
        self._con: psycopg.Connection | None = None
        self._con_lock = threading.Lock()
        self._paused_until = 0.0
        self.heard = self.lost_connections = 0

    # -- NOTIFY --------------------------------------------------------------------
    def send(self, tx, payloads: list[str]) -> None:
        for payload in payloads:
            tx.notify(self.channel, payload)

    def notify(self, payload: str) -> None:
        """A NOTIFY of its own, outside any commit (a consumer's status write)."""
        with self.store.connect() as con:
            con.execute("SELECT pg_notify(%s, %s)", [self.channel, payload])

    # -- LISTEN --------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        con = self.store.connect()
        con.execute(f'LISTEN "{self.channel}"')
        with self._con_lock:
            self._con = con
        return con

    def disconnect(self) -> None:
        """The listener's connection goes (a crash of the dispatcher process)."""
        with self._con_lock:
            con, self._con = self._con, None
        if con is not None:
            try:
                con.close()
            except psycopg.Error:
                pass

    @property
    def backend_pid(self) -> int | None:
        with self._con_lock:
            return None if self._con is None or self._con.closed else self._con.info.backend_pid

    def kill(self) -> int | None:
        """Terminate the listener's backend from another connection; its pid, or None."""
        pid = self.backend_pid
        if pid is None:
            return None
        with self.store.connect() as con:
            con.execute("SELECT pg_terminate_backend(%s)", [pid])
        return pid

    def pause(self, seconds: float) -> None:
        self._paused_until = time.monotonic() + seconds

    def _silent(self) -> bool:
        silent = getattr(self.rt.channel.spec, "silent", ())
        t = self.rt.now
        return any(a <= t < b for a, b in silent)

    def run(self, engine, stop: threading.Event) -> None:
        """The listener thread of one incarnation: connect, LISTEN, wake every
        consumer at each notification; reconnect after a lost connection."""
        rt, trace = self.rt, self.rt._trace
        alive = lambda: not stop.is_set() and engine is rt.engine  # noqa: E731
        connected = False  # once: a later connect is a reconnect
        while alive():
            if self._silent():
                stop.wait(0.02)
                continue
            try:
                con = self._connect()
            except psycopg.Error:
                stop.wait(self.reconnect)
                continue
            trace.add(wall_us(), "listener_connected", "dispatcher")
            if connected:  # again, after a gap: with catch_up, every consumer reads
                rt._listener_back()
            connected = True
            try:
                while alive():
                    if self._silent():
                        trace.add(wall_us(), "listener_disconnected", "dispatcher", detail="silent")
                        break
                    rest = self._paused_until - time.monotonic()
                    if rest > 0:
                        stop.wait(min(rest, 0.05))
                        continue
                    for n in con.notifies(timeout=0.05):
                        self.heard += 1
                        trace.add(wall_us(), "hint", "dispatcher", what=int(n.payload))
                        rt._wake_all()
            except psycopg.Error as exc:
                if alive():
                    self.lost_connections += 1
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    trace.add(wall_us(), "listener_lost", "dispatcher", detail=first[:120])
                    stop.wait(self.reconnect)
            finally:
                self.disconnect()

    # -- a writer that holds its transaction open ----------------------------------------
    def hold_commit(self, engine, page_id: str, body: str | None, hold: float, topic: str | None = None) -> int:
        """Insert a page change and its outbox row (seq taken now) on a
        connection of its own, keep the transaction open ``hold`` seconds, then
        commit it with its NOTIFY; returns the seq. Runs in the caller's thread."""
        from fanoutsim.designs.outbox.tables import statements as q
        from fanoutsim.kernel.store import pgsql

        now = wall_us()
        topic = topic or f"page:{page_id}"
        con = self.store.connect()
        try:
            # the seq first, in a transaction of its own, as nextval is: it never waits for this one
            seq = con.execute(pgsql.translate(q.RESERVE_OUTBOX_SEQ), ()).fetchone()[0]
            engine.trace.add(now, "reserved", "writer", what=seq)
            with con.transaction():
                con.execute(pgsql.translate(q.UPSERT_PAGE, self.store.table_info), [page_id, body, now])
                con.execute(pgsql.translate(q.INSERT_OUTBOX), [seq, now, topic, "page.updated", page_id, None])
                con.execute("SELECT pg_notify(%s, %s)", [self.channel, str(seq)])
                time.sleep(hold)
            engine.trace.add(wall_us(), "committed", "writer", what=seq, detail="page.updated")
            return seq
        finally:
            con.close()
