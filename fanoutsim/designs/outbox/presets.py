"""Presets: the outbox model set to what a real PostgreSQL job queue does by default.

``OutboxConfig.preset("procrastinate-3.10")`` is an :class:`OutboxConfig` with
that library's documented defaults in the options the dispatcher has today, and
:func:`preset` the whole record: where each number comes from, the hint latency
measured on a real PostgreSQL (an empirical distribution, for
``Notifications(delay=...)``), and how the library's worker loop behaves — which
the outbox's loop cannot yet express (see *Not yet modelled* below)::

    p = preset("procrastinate-3.10")
    sim = OutboxSimulation(OutboxConfig.preset("procrastinate-3.10", safety_poll_interval=2.0),
                           faults=FaultPlan([p.notifications(drop=0.5)]))

The scenario files ``fanoutsim/examples/presets/outbox-<preset>.toml`` set the same
values; they are written by :func:`scenario_toml` (``python -m
fanoutsim.designs.outbox.presets fanoutsim/examples/presets``), since their hint
latency is the measured samples, inline.

The hint latency comes from :data:`HINT_COST_FILE`, measured by
``python -m fanoutsim.designs.outbox.realqueues.hintcost --write`` (its
docstring says how; the file says when, and on what). On another machine it
differs: measure again there.

procrastinate 3.10.0, read from its source
==========================================

* **Poll: an idle timeout, restarted after each round.** ``Worker._run_loop``
  (``procrastinate/worker.py``) runs ``_fetch_and_process_jobs()`` (fetch until
  a fetch finds nothing), then awaits ``utils.wait_any(self._new_job_event.wait(),
  asyncio.sleep(self.fetch_job_polling_interval), self._stop_event.wait())`` — a
  new sleep each time, so the poll fires ``fetch_job_polling_interval`` after the
  last round *ended*, and rarely while hints keep arriving. Default
  ``FETCH_JOB_POLLING_INTERVAL = 5.0`` s (``worker.py``; the worker option
  ``fetch_job_polling_interval``, CLI ``--fetch-job-polling-interval``).
* **Wake flag cleared after the fetch: the lost wake-up.** A ``job_inserted``
  notification sets ``_new_job_event`` (``Worker._handle_notification``);
  ``_fetch_and_process_jobs`` clears it in the ``finally`` of *every* fetch, after
  ``job_manager.fetch_job`` returned. A hint that lands while the last, empty
  fetch is in flight is erased by that clear: its job waits for the next hint or
  the poll.
* **Fetch size: one job.** ``JobManager.fetch_job`` calls
  ``procrastinate_fetch_job_v2`` (``sql/schema.sql``: ``... ORDER BY priority
  DESC, id ASC LIMIT 1 FOR UPDATE SKIP LOCKED``); with the default
  ``concurrency = 1`` (``WORKER_CONCURRENCY``) the next fetch waits for the
  running job (the job semaphore).
* **No catch-up after a listener reconnect.** ``PsycopgConnector.listen_notify``
  (``psycopg_connector.py``) LISTENs on a standalone connection and reads
  ``connection.notifies()`` in ``_loop_notify`` (a ``SELECT 1`` every
  ``LISTEN_TIMEOUT = 30.0`` s, ``connector.py``); on ``psycopg.OperationalError``
  it connects and LISTENs again at once, and tells the worker nothing: jobs
  committed in the gap wait for a later hint or the poll.
* **One hint per job**: the row trigger ``procrastinate_jobs_notify_queue_job_inserted_v1``
  (AFTER INSERT, status ``todo``) NOTIFYs ``procrastinate_any_queue_v1`` and the
  job's queue channel.

pgqueuer 1.6.0, read from its source
====================================

* **Poll: an idle timeout, restarted after each round.** ``QueueManager.run``
  (``pgqueuer/core/qm.py``) dequeues until a dequeue is empty, then waits
  ``listeners.wait_for_notice_event(queue, timeout)`` (``core/listeners.py``:
  ``asyncio.wait_for(queue.get(), timeout)``) with ``timeout =
  _effective_dequeue_timeout(dequeue_timeout)``: 0.1 s
  (``min_dequeue_poll_interval``) if ``eligible_queued_work`` finds a ready job
  that the dequeue missed, a deferred job's ETA if sooner, else
  ``dequeue_timeout`` — default 30 s (``QueueManager.run``, ``pgq run
  --dequeue-timeout``).
* **Wake: a queue of events, never cleared.** NOTIFYs go into a
  ``PGNoticeEventListener`` (an ``asyncio.Queue``); each dispatched job takes one
  event off it (``get_nowait``), and the wait takes the next. An event that
  arrives during a fetch stays queued, so there is no lost wake-up of
  procrastinate's kind, and the ``eligible_queued_work`` probe after each round
  catches a job whose event an earlier dispatch took.
* **Fetch size: a batch.** ``Queries.dequeue(batch_size=...)``, default 10
  (``QueueManager.run``, ``pgq run --batch-size``), repeated until empty; each
  job runs as its own task (no limit unless ``max_concurrent_tasks`` or an
  entrypoint's ``concurrency_limit``).
* **No reconnect at all.** The driver LISTENs on the connection its queries use
  (``AsyncpgDriver.add_listener`` / ``PsycopgDriver.add_listener``); a lost
  connection fails ``QueueManager.run`` (``pgq run --restart-on-failure`` starts
  a new manager after ``--restart-delay``, default 5 s, and a new manager
  begins with a dequeue: a catch-up at restart, not at reconnect).
* **More hints than jobs.** The statement trigger (``domain/schema/notify.py``,
  ``AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE``) NOTIFYs a
  ``table_changed_event`` for every statement on the queue table — the
  producer's INSERT, and the worker's own dequeue (UPDATE) and completion
  (DELETE, flushed by its status-log buffer about 0.1 s later) — so the worker
  also wakes itself.

Not yet modelled (the outbox's loop has no option for them yet)
===============================================================

The poll as an idle timeout restarted after each round (the model's is
fixed-rate); the wake flag cleared after the fetch (the model arms its wake
before the read); no fetch after a listener reconnect; a fetch's read cost
(the model's reads take no time); pgqueuer's short re-poll when its probe finds
a missed job, and its self-wakes. Until then a preset sets only the safety poll
interval, the batch limit and the hint latency.
"""
from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.faults import Notifications

HINT_COST_FILE = Path(__file__).with_name("hint_cost.json")


@functools.lru_cache(maxsize=1)
def hint_cost() -> dict:
    """The measured hint cost (:data:`HINT_COST_FILE`): samples per library, and how they were measured."""
    return json.loads(HINT_COST_FILE.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Preset:
    """A real library's defaults, in the outbox's options, each with where it comes from."""

    name: str
    library: str
    version: str
    safety_poll_interval: float   # the library's poll, as the model's safety poll
    batch_limit: int              # rows one fetch takes
    sources: tuple[tuple[str, str], ...]

    def config_values(self) -> dict:
        """The :class:`OutboxConfig` fields the preset sets."""
        return {"safety_poll_interval": self.safety_poll_interval, "batch_limit": self.batch_limit}

    def _samples(self, key: str) -> list[float]:
        data = hint_cost()["libraries"].get(self.library)
        if data is None:
            raise ValueError(f"{HINT_COST_FILE.name} holds no measurement of {self.library}; "
                             "run python -m fanoutsim.designs.outbox.realqueues.hintcost --write")
        return data[key]

    def hint_delay(self) -> Dist:
        """Commit -> the worker heard the hint, measured (:func:`hint_cost`): an empirical law."""
        return Dist.empirical(self._samples("hint_latency_s"))

    def read_cost(self) -> Dist:
        """Hint heard -> the handler began (the fetch and the dispatch), measured. The
        model's reads take no time yet: kept for the loop option that will use it."""
        return Dist.empirical(self._samples("read_cost_s"))

    def notifications(self, drop: float = 0.0, silent=()) -> Notifications:
        """The hint channel of this library: its measured hint latency, and ``drop`` / ``silent``."""
        return Notifications(drop=drop, delay=self.hint_delay(), silent=silent)


PRESETS = {
    "procrastinate-3.10": Preset(
        "procrastinate-3.10", "procrastinate", "3.10.0", safety_poll_interval=5.0, batch_limit=1,
        sources=(
            ("safety_poll_interval", "procrastinate/worker.py: FETCH_JOB_POLLING_INTERVAL = 5.0, the default "
                                     "of Worker(fetch_job_polling_interval=...) (an idle timeout there)"),
            ("batch_limit", "procrastinate/sql/schema.sql: procrastinate_fetch_job_v2 takes LIMIT 1"),
            ("hint_delay", "measured: hint_cost.json, libraries.procrastinate.hint_latency_s"),
        )),
    "pgqueuer-1.6": Preset(
        "pgqueuer-1.6", "pgqueuer", "1.6.0", safety_poll_interval=30.0, batch_limit=10,
        sources=(
            ("safety_poll_interval", "pgqueuer/core/qm.py: QueueManager.run(dequeue_timeout=timedelta(seconds=30)) "
                                     "(an idle timeout there); pgq run --dequeue-timeout 30"),
            ("batch_limit", "pgqueuer/core/qm.py: QueueManager.run(batch_size=10); pgq run --batch-size 10"),
            ("hint_delay", "measured: hint_cost.json, libraries.pgqueuer.hint_latency_s"),
        )),
}


_SCENARIO = """\
# outbox-{name}: the outbox model with {library} {version}'s defaults.
#
# Written by python -m fanoutsim.designs.outbox.presets (from presets.py and
# hint_cost.json): edit those, not this file. What each number is:
#   safety_poll_interval  {poll_source}
#   batch_limit           {batch_source}
#   notifications.delay   the hint latency measured on a real PostgreSQL ({measured},
#                         {jobs} jobs): commit -> the {library} worker heard the hint.
# One worker taking no time, 5 jobs/s, 10% of the hints dropped: a dropped hint's
# job waits for the next job's hint (the worker reads everything new on any wake-up)
# or, failing that, for the poll. Not modelled yet (the outbox's loop has no option
# for it): {library}'s poll is an idle timeout restarted after each round (here
# fixed-rate), and the read cost of a fetch; see presets.py.
#
#   fanoutsim run fanoutsim/examples/presets/outbox-{name}.toml
design = "outbox"
name = "outbox-{name}"
description = "One {library} {version} worker at its defaults as the outbox model: 5 jobs/s, measured hint latency, 10% of hints dropped."

[run]
seed = 0
until = 600.0
store = "memory"

[outbox]
safety_poll_interval = {poll!r}
batch_limit = {batch}

[[consumers]]
name = "worker"
duration = 0.0

[[workload]]
rate = 5.0
pages = 100

[[faults]]
kind = "notifications"
drop = 0.1
delay = {{ dist = "empirical", samples = [{samples}] }}
"""


def scenario_toml(name: str) -> str:
    """The text of the preset's scenario file (``fanoutsim/examples/presets/outbox-<name>.toml``)."""
    p = preset(name)
    sources = dict(p.sources)
    data = hint_cost()
    return _SCENARIO.format(
        name=p.name, library=p.library, version=p.version, poll=p.safety_poll_interval, batch=p.batch_limit,
        poll_source=sources["safety_poll_interval"], batch_source=sources["batch_limit"],
        measured=data["measured"], jobs=data["libraries"][p.library]["jobs"],
        samples=", ".join(repr(x) for x in p.hint_delay().samples))


def preset(name: str) -> Preset:
    """The preset called ``name`` (a key of :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(map(repr, PRESETS))}, got {name!r}")
    return PRESETS[name]


def main(argv: list[str]) -> int:
    """``python -m fanoutsim.designs.outbox.presets DIR``: write every preset's scenario file into DIR."""
    if len(argv) != 2 or not Path(argv[1]).is_dir():
        print("usage: python -m fanoutsim.designs.outbox.presets DIR  (an existing folder)", file=sys.stderr)
        return 2
    for name in PRESETS:
        path = Path(argv[1]) / f"outbox-{name}.toml"
        path.write_text(scenario_toml(name), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
