"""One pgqueuer worker on a real PostgreSQL, under a seeded load.

The worker is pgqueuer's own :class:`pgqueuer.QueueManager` ``run`` loop over
an :class:`pgqueuer.AsyncpgDriver` on one asyncpg connection, as pgqueuer's
README starts one (``pgqueuer[asyncpg]``) — pgqueuer runs its queries and its
LISTEN on that one connection — with one entrypoint. Not on its
``PsycopgDriver``: there a watcher task waits in ``connection.notifies(timeout=1.0,
stop_after=1)``, which holds psycopg's connection lock until a notification
comes or a second passes, so every query of the worker waits for the next
NOTIFY (with hints on, p90 60 ms and p99 200 ms in a trial of 60 jobs, against
3.5 and 18 ms on asyncpg). The producer is a process of its own (:mod:`.producer_process`) that enqueues
through :class:`pgqueuer.queries.SyncQueries`; each job's commit time is the
server's (:mod:`.commitclock`).

pgqueuer's trigger NOTIFYs a ``table_changed_event`` for every statement on its
queue table: the producer's INSERT (the job's hint), and the worker's own
dequeue (UPDATE) and completion (DELETE, from its status-log buffer). The
driver's listener callback is wrapped to note when each INSERT's event
arrived (they arrive in commit order, so the k-th is the k-th job's hint) and
to drop each table-changed event with the case's probability; a case without
LISTEN drops them all — pgqueuer has no switch to turn LISTEN off, and its
listener health check rides the same channel (its events pass untouched).

A terminated backend is not a listener's reconnect here: it is the worker's
only connection, so ``QueueManager.run`` fails. The case's terminations are
therefore not applied to pgqueuer (its "some lost" case is the drops alone).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta

from fanoutsim.designs.outbox.realqueues import commitclock
from fanoutsim.designs.outbox.realqueues.load import Case, PoissonLoad
from fanoutsim.designs.outbox.realqueues.producer import Producer, drive, producing
from fanoutsim.designs.outbox.realqueues.producer_process import TASK
from fanoutsim.designs.outbox.realqueues.record import RealRun

BATCH_SIZE = 10  # QueueManager.run(batch_size=10), pgq run --batch-size: the library's default


def run(dsn: str, load: PoissonLoad, case: Case, poll_interval: float, batch_size: int = BATCH_SIZE) -> RealRun:
    """Run ``load`` through one pgqueuer worker on ``dsn`` (an empty database)."""
    return asyncio.run(
        producing("pgqueuer", dsn, load, case, lambda producer: _work(dsn, case, poll_interval, batch_size, producer))
    )


def asyncpg_params(dsn: str) -> dict:
    """``asyncpg.connect`` keywords for a libpq DSN (a URI or ``key=value`` pairs)."""
    from psycopg.conninfo import conninfo_to_dict

    names = {"host": "host", "port": "port", "user": "user", "password": "password", "dbname": "database"}
    return {
        names[k]: (int(v) if k == "port" else v)
        for k, v in conninfo_to_dict(dsn).items()
        if k in names and v not in (None, "")
    }


class HintTap:
    """Wraps the worker's listener callback: notes the INSERT events, drops table events."""

    def __init__(self, case: Case) -> None:
        self.drop = case.drop if case.listen else 1.0
        self.rng = case.drop_rng()
        self.inserts: list[float] = []  # when the k-th INSERT's event arrived
        self.dropped: set[int] = set()  # the k of each dropped INSERT event
        self.events: list[tuple[float, str, int]] = []  # every table event: (heard, operation, dropped)
        self.listening = threading.Event()

    def wrap(self, callback):
        def heard(payload) -> None:
            try:
                event = json.loads(payload)
            except ValueError:
                event = {}
            if event.get("type") == "table_changed_event":
                k, now = None, time.time()
                if event.get("operation") == "insert":
                    k = len(self.inserts)
                    self.inserts.append(now)
                drop = bool(self.drop and (self.drop >= 1 or self.rng.random() < self.drop))
                self.events.append((now, str(event.get("operation")), int(drop)))
                if drop:
                    if k is not None:
                        self.dropped.add(k)
                    return
            callback(payload)

        return heard


def _time_dequeues(queries, fetches: list) -> None:
    """Note when each dequeue was called and returned, and the jobs it took."""
    original = queries.dequeue

    async def dequeue(*args, **kwargs):
        called = time.time()
        jobs = await original(*args, **kwargs)
        fetches.append((called, time.time(), [j.id for j in jobs]))
        return jobs

    queries.dequeue = dequeue


def _driver(connection, tap: HintTap):
    from pgqueuer import AsyncpgDriver

    class Tapped(AsyncpgDriver):
        async def add_listener(self, channel, callback) -> None:
            await super().add_listener(channel, tap.wrap(callback))
            tap.listening.set()

    return Tapped(connection)


async def _work(dsn: str, case: Case, poll_interval: float, batch_size: int, producer: Producer) -> RealRun:
    import asyncpg
    from pgqueuer import QueueManager
    from pgqueuer.queries import Queries

    tap = HintTap(case)
    handled: dict[int, float] = {}
    con = await asyncpg.connect(**asyncpg_params(dsn))
    try:
        queries = Queries(_driver(con, tap))
        fetches: list = []
        _time_dequeues(queries, fetches)
        await queries.install()
        await asyncio.to_thread(commitclock.install, dsn, queries.qbe.settings.queue_table)
        qm = QueueManager(queries)

        @qm.entrypoint(TASK)
        async def job(j) -> None:
            handled.setdefault(j.id, time.time())

        running = asyncio.create_task(qm.run(dequeue_timeout=timedelta(seconds=poll_interval), batch_size=batch_size))
        try:
            await drive(producer, handled, poll_interval, listening=tap.listening, listener="pgqueuer's worker")
        finally:
            qm.shutdown.set()
            await asyncio.wait_for(running, 30.0)
    finally:
        await con.close()
    # the k-th INSERT event is the k-th commit's hint (one producer, one job per statement)
    order = {job_id: k for k, job_id in enumerate(producer.ids())}
    heard = {job_id: tap.inserts[k] for job_id, k in order.items() if k < len(tap.inserts)}
    return producer.record(
        poll_interval=poll_interval,
        fetch_size=batch_size,
        handled=handled,
        heard=heard,
        lost=lambda job_id: order[job_id] in tap.dropped or job_id not in heard,
        reconnects=0,
        fetches=fetches,
        events=tap.events,
    )
