"""The outbox dispatcher on the wall clock: the same loops, threads, real time.

The counterpart of :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`.
The loops, hints and API are :class:`~.runtime.OutboxRuntime`'s, written once
for both clocks; this face picks the wall driver
(:class:`~fanoutsim.kernel.runtime.wallclock.SteppedWallRuntime`: a thread per
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

from typing import Any

from fanoutsim.designs.faults import Notifications
from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.engine import OutboxEngine
from fanoutsim.designs.outbox.host import checked_outbox_config
from fanoutsim.designs.outbox.roles import BUS, CONSUMERS
from fanoutsim.designs.outbox.runtime import OutboxRuntime
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.wallclock import SteppedWallRuntime


class OutboxRealtime(OutboxRuntime, SteppedWallRuntime):
    """The outbox dispatcher running for real, on the wall clock."""

    def __init__(
        self,
        config: OutboxConfig | None = None,
        store: Any = "outbox.duckdb",
        faults=None,
        *,
        seed: int = 0,
        trace: bool = True,
        stop_timeout: float = 10.0,
        role: str = "all",
    ) -> None:
        self._take_role(role)  # one part of the dispatcher (see .roles), refused before the store is opened
        self.config = checked_outbox_config(config, seed)
        self.seed = seed
        self._open(seed, store, faults, trace, stop_timeout, opener=open_store)
        if callable(getattr(self.store, "channel", None)):  # PostgreSQL: real LISTEN/NOTIFY
            from fanoutsim.designs.outbox import pglisten

            pglisten.check_spec((self.plan.of(Notifications) or [None])[0] if self.plan else None)
            self._pg = pglisten.PgListener(self)
        self._setup()
        self.channel.connected = False  # nobody LISTENs until start()
        self.engine: OutboxEngine | None = self._new_engine(0)
        self._service(self._safety_poll(), "safety-poll")  # from start()

    # -- what only the wall clock has -------------------------------------------------
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

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return (
                f"the dispatcher is {self._state}; commit and the consumer API need a running (or "
                f"not yet started) OutboxRealtime: make a new one over the same store"
            )
        return "the dispatcher is down (crashed); it restarts after its downtime, or call restart()"

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
