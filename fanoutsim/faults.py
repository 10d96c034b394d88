"""Faults on purpose: every design's crash points and fault kinds in one place
(``from fanoutsim.faults import FaultPlan, CrashAtPoint``).

The mechanism is :mod:`fanoutsim.kernel.faults`; each design declares its own
points, kinds and hooks in its ``faults`` module
(:mod:`fanoutsim.designs.reactor.faults`, ...), and the kinds several designs
accept are in :mod:`fanoutsim.designs.faults`.
"""

from fanoutsim.designs.faults import LateCommit, Notifications, SlowWorkflow
from fanoutsim.designs.leases.faults import CRASH_POINTS as LEASE_CRASH_POINTS
from fanoutsim.designs.leases.faults import RestoreBackup
from fanoutsim.designs.outbox.faults import CRASH_POINTS as OUTBOX_CRASH_POINTS
from fanoutsim.designs.outbox.faults import Backfill
from fanoutsim.designs.reactor.faults import CRASH_POINTS as REACTOR_CRASH_POINTS
from fanoutsim.designs.reactor.faults import ClockSkew, FailInserts, InsertFailed, Pollers, Stall, Ties
from fanoutsim.kernel.faults import (
    HOOKS,
    KINDS,
    POINTS,
    Crash,
    CrashAt,
    CrashAtPoint,
    CrashRandomly,
    DesignFaults,
    Fault,
    FaultPlan,
    Hook,
    Injector,
    NoFaults,
    bind,
    check_faults,
    declare,
)

#: The built-in designs' crash points, the reactor's, the outbox's and the leases' in turn
#: (:data:`POINTS`: every registered design's, with the design that declared it).
CRASH_POINTS = REACTOR_CRASH_POINTS + OUTBOX_CRASH_POINTS + LEASE_CRASH_POINTS

__all__ = [
    "CRASH_POINTS",
    "REACTOR_CRASH_POINTS",
    "OUTBOX_CRASH_POINTS",
    "LEASE_CRASH_POINTS",
    "POINTS",
    "Crash",
    "InsertFailed",
    "NoFaults",
    "FaultPlan",
    "Injector",
    "KINDS",
    "HOOKS",
    "Fault",
    "Hook",
    "DesignFaults",
    "CrashAt",
    "CrashRandomly",
    "CrashAtPoint",
    "FailInserts",
    "Stall",
    "SlowWorkflow",
    "LateCommit",
    "ClockSkew",
    "Pollers",
    "Ties",
    "Notifications",
    "Backfill",
    "RestoreBackup",
    "bind",
    "check_faults",
    "declare",
]
