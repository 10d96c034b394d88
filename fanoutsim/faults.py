"""Faults on purpose: the public face of :mod:`fanoutsim.kernel.faults`
(``from fanoutsim.faults import FaultPlan, CrashAtPoint``)."""
from fanoutsim.kernel.faults import *  # noqa: F401,F403
from fanoutsim.kernel.faults import __all__  # noqa: F401
