"""Fault hooks: named points in the engine where a fault plan may act.

The core calls ``faults.point(name, ...)`` at each place a process could die
(between a dispatch and its watermark update, say) and
``faults.before_insert(workflow, now)`` just before an execution row is
written. :class:`NoFaults` does nothing; a fault plan raises :class:`Crash` at
a point (the runtime then throws the engine away and restarts it over the same
store) or :class:`InsertFailed` for an insert. Because a crash is raised
*inside* the open transaction, the store rolls that transaction back — the
duplicates and losses that follow come from the tables, never from a script.
"""
from __future__ import annotations

CRASH_POINTS = (
    "reactor.after_graphs_before_log",
    "poll.after_fetch",
    "poll.after_dispatch_before_watermark",
    "poll.before_batch_commit",
    "prune.mid_delete",
    "executor.after_claim",
)


class Crash(BaseException):
    """The runner process dies here. BaseException: no ``except Exception`` may swallow it."""

    def __init__(self, point: str) -> None:
        super().__init__(point)
        self.point = point


class InsertFailed(Exception):
    """An execution insert that the database refused."""


class NoFaults:
    """The fault plan of a healthy system."""

    def point(self, name: str, now: int, **where) -> None:
        pass

    def before_insert(self, workflow: str, now: int) -> None:
        pass
