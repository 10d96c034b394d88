"""fanoutsim: see how durable event fan-out behaves.

A publisher writes events to a durable log; subscribers consume it at their
own pace with at-least-once delivery. fanoutsim runs faithful models of such
designs over real transactional tables, under a seeded virtual clock, so you
can watch latency, duplicates, losses and pruning emerge — and reproduce them.

>>> import fanoutsim as fs
>>> sim = fs.Simulation(seed=0)
>>> _ = sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "incident_response",
...                                              when="payload.quote.price > 100")
"""

from fanoutsim import designs, faults
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.config import LeaseConfig
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.designs.reactor.checker import CheckReport, check_store, explain
from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.minimize import minimize
from fanoutsim.designs.reactor.payload import decode_sources, encode_payload
from fanoutsim.designs.reactor.predicate import ALLOWED_VARIABLES, InvalidPredicate
from fanoutsim.designs.reactor.replay import load_recording
from fanoutsim.designs.reactor.triggers import TriggerFireFailed
from fanoutsim.faults import CRASH_POINTS, Crash, FaultPlan, InsertFailed
from fanoutsim.runtime import Realtime, Simulation
from fanoutsim.scenario import load_scenario
from fanoutsim.sweep import sweep

__version__ = "0.1.0"

# one name per idea across designs: <Design>Config (the reactor's first name, SchedulerConfig, kept)
ReactorConfig = SchedulerConfig


def check(run):
    """Check a finished run with its design's checker (every design's is
    ``designs.<name>.checker.check``; the registry finds it): who was owed what,
    what was delivered, every duplicate and loss with its cause. A run with no
    ``design`` (the reactor's merged processes) is the reactor's. Returns the
    design's report (:class:`~fanoutsim.kernel.check.CheckResult`: ``valid``,
    ``summary``, ``duplicates``, ``lost``, ...). A run of a design no one
    registered raises KeyError; one made with ``trace=False``, ValueError."""
    return designs.get(getattr(run, "design", "reactor")).check(run)


__all__ = [
    "SchedulerConfig",
    "ReactorConfig",
    "OutboxConfig",
    "LeaseConfig",
    "Simulation",
    "Realtime",
    "InvalidPredicate",
    "ALLOWED_VARIABLES",
    "Crash",
    "InsertFailed",
    "CRASH_POINTS",
    "TriggerFireFailed",
    "FaultPlan",
    "faults",
    "check",
    "check_store",
    "explain",
    "CheckReport",
    "minimize",
    "encode_payload",
    "decode_sources",
    "__version__",
    "sweep",
    "load_recording",
    "OutboxSimulation",
    "OutboxRealtime",
    "LeaseSimulation",
    "LeaseRealtime",
    "check_outbox",
    "check_leases",
    "load_scenario",
    "designs",
]
