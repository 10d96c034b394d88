"""Faults on purpose: the mechanism, with no design's faults in it.

:mod:`.points` holds the named points (:class:`Crash`, the registry of every
design's points); :mod:`.kinds` the fault kinds' base, the kinds every design
uses (:class:`CrashAt`, :class:`CrashRandomly`, :class:`CrashAtPoint`) and the
registry of kinds by TOML name; :mod:`.checks` the checks a kind declares its
fields with; :mod:`.hooks` the named hooks and
:class:`NoFaults`; :mod:`.plan` what a user writes (:class:`FaultPlan`), the
:class:`Injector` that binds it to a run, :func:`declare` (a design's points,
kinds and hooks) and :func:`check_faults`. Each design's own points, kinds and
hooks are in its ``faults`` module; :mod:`fanoutsim.faults` gathers them all.
"""

from fanoutsim.kernel.faults import checks
from fanoutsim.kernel.faults.checks import Check, Window, checked_flag, checked_name, checked_number, checked_window
from fanoutsim.kernel.faults.hooks import HOOKS, Faults, Hook, NoFaults, register_hook
from fanoutsim.kernel.faults.kinds import (
    KINDS,
    CrashAt,
    CrashAtPoint,
    CrashRandomly,
    Fault,
    active,
    overlap,
    register_kinds,
)
from fanoutsim.kernel.faults.plan import DesignFaults, FaultPlan, Injector, bind, check_faults, declare
from fanoutsim.kernel.faults.points import POINTS, Crash, register_points

__all__ = [
    "Crash",
    "NoFaults",
    "Faults",
    "FaultPlan",
    "Injector",
    "KINDS",
    "POINTS",
    "HOOKS",
    "Fault",
    "Hook",
    "Window",
    "CrashAt",
    "CrashRandomly",
    "CrashAtPoint",
    "DesignFaults",
    "declare",
    "bind",
    "check_faults",
    "register_kinds",
    "register_points",
    "register_hook",
    "active",
    "overlap",
    "checked_name",
    "checked_number",
    "checked_window",
    "checked_flag",
    "checks",
    "Check",
]
