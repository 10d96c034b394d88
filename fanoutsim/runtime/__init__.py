"""Runtimes decide *when* the engine's steps run; the engine decides *what* they do.

This package is the reactor design's pair, kept at its old address:
:class:`Simulation` (``fanoutsim.designs.reactor.simulation``) drives the
engine from a SimPy virtual clock, where a day passes in seconds and every run
is reproducible from its seed; :class:`Realtime`
(``fanoutsim.designs.reactor.realtime``) drives the same engine from the wall
clock, with threads, over a DuckDB file or PostgreSQL. Each design has such a
pair in its own package (``fanoutsim.designs.outbox.simulation`` and
``.realtime``, ``fanoutsim.designs.leases.simulation`` and ``.realtime``);
what the runtimes of one clock share is in ``fanoutsim.kernel.runtime``
(``virtual``: SimPy, ``wallclock``: threads, ``binding``: the hooks a
design implements).
"""

from fanoutsim.designs.reactor.realtime import Realtime
from fanoutsim.designs.reactor.simulation import Simulation

__all__ = ["Simulation", "Realtime"]
