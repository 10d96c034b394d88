"""The producer process of a real run: an application that enqueues jobs, and nothing of fanoutsim.

Run by path (``python -P producer_process.py``), so that it imports neither
fanoutsim nor anything beside this file: only the standard library and the
queue library. It reads one JSON line from stdin — ``library``, ``dsn``,
``offsets`` (seconds) — connects and writes ``["ready", null]``; reads
``["go", t0]`` (a ``time.monotonic()`` reading: one clock on the machine) and
enqueues one job at ``t0 + offset`` for each offset, through the library's own
enqueue call; then writes ``["done", [[job_id, committed_at], ...]]``, each
``committed_at`` read when the call returned (the INSERT committed, its NOTIFY
sent). A failure is written as ``["error", "..."]``. The DSN comes on stdin,
never on the command line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time

# the names the workers register (procrastinate's task, pgqueuer's entrypoint)
TASK = "fanoutsim_rq_job"


@contextlib.contextmanager
def procrastinate_enqueuer(dsn: str):
    """procrastinate's sync ``Task.defer`` on a sync connector of one connection."""
    from procrastinate import App, SyncPsycopgConnector

    # it warns that an App made in __main__ cannot be found by a worker: this one defers by name only
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    app = App(connector=SyncPsycopgConnector(conninfo=dsn, min_size=1, max_size=1))
    task = app.task(name=TASK)(_noop)
    with app.open():
        yield task.defer


@contextlib.contextmanager
def pgqueuer_enqueuer(dsn: str):
    """pgqueuer's ``SyncQueries.enqueue`` on one autocommit psycopg connection."""
    import psycopg
    from pgqueuer.db import SyncPsycopgDriver
    from pgqueuer.queries import SyncQueries

    with psycopg.connect(dsn, autocommit=True) as con:
        queries = SyncQueries(SyncPsycopgDriver(con))
        yield lambda: queries.enqueue(TASK, None)[0]


ENQUEUERS = {"procrastinate": procrastinate_enqueuer, "pgqueuer": pgqueuer_enqueuer}


def _noop() -> None:
    return None


def _say(what: str, value) -> None:
    sys.stdout.write(json.dumps([what, value]) + "\n")
    sys.stdout.flush()


def main() -> None:
    job = json.loads(sys.stdin.readline())
    try:
        with ENQUEUERS[job["library"]](job["dsn"]) as enqueue:
            _say("ready", None)
            t0 = json.loads(sys.stdin.readline())[1]
            commits = []
            for offset in job["offsets"]:
                delay = t0 + offset - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                job_id = enqueue()
                commits.append((job_id, time.monotonic()))
        _say("done", commits)
    except Exception as exc:  # the worker's side raises it, with what failed here
        _say("error", f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
