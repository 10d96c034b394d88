"""One procrastinate worker on a real PostgreSQL, under a seeded load.

The worker is procrastinate's own :class:`procrastinate.worker.Worker` (one
job at a time, ``concurrency=1``), on an async :class:`~procrastinate.PsycopgConnector`;
the producer is a process of its own (:mod:`.producer_process`) with a sync
connector that defers one job at each offset of the load; each job's commit
time is the server's (:mod:`.commitclock`). Three things are wrapped, none
changes the loop:

* the worker's notification handler (``Worker._handle_notification``), to note
  when each ``job_inserted`` hint arrived and to drop it with the case's
  probability before the worker sees it;
* the connector's ``_loop_notify``, which procrastinate calls each time its
  listener has (re)connected and LISTENed, to learn the listener's backend pid
  (what ``pg_terminate_backend`` kills) and to count reconnects;
* the job manager's ``fetch_job``, to note when each fetch was called and
  returned (the fetch's own cost, which the model's ``read_cost`` is).
"""

from __future__ import annotations

import asyncio
import threading
import time

from fanoutsim.designs.outbox.realqueues import commitclock
from fanoutsim.designs.outbox.realqueues.load import Case, PoissonLoad
from fanoutsim.designs.outbox.realqueues.producer import Producer, drive, producing
from fanoutsim.designs.outbox.realqueues.producer_process import TASK
from fanoutsim.designs.outbox.realqueues.record import RealRun

FETCH_SIZE = 1  # procrastinate_fetch_job_v2: ... LIMIT 1 FOR UPDATE SKIP LOCKED


def run(dsn: str, load: PoissonLoad, case: Case, poll_interval: float) -> RealRun:
    """Run ``load`` through one procrastinate worker on ``dsn`` (an empty database)."""
    return asyncio.run(
        producing("procrastinate", dsn, load, case, lambda producer: _work(dsn, case, poll_interval, producer))
    )


def _connector_class():
    from procrastinate import PsycopgConnector
    from procrastinate.connector import LISTEN_TIMEOUT

    class ListenerTracking(PsycopgConnector):
        """Notes the listener's backend pid each time it has LISTENed."""

        def __init__(self, **kwargs) -> None:
            super().__init__(**kwargs)
            self.listener_pid: int | None = None
            self.listens = 0
            self.listening = threading.Event()

        async def _loop_notify(self, on_notification, connection, timeout: float = LISTEN_TIMEOUT) -> None:
            self.listener_pid = connection.info.backend_pid
            self.listens += 1
            self.listening.set()
            return await super()._loop_notify(on_notification=on_notification, connection=connection, timeout=timeout)

    return ListenerTracking


def _wrap_hints(worker, case: Case, heard: dict[int, float], dropped: set[int]) -> None:
    """Note each job's hint as it arrives; drop it with ``case.drop`` before the worker sees it."""
    original, rng = worker._handle_notification, case.drop_rng()

    async def handle(*, channel: str, notification) -> None:
        if notification["type"] == "job_inserted":
            job_id = notification["job_id"]
            heard.setdefault(job_id, time.time())
            if case.drop and rng.random() < case.drop:
                dropped.add(job_id)
                return
        await original(channel=channel, notification=notification)

    worker._handle_notification = handle


def _time_fetches(job_manager, fetches: list) -> None:
    """Note when each ``fetch_job`` was called and returned, and the job it took (if any)."""
    original = job_manager.fetch_job

    async def fetch_job(*args, **kwargs):
        called = time.time()
        job = await original(*args, **kwargs)
        fetches.append((called, time.time(), [] if job is None else [job.id]))
        return job

    job_manager.fetch_job = fetch_job


def _killer(dsn: str, connector):
    """``kill()``: terminate the listener's backend, on a connection of its own."""
    import psycopg

    admin = psycopg.connect(dsn, autocommit=True)

    def kill() -> None:
        if connector.listener_pid is not None:
            admin.execute("SELECT pg_terminate_backend(%s)", (connector.listener_pid,))

    return admin, kill


async def _work(dsn: str, case: Case, poll_interval: float, producer: Producer) -> RealRun:
    from procrastinate import App
    from procrastinate.worker import Worker

    connector = _connector_class()(conninfo=dsn, min_size=1, max_size=4)
    app = App(connector=connector)
    handled: dict[int, float] = {}

    @app.task(name=TASK, pass_context=True)
    async def job(context) -> None:
        handled.setdefault(context.job.id, time.time())

    heard: dict[int, float] = {}
    dropped: set[int] = set()
    fetches: list = []
    _time_fetches(app.job_manager, fetches)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        await asyncio.to_thread(commitclock.install, dsn, "procrastinate_jobs")
        worker = Worker(
            app,
            concurrency=1,
            fetch_job_polling_interval=poll_interval,
            listen_notify=case.listen,
            install_signal_handlers=False,
            name="fanoutsim",
        )
        _wrap_hints(worker, case, heard, dropped)
        running = asyncio.create_task(worker.run())
        admin, kill = _killer(dsn, connector)
        try:
            listening = connector.listening if case.listen else None
            await drive(
                producer, handled, poll_interval, listening=listening, listener="procrastinate's listener", kill=kill
            )
        finally:
            admin.close()
            worker.stop()
            await asyncio.wait_for(running, 30.0)
    return producer.record(
        poll_interval=poll_interval,
        fetch_size=FETCH_SIZE,
        handled=handled,
        heard=heard,
        lost=lambda job_id: not case.listen or job_id in dropped or job_id not in heard,
        reconnects=max(0, connector.listens - 1),
        fetches=fetches,
    )
