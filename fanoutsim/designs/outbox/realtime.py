"""The outbox dispatcher on the wall clock: the same loops, threads, real time.

The counterpart of :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`.
The loops, hints and API are :class:`~.runtime.OutboxRuntime`'s, written once
for both clocks; this face picks the wall driver
(:class:`~fanoutsim.kernel.runtime.faces.WallFace`, over
:class:`~fanoutsim.kernel.runtime.wallclock.SteppedWallRuntime`: a thread per
loop, ``time.time()`` as the clock, real waits) and plugs in what only the
wall clock has: PostgreSQL's real LISTEN/NOTIFY (:mod:`.pglisten`). The store
is a DuckDB file by default, so the outbox, the cursors, the parked and the
deferred rows outlive the process: a new ``OutboxRealtime`` over the same file
(after a stop, a crash or ``kill -9``) picks up where the cursors point.

Times a user passes — workload ``start``/``stop``, fault windows, silent
windows, ``CrashAt``, and a commit's ``due_at`` — are seconds since
:meth:`OutboxRealtime.start` (before it: since the runtime was made), the
scale of :attr:`OutboxRealtime.now`, as they are virtual seconds since the
start under SimPy: ``rt.commit("p", due_at=rt.now + 3)`` is due in three
seconds, on either clock. ``due_at`` also takes a timezone-aware ``datetime``.

A crash is an instant: every store step goes through one lock, and the crash
takes the engine away under it, so no thread of the dead incarnation touches
the tables afterwards. The listener disconnects, in-memory state (bus
subscribers, retry counts, gap timers) dies; after the downtime a new engine
starts over the same tables.

Life cycle::

    rt = OutboxRealtime(OutboxConfig(safety_poll_interval=1.0), store="outbox.duckdb")
    rt.register_consumer("indexer", fn=index_row, timeout=2.0)
    rt.start()                 # threads run in the background; returns at once
    rt.commit("p1", "hello")   # any thread
    rt.stop()                  # graceful and bounded: the row in hand finishes
    rt.close()                 # releases the file

``start()`` twice raises; ``stop()`` twice is a no-op; ``commit()`` after
``stop()`` raises (reads work until ``close()``). Every start and every clean
stop is a row of ``runner_log``, so a start that follows no stop marks a kill.

``role`` runs one part of the dispatcher, several processes sharing one
PostgreSQL database (:mod:`.roles`: ``dispatcher``, ``consumers``,
``retention``, ``writers``; ``all``, the default, is the whole dispatcher).
"""

from __future__ import annotations

from fanoutsim.designs.faults import Notifications
from fanoutsim.designs.outbox.engine import OutboxEngine
from fanoutsim.designs.outbox.roles import BUS, CONSUMERS
from fanoutsim.designs.outbox.runtime import OutboxRuntime
from fanoutsim.kernel.runtime.faces import WallFace


class OutboxRealtime(OutboxRuntime, WallFace):
    """The outbox dispatcher running for real, on the wall clock:
    ``OutboxRealtime(config=None, store="outbox.duckdb", faults=None, *, seed=0,
    trace=True, stop_timeout=10.0, role="all")``."""

    _api_words = "commit and the consumer API"  # what a stopped dispatcher's message says needs it running

    # -- what only the wall clock has -------------------------------------------------
    def _setup(self) -> None:
        if callable(getattr(self.store, "channel", None)):  # PostgreSQL: real LISTEN/NOTIFY
            from fanoutsim.designs.outbox import pglisten

            pglisten.check_spec((self.plan.of(Notifications) or [None])[0] if self.plan else None)
            self._pg = pglisten.PgListener(self)
        super()._setup()
        self.channel.connected = False  # nobody LISTENs until start()

    def _started(self, start_us: int) -> None:
        self.channel.start_us = start_us  # silent windows are seconds since start too

    def _start_loops(self, engine: OutboxEngine) -> None:
        super()._start_loops(engine)
        if self._pg is not None and (self._runs(BUS) or self._runs(CONSUMERS)):
            # the LISTEN connection, a thread of its own: where hints wake the bus or a consumer
            self._spawn_thread("listener", self._pg.run, engine, self._stop)

    def _crashed(self) -> None:
        super()._crashed()
        if self._pg is not None:
            self._pg.disconnect()  # the listener's connection dies with the process

    # -- PostgreSQL's LISTEN/NOTIFY, for real (pglisten.py) ----------------------------
    def _pg_listener(self):
        if self._pg is None:
            raise RuntimeError("the listener's faults are PostgreSQL's: open the runtime over a PostgreSQL store")
        return self._pg

    def kill_listener(self) -> int | None:
        """Terminate the LISTEN connection's backend (``pg_terminate_backend``):
        every hint until it reconnects is lost. Its pid, or None if not connected."""
        return self._pg_listener().kill()

    def pause_listener(self, seconds: float) -> None:
        """The listener reads nothing for ``seconds``; PostgreSQL queues the hints meanwhile."""
        self._pg_listener().pause(seconds)

    def hold_commit(self, page_id: str, body: str | None = None, *, hold: float, topic: str | None = None) -> int:
        """Commit a page change whose transaction (its own connection; seq taken
        at insert) stays open ``hold`` seconds; blocks the caller that long."""
        pg = self._pg_listener()
        with self._proc:
            engine = self._engine_or_raise()
        return pg.hold_commit(engine, page_id, body, hold, topic=topic)
