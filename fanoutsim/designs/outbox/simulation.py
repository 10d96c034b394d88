"""The outbox dispatcher under SimPy's virtual clock: a seeded, replayable run.

The loops, hints and API are :class:`~.runtime.OutboxRuntime`'s, written once
for both clocks; this face only picks the virtual driver
(:class:`~fanoutsim.kernel.runtime.faces.VirtualFace`, whose constructor every
design shares): virtual seconds since ``start``, seeded streams, and
:meth:`OutboxSimulation.run`.
"""

from __future__ import annotations

from fanoutsim.designs.outbox.runtime import OutboxRuntime
from fanoutsim.kernel.runtime.faces import VirtualFace


class OutboxSimulation(OutboxRuntime, VirtualFace):
    """One seeded run of the outbox dispatcher under a virtual clock:
    ``OutboxSimulation(config=None, seed=0, store="memory", *, start=None,
    faults=None, trace=True)``.

    >>> sim = OutboxSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> seq = sim.commit("p1", "hello")
    >>> sim.run(until=1.0)
    >>> sim.cursors()["seq"].tolist()
    [1]
    """
