"""Leased durable consumers under SimPy's virtual clock: a seeded, replayable run.

The loops and API are :class:`~.runtime.LeaseRuntime`'s, written once for both
clocks; this face picks the virtual driver
(:class:`~fanoutsim.kernel.runtime.faces.VirtualFace`, whose constructor every
design shares): virtual seconds since ``start``, seeded streams, and
:meth:`LeaseSimulation.run`. The broker
API by hand, the table views, the trace and the metrics live in
:class:`~.host.LeaseHost`.
"""

from __future__ import annotations

from fanoutsim.designs.leases.host import LeaseClient
from fanoutsim.designs.leases.runtime import ADMIN_STEPS, LeaseRuntime
from fanoutsim.kernel.runtime.faces import VirtualFace

__all__ = ["LeaseSimulation", "Client", "ADMIN_STEPS"]

Client = LeaseClient  # the name this module gave it first


class LeaseSimulation(LeaseRuntime, VirtualFace):
    """One seeded run of leased durable consumers under a virtual clock:
    ``LeaseSimulation(config=None, seed=0, store="memory", *, start=None,
    faults=None, trace=True, database="default")``.

    >>> sim = LeaseSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> sim.publish("org-1", "ticket.changed", {"ticket": 7})
    '1:0'
    >>> sim.run(until=2.0)
    >>> sim.checkpoints()["seq"].tolist()
    [1]
    """
