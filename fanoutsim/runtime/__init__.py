"""Runtimes decide *when* the engine's steps run; the engine decides *what* they do.

:mod:`.simulation` drives the reactor design's engine from a SimPy virtual
clock: a day passes in seconds and every run is reproducible from its seed.
:mod:`.realtime` drives the same engine from the wall clock, with threads,
over a DuckDB file. :mod:`.outbox` and :mod:`.outbox_realtime` are the same
pair for the outbox design, :mod:`.leases` and :mod:`.leases_realtime` for the
leased consumers. :mod:`.host` holds what the runtimes of a design
share (the public API's plumbing, the table views); :mod:`.virtual` and
:mod:`.wallclock` hold what the runtimes of a clock share (planned crashes).
"""
from fanoutsim.designs.reactor.realtime import Realtime
from fanoutsim.designs.reactor.simulation import Simulation

__all__ = ["Simulation", "Realtime"]
