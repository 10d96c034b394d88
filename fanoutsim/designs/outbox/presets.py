"""Presets: the outbox model set to what a real PostgreSQL job queue does by default.

``OutboxConfig.preset("procrastinate-3.10")`` is an :class:`OutboxConfig` with
that library's documented defaults and worker-loop rules in the dispatcher's
options, and its hint and read costs as measured on a real PostgreSQL; and
:func:`preset` the whole record: where each number comes from, and the
measured hint latency (an empirical distribution, for ``Notifications(delay=...)``)::

    p = preset("procrastinate-3.10")
    sim = OutboxSimulation(OutboxConfig.preset("procrastinate-3.10", safety_poll_interval=2.0),
                           faults=FaultPlan([p.notifications(drop=0.5)]))

The scenario files ``fanoutsim/examples/presets/outbox-<preset>.toml`` set the same
values; they are written by :func:`scenario_toml` (``python -m
fanoutsim.designs.outbox.presets fanoutsim/examples/presets``), since their costs
are the measured samples, inline.

The costs come from :data:`HINT_COST_FILE`, measured by
``python -m fanoutsim.designs.outbox.realqueues.hintcost --write`` (its
docstring says how; the file says when, and on what): the hint latency
(commit -> the worker heard the hint), the read cost (the hint heard -> the
job's handler began, for a round of reads the hint began: the worker's wake-up,
its fetch and the dispatch) and the cost of an empty fetch. On another machine,
or on this one under another load, they differ: measure again there, or give
:meth:`Preset.config_values` and :meth:`Preset.notifications` a
:class:`Measured` of your own (the comparison in :mod:`.realqueues` gives each
run the costs measured in its own session).

procrastinate 3.10.0, read from its source
==========================================

* **Poll: an idle timeout, restarted after each round** (``poll_mode = "idle"``).
  ``Worker._run_loop`` (``procrastinate/worker.py``) runs
  ``_fetch_and_process_jobs()`` (fetch until a fetch finds nothing), then awaits
  ``utils.wait_any(self._new_job_event.wait(), asyncio.sleep(self.fetch_job_polling_interval),
  self._stop_event.wait())`` — a new sleep each time, so the poll fires
  ``fetch_job_polling_interval`` after the last round *ended*, and rarely while
  hints keep arriving. Default ``FETCH_JOB_POLLING_INTERVAL = 5.0`` s
  (``worker.py``; the worker option ``fetch_job_polling_interval``, CLI
  ``--fetch-job-polling-interval``).
* **Wake flag cleared after the fetch: the lost wake-up** (``wake_mode = "after_fetch"``).
  A ``job_inserted`` notification sets ``_new_job_event``
  (``Worker._handle_notification``); ``_fetch_and_process_jobs`` clears it in
  the ``finally`` of *every* fetch, after ``job_manager.fetch_job`` returned. A
  hint that lands while the last, empty fetch is in flight is erased by that
  clear: its job waits for the next hint or the poll. The window is the empty
  fetch (``empty_read_cost``).
* **Fetch size: one job, until a fetch finds nothing** (``batch_limit = 1``,
  ``read_until_empty``). ``JobManager.fetch_job`` calls
  ``procrastinate_fetch_job_v2`` (``sql/schema.sql``: ``... ORDER BY priority
  DESC, id ASC LIMIT 1 FOR UPDATE SKIP LOCKED``); with the default
  ``concurrency = 1`` (``WORKER_CONCURRENCY``) the next fetch waits for the
  running job (the job semaphore).
* **No catch-up after a listener reconnect** (``catch_up = False``).
  ``PsycopgConnector.listen_notify`` (``psycopg_connector.py``) LISTENs on a
  standalone connection and reads ``connection.notifies()`` in ``_loop_notify``
  (a ``SELECT 1`` every ``LISTEN_TIMEOUT = 30.0`` s, ``connector.py``); on
  ``psycopg.OperationalError`` it connects and LISTENs again at once, and tells
  the worker nothing: jobs committed in the gap wait for a later hint or the poll.
* **One hint per job**: the row trigger ``procrastinate_jobs_notify_queue_job_inserted_v1``
  (AFTER INSERT, status ``todo``) NOTIFYs ``procrastinate_any_queue_v1`` and the
  job's queue channel.

pgqueuer 1.6.0, read from its source
====================================

* **Poll: an idle timeout, restarted after each round** (``poll_mode = "idle"``).
  ``QueueManager.run`` (``pgqueuer/core/qm.py``) dequeues until a dequeue is
  empty, then waits ``listeners.wait_for_notice_event(queue, timeout)``
  (``core/listeners.py``: ``asyncio.wait_for(queue.get(), timeout)``) with
  ``timeout = _effective_dequeue_timeout(dequeue_timeout)``: default
  ``dequeue_timeout`` 30 s (``QueueManager.run``, ``pgq run --dequeue-timeout``) ...
* **... or 0.1 s when a ready job was missed** (``repoll = 0.1``):
  ``_effective_dequeue_timeout`` returns ``min_dequeue_poll_interval`` (0.1 s)
  when ``eligible_queued_work`` counts a ready job (one that committed after the
  last dequeue's snapshot), or a deferred job's ETA if sooner.
* **Wake: a queue of events, never cleared** (``wake_mode = "before_fetch"``).
  NOTIFYs go into a ``PGNoticeEventListener`` (an ``asyncio.Queue``); each
  dispatched job takes one event off it (``get_nowait``), and the wait takes
  the next. An event that arrives during a fetch stays queued, so there is no
  lost wake-up of procrastinate's kind: as the model's wake armed before the
  read (which counts any hint during the round, not one per job).
* **Fetch size: a batch, until a dequeue is empty** (``batch_limit = 10``,
  ``read_until_empty``). ``QueueManager.fetch_jobs`` repeats
  ``Queries.dequeue(batch_size=...)``, default 10 (``QueueManager.run``, ``pgq
  run --batch-size``), until one returns nothing; each job runs as its own task
  (no limit unless ``max_concurrent_tasks`` or an entrypoint's
  ``concurrency_limit``).
* **No reconnect at all** (``catch_up = False``). The driver LISTENs on the
  connection its queries use (``AsyncpgDriver.add_listener`` /
  ``PsycopgDriver.add_listener``); a lost connection fails ``QueueManager.run``
  (``pgq run --restart-on-failure`` starts a new manager after
  ``--restart-delay``, default 5 s, and a new manager begins with a dequeue: a
  catch-up at restart, not at reconnect).
* **The worker wakes itself** (``self_hint_every``). The trigger
  (``domain/schema/notify.py``, ``AFTER INSERT OR UPDATE OR DELETE OR
  TRUNCATE``, rendered without ``FOR EACH ROW`` in
  ``adapters/persistence/schema_ddl.py``: a statement trigger, whose ``OLD`` and
  ``NEW`` are NULL, so an UPDATE never NOTIFYs) NOTIFYs a
  ``table_changed_event`` for the producer's INSERT (the job's hint) and for
  the worker's DELETE of finished jobs, which its ``JobStatusLogBuffer``
  flushes every ``timeout`` (0.1 s) x ``random.uniform(0.8, 1.2)``
  (``core/buffers.py``): about 0.1 s after a job finishes, the worker hears a
  hint of its own and dequeues again.

Not modelled
============

The place of a fetch's snapshot within its cost: the model's read sees the rows
committed when it starts, and its whole cost follows (so a hint of a row that
commits during an empty fetch is erased under ``after_fetch``, a little more
often than on the real worker, whose snapshot is taken partway through).
procrastinate's per-job ``finish_job`` write and pgqueuer's other queries on
its one connection (probes, heartbeats, health checks) are in the measured
read cost, not modelled one by one; pgqueuer's events are counted per
dispatched job, the model's wake is one flag.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from fanoutsim.designs.faults import Notifications
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.presetkit import preset_named, scenario_head, toml_value, write_scenarios

HINT_COST_FILE = Path(__file__).with_name("hint_cost.json")


@functools.lru_cache(maxsize=1)
def hint_cost() -> dict:
    """The measured hint cost (:data:`HINT_COST_FILE`): samples per library, and how they were measured."""
    return json.loads(HINT_COST_FILE.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Measured:
    """What a hint and a read cost on one machine, measured (seconds, empirical laws)."""

    hint_delay: Dist  # commit -> the worker heard the hint
    read_cost: Dist  # a round a hint began: the hint heard -> the job's handler began
    empty_read_cost: Dist  # a fetch that found nothing: called -> returned

    @classmethod
    def of(cls, hint_delay, read_cost, empty_read_cost) -> Measured:
        """From samples (lists of seconds >= 0), each an empirical law."""
        return cls(
            *(Dist.empirical([float(x) for x in samples]) for samples in (hint_delay, read_cost, empty_read_cost))
        )


@dataclass(frozen=True)
class Preset:
    """A real library's defaults and worker-loop rules, in the outbox's options, each
    with where it comes from (``sources``)."""

    name: str
    library: str
    version: str
    options: tuple[tuple[str, object], ...]  # OutboxConfig fields, bar the measured costs
    sources: tuple[tuple[str, str], ...]

    def measured(self) -> Measured:
        """The costs measured in :data:`HINT_COST_FILE`."""
        data = hint_cost()["libraries"].get(self.library)
        if data is None:
            raise ValueError(
                f"{HINT_COST_FILE.name} holds no measurement of {self.library}; "
                "run python -m fanoutsim.designs.outbox.realqueues.hintcost --write"
            )
        return Measured.of(data["hint_latency_s"], data["read_cost_s"], data["empty_fetch_s"])

    def config_values(self, measured: Measured | None = None) -> dict:
        """The :class:`OutboxConfig` fields the preset sets (the read costs: ``measured``'s,
        or the file's)."""
        m = measured or self.measured()
        return {**dict(self.options), "read_cost": m.read_cost, "empty_read_cost": m.empty_read_cost}

    def hint_delay(self) -> Dist:
        """Commit -> the worker heard the hint, measured (:func:`hint_cost`): an empirical law."""
        return self.measured().hint_delay

    def read_cost(self) -> Dist:
        """The hint heard -> the handler began, for a round the hint began, measured."""
        return self.measured().read_cost

    def notifications(self, drop: float = 0.0, silent=(), measured: Measured | None = None) -> Notifications:
        """The hint channel of this library: its measured hint latency (``measured``'s, or
        the file's), and ``drop`` / ``silent``."""
        return Notifications(drop=drop, delay=(measured or self.measured()).hint_delay, silent=silent)


_MEASURED = (
    "measured: hint_cost.json, libraries.{lib}.read_cost_s",
    "measured: hint_cost.json, libraries.{lib}.empty_fetch_s",
    "measured: hint_cost.json, libraries.{lib}.hint_latency_s",
)

PRESETS = {
    "procrastinate-3.10": Preset(
        "procrastinate-3.10",
        "procrastinate",
        "3.10.0",
        options=(
            ("safety_poll_interval", 5.0),
            ("poll_mode", "idle"),
            ("wake_mode", "after_fetch"),
            ("catch_up", False),
            ("batch_limit", 1),
            ("read_until_empty", True),
        ),
        sources=(
            (
                "safety_poll_interval",
                "procrastinate/worker.py: FETCH_JOB_POLLING_INTERVAL = 5.0, the default "
                "of Worker(fetch_job_polling_interval=...)",
            ),
            (
                "poll_mode",
                "procrastinate/worker.py: Worker._run_loop waits asyncio.sleep(fetch_job_polling_interval) "
                "anew after each round: an idle timeout",
            ),
            (
                "wake_mode",
                "procrastinate/worker.py: _fetch_and_process_jobs clears _new_job_event in the finally "
                "of every fetch: a hint during the last, empty fetch is lost",
            ),
            (
                "catch_up",
                "procrastinate/psycopg_connector.py: listen_notify LISTENs again after a lost "
                "connection and tells the worker nothing",
            ),
            ("batch_limit", "procrastinate/sql/schema.sql: procrastinate_fetch_job_v2 takes LIMIT 1"),
            ("read_until_empty", "procrastinate/worker.py: _fetch_and_process_jobs fetches until a fetch finds no job"),
            ("read_cost", _MEASURED[0].format(lib="procrastinate")),
            ("empty_read_cost", _MEASURED[1].format(lib="procrastinate")),
            ("hint_delay", _MEASURED[2].format(lib="procrastinate")),
        ),
    ),
    "pgqueuer-1.6": Preset(
        "pgqueuer-1.6",
        "pgqueuer",
        "1.6.0",
        options=(
            ("safety_poll_interval", 30.0),
            ("poll_mode", "idle"),
            ("wake_mode", "before_fetch"),
            ("catch_up", False),
            ("batch_limit", 10),
            ("read_until_empty", True),
            ("repoll", 0.1),
            ("self_hint_every", Dist("uniform", 0.08, 0.12)),
        ),
        sources=(
            (
                "safety_poll_interval",
                "pgqueuer/core/qm.py: QueueManager.run(dequeue_timeout=timedelta(seconds=30)); "
                "pgq run --dequeue-timeout 30",
            ),
            (
                "poll_mode",
                "pgqueuer/core/qm.py: QueueManager.run waits wait_for_notice_event(queue, timeout) "
                "after each round: an idle timeout",
            ),
            (
                "wake_mode",
                "pgqueuer/core/listeners.py: events queue up in PGNoticeEventListener (an asyncio.Queue) "
                "and are never cleared: none is lost during a dequeue",
            ),
            (
                "catch_up",
                "pgqueuer LISTENs on its one connection: a lost connection ends QueueManager.run "
                "(no reconnect to catch up after)",
            ),
            ("batch_limit", "pgqueuer/core/qm.py: QueueManager.run(batch_size=10); pgq run --batch-size 10"),
            ("read_until_empty", "pgqueuer/core/qm.py: fetch_jobs dequeues until a dequeue returns nothing"),
            (
                "repoll",
                "pgqueuer/core/qm.py: _effective_dequeue_timeout returns min_dequeue_poll_interval "
                "(0.1 s) when eligible_queued_work finds a ready job",
            ),
            (
                "self_hint_every",
                "pgqueuer/core/buffers.py: JobStatusLogBuffer flushes finished jobs every "
                "0.1 s x uniform(0.8, 1.2); its DELETE NOTIFYs through the queue table's "
                "statement trigger (domain/schema/notify.py)",
            ),
            ("read_cost", _MEASURED[0].format(lib="pgqueuer")),
            ("empty_read_cost", _MEASURED[1].format(lib="pgqueuer")),
            ("hint_delay", _MEASURED[2].format(lib="pgqueuer")),
        ),
    ),
}


_DESCRIPTION = (
    "One {library} {version} worker at its defaults as the outbox model: "
    "5 jobs/s, measured hint and read costs, 10% of hints dropped."
)
_STORY = """One worker whose jobs take no time, 5 jobs/s, 10% of the hints dropped: a dropped
hint's job waits for the next hint (the worker reads everything new on any
wake-up), or for the poll."""
_TABLES = """
[outbox]
{outbox}

[[consumers]]
name = "worker"
duration = 0.0

[[workload]]
rate = 5.0
pages = 100

[[faults]]
kind = "notifications"
drop = 0.1
delay = {delay}
"""


def scenario_toml(name: str) -> str:
    """The text of the preset's scenario file (``fanoutsim/examples/presets/outbox-<name>.toml``)."""
    p = preset(name)
    data = hint_cost()
    jobs = data["libraries"][p.library]["jobs"]
    head = scenario_head(
        design="outbox",
        name=p.name,
        title=f"{p.library} {p.version}'s defaults and worker loop",
        costs_file="hint_cost.json",
        sources=p.sources,
        measured=f'measured on a real PostgreSQL {data["measured"]}, {jobs} jobs; see hint_cost.json\'s "method"',
        story=_STORY,
        description=_DESCRIPTION.format(library=p.library, version=p.version),
        until=600.0,
    )
    outbox = "\n".join(f"{k} = {toml_value(v)}" for k, v in p.config_values().items())
    return head + _TABLES.format(outbox=outbox, delay=toml_value(p.hint_delay()))


def preset(name: str) -> Preset:
    """The preset called ``name`` (a key of :data:`PRESETS`)."""
    return preset_named(PRESETS, name)


def main(argv: list[str]) -> int:
    """``python -m fanoutsim.designs.outbox.presets DIR``: write every preset's scenario file into DIR."""
    return write_scenarios(argv, "outbox", PRESETS, scenario_toml)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
