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
from .config import SchedulerConfig
from . import faults
from .checker import CheckReport, check, check_store, explain
from .faults import CRASH_POINTS, Crash, FaultPlan, InsertFailed
from .minimize import minimize
from .payload import decode_sources, encode_payload
from .predicate import ALLOWED_VARIABLES, InvalidPredicate
from .reactor.triggers import TriggerFireFailed
from .runtime import Realtime, Simulation
from .runtime.outbox import OutboxSimulation
from .runtime.outbox_realtime import OutboxRealtime
from .runtime.leases import LeaseSimulation
from .runtime.leases_realtime import LeaseRealtime
from .sweep import sweep
from .replay import load_recording

__version__ = "0.1.0"

__all__ = [
    "SchedulerConfig", "Simulation", "Realtime", "InvalidPredicate", "ALLOWED_VARIABLES",
    "Crash", "InsertFailed", "CRASH_POINTS", "TriggerFireFailed", "FaultPlan", "faults",
    "check", "check_store", "explain", "CheckReport", "minimize",
    "encode_payload", "decode_sources", "__version__",
    "sweep", "load_recording", "OutboxSimulation", "OutboxRealtime", "LeaseSimulation", "LeaseRealtime",
]
