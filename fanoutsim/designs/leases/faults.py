"""The leased-consumer design's faults (seed 003): its crash points, its fault kinds and the hook its engine asks.

Points: every transition of a consumer has a point inside its transaction
(``before_commit``: rolled back) and one just after its commit
(``after_commit``: done, but the caller never hears), as RiffDB's
process-crash matrix does (``process_crash_matrix_preserves_every_consumer_
transition``); ``lease.after_commit`` is a lease committed and never replied.

Kinds: the kernel's crash kinds; ``slow_workflow`` (by ``consumer``) of
:mod:`fanoutsim.designs.faults`; and its own::

    RestoreBackup(backup_at, at)   restore_backup   a backup of the tables taken at backup_at
                                                    is restored at at

Hook: ``run_duration(consumer, now, base)`` — how long a worker's effect takes.
"""

from __future__ import annotations

from dataclasses import dataclass

from fanoutsim.designs.faults import RUN_DURATION, SlowWorkflow
from fanoutsim.kernel.faults import CrashAt, CrashAtPoint, CrashRandomly, Fault, checks, declare

#: The leased-consumer design's crash points: each transition's ``before_commit`` (rolled
#: back) and ``after_commit`` (done, never replied), a worker's effect before its ack, and
#: a prune between two chunks.
CRASH_POINTS = (
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


@dataclass(frozen=True)
class RestoreBackup(Fault):
    """An operator's mistake or a disaster recovery: the durable tables are
    copied at ``backup_at`` and that copy is restored at ``at`` (virtual
    seconds, ``at`` > ``backup_at``), throwing away what happened between."""

    backup_at: float
    at: float
    kind = "restore_backup"

    def check(self):
        self.check_fields(backup_at=checks.number(low=0), at=checks.number(low=0))
        if not self.at > self.backup_at:
            raise ValueError(f"restore_backup.at must be after backup_at ({self.backup_at!r}), got {self.at!r}")


#: The leased-consumer design's declaration of its points, kinds and hook
#: (``Design.crash_points``, ``Design.fault_kinds`` and the runtimes read it).
FAULTS = declare(
    "leases",
    points=CRASH_POINTS,
    kinds=(CrashAt, CrashRandomly, CrashAtPoint, SlowWorkflow, RestoreBackup),
    hooks=(RUN_DURATION,),
)

__all__ = ["CRASH_POINTS", "FAULTS", "RestoreBackup"]
