"""Faults on purpose: named points in the engine, and seeded plans that use them.

:mod:`.points` holds what the engine knows (the hooks, :class:`Crash`,
:class:`InsertFailed`, the names of the crash points); :mod:`.plan` holds what
a user writes (:class:`FaultPlan` and its fault kinds) and the
:class:`Injector` that binds a plan to a run.
"""
from fanoutsim.kernel.faults.plan import (
    KINDS, Backfill, ClockSkew, CrashAt, CrashAtPoint, CrashRandomly, FailInserts, FaultPlan, Injector,
    LateCommit, Notifications, Pollers, RestoreBackup, SlowWorkflow, Stall, Ties, bind,
)
from fanoutsim.kernel.faults.points import CRASH_POINTS, LEASE_CRASH_POINTS, OUTBOX_CRASH_POINTS, REACTOR_CRASH_POINTS, Crash, InsertFailed, NoFaults

__all__ = [
    "CRASH_POINTS", "REACTOR_CRASH_POINTS", "OUTBOX_CRASH_POINTS", "LEASE_CRASH_POINTS", "Crash", "InsertFailed", "NoFaults", "FaultPlan", "Injector", "KINDS",
    "CrashAt", "CrashRandomly", "CrashAtPoint", "FailInserts", "Stall", "SlowWorkflow",
    "LateCommit", "ClockSkew", "Pollers", "Ties", "Notifications", "Backfill", "RestoreBackup", "bind",
]
