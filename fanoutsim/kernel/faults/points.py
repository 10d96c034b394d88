"""Fault hooks: the named points where the engine lets a fault plan act.

The core calls these hooks and nothing else about faults:

``point(name, now, ...)``             a place the process could die
``before_insert(workflow, now, ...)`` just before an execution row is written
``after_insert(workflow, now, ...)``  just after it committed (an ambiguous failure)
``poll_limit(sub, now, limit)``       how many firings this subscription may take now
``run_duration(workflow, now, base)`` how long a body runs

:class:`NoFaults` is the plan of a healthy system. A plan raises :class:`Crash`
at a point — the runtime then throws the engine away and restarts it over the
same store — or :class:`InsertFailed` for an insert. Because a crash is raised
*inside* the open transaction, the store rolls that transaction back: the
duplicates and losses that follow come from the tables, never from a script.
"""
from __future__ import annotations

REACTOR_CRASH_POINTS = (
    "reactor.after_graphs_before_log",
    "poll.after_fetch",
    "poll.after_dispatch_before_watermark",
    "poll.before_batch_commit",
    "prune.mid_delete",
    "executor.after_claim",
)
OUTBOX_CRASH_POINTS = (  # the outbox design (seed 002)
    "commit.after_change_before_outbox",
    "commit.before_notify",
    "dispatch.after_fetch",
    "dispatch.after_handle_before_cursor",
    "retention.mid_delete",
)
# the leased-consumer design (seed 003): every transition of a consumer has a
# point inside its transaction (before_commit: rolled back) and one just after
# its commit (after_commit: done, but the caller never hears), as RiffDB's
# process-crash matrix does (``process_crash_matrix_preserves_every_consumer_
# transition``); lease.after_commit is a lease committed and never replied
LEASE_CRASH_POINTS = (
    "publish.before_commit",
    "lease.before_commit",
    "lease.after_commit",
    "worker.after_effect_before_ack",
    "ack.before_commit",
    "ack.after_commit",
    "nack.before_commit",
    "nack.after_commit",
    "seek.before_commit",
    "seek.after_commit",
    "retire.before_commit",
    "retire.after_commit",
    "recover.before_commit",
    "recover.after_commit",
    "events.mid_prune",
)
CRASH_POINTS = REACTOR_CRASH_POINTS + OUTBOX_CRASH_POINTS + LEASE_CRASH_POINTS


class Crash(BaseException):
    """The runner process dies here. BaseException: no ``except Exception`` may swallow it.

    ``downtime`` is how long it stays down before the runtime restarts it
    (None: until someone calls ``restart()``)."""

    def __init__(self, point: str, downtime: float | None = None) -> None:
        super().__init__(point)
        self.point = point
        self.downtime = downtime


class InsertFailed(Exception):
    """An execution insert that the database refused (or whose outcome was lost)."""


class NoFaults:
    """The fault plan of a healthy system: every hook is a no-op."""

    # whether poll_limit may answer other than the limit it is given (the
    # poll loop then asks it for every subscription of every pass)
    limits_polls = False

    def point(self, name: str, now: int, **where) -> None:
        pass

    def before_insert(self, workflow: str, now: int, **where) -> None:
        pass

    def after_insert(self, workflow: str, now: int, **where) -> None:
        pass

    def poll_limit(self, sub: dict, now: int, limit: int) -> int:
        return limit

    def run_duration(self, workflow: str, now: int, base: float) -> float:
        return base
