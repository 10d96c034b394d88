"""The outbox's faults (seed 002): its crash points, its fault kinds and the hook its engine asks.

Points (``e.faults.point(name, ...)`` in the steps)::

    commit.after_change_before_outbox     the change written, its outbox row not yet
    commit.before_notify                  the row committed, its hint not yet sent
    dispatch.after_fetch                  a consumer's batch fetched
    dispatch.after_handle_before_cursor   a row handled, the cursor not yet moved
    retention.mid_delete                  between two chunks of a retention delete

Kinds: the kernel's crash kinds; of :mod:`fanoutsim.designs.faults`
``notifications`` (lossy hints), ``late_commit`` (by ``topic``) and
``slow_workflow`` (by ``consumer``); and its own::

    Backfill(window, connections)   backfill   a bulk job holds database pool connections

Hook: ``run_duration(consumer, now, base)`` — how long a consumer's step takes.
"""

from __future__ import annotations

from dataclasses import dataclass

from fanoutsim.designs.faults import RUN_DURATION, LateCommit, Notifications, SlowWorkflow
from fanoutsim.kernel.faults import (
    CrashAt,
    CrashAtPoint,
    CrashRandomly,
    Fault,
    Window,
    checks,
    declare,
)

#: The outbox's crash points (the module's text says where each one is).
CRASH_POINTS = (
    "commit.after_change_before_outbox",
    "commit.before_notify",
    "dispatch.after_fetch",
    "dispatch.after_handle_before_cursor",
    "retention.mid_delete",
)


@dataclass(frozen=True)
class Backfill(Fault):
    """A bulk job (a mail backfill, a burst of keystrokes) holding
    ``connections`` connections of the database pool during ``window``
    (None: every connection it can get)."""

    window: Window
    connections: int | None = None
    kind = "backfill"

    def check(self):
        self.check_fields(window=checks.window)
        if self.window is None:
            raise ValueError("backfill.window is required: [start, end] in virtual seconds")
        if self.connections is not None:
            self.check_fields(connections=checks.number(low=1, integer=True))


#: The outbox's declaration of its points, kinds and hook (``Design.crash_points``,
#: ``Design.fault_kinds`` and the runtimes read it).
FAULTS = declare(
    "outbox",
    points=CRASH_POINTS,
    kinds=(CrashAt, CrashRandomly, CrashAtPoint, Notifications, LateCommit, SlowWorkflow, Backfill),
    hooks=(RUN_DURATION,),
)

__all__ = ["CRASH_POINTS", "FAULTS", "Backfill"]
