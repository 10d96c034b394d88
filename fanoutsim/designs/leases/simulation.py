"""Leased durable consumers under SimPy's virtual clock: a seeded, replayable run.

The loops and API are :class:`~.runtime.LeaseRuntime`'s, written once for both
clocks; this face picks the virtual driver
(:class:`~fanoutsim.kernel.runtime.virtual.VirtualRuntime`): virtual seconds
since ``start``, seeded streams, and :meth:`LeaseSimulation.run`. The broker
API by hand, the table views, the trace and the metrics live in
:class:`~.host.LeaseHost`.
"""

from __future__ import annotations

from typing import Any

from fanoutsim.designs.leases.config import LeaseConfig
from fanoutsim.designs.leases.host import LeaseClient, checked_lease_config
from fanoutsim.designs.leases.runtime import ADMIN_STEPS, LeaseRuntime
from fanoutsim.designs.leases.tables import check_database
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, until_ok

__all__ = ["LeaseSimulation", "Client", "ADMIN_STEPS"]

Client = LeaseClient  # the name this module gave it first


class LeaseSimulation(LeaseRuntime, VirtualRuntime):
    """One seeded run of leased durable consumers under a virtual clock.

    >>> sim = LeaseSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> sim.publish("org-1", "ticket.changed", {"ticket": 7})
    '1:0'
    >>> sim.run(until=2.0)
    >>> sim.checkpoints()["seq"].tolist()
    [1]
    """

    def __init__(
        self,
        config: LeaseConfig | None = None,
        seed: int = 0,
        store: Any = "memory",
        *,
        start=None,
        faults=None,
        trace: bool = True,
        database: str = "default",
    ) -> None:
        self.config, self.seed = checked_lease_config(config, seed), seed
        self.database = check_database(database)
        self._open(seed, store, start, faults, trace, opener=open_store)
        self._setup()
        self.restart()
        self._schedule_crashes()

    def run(self, until: float | None = None) -> None:
        """Advance the virtual clock to ``until`` seconds (absolute, >= now)."""
        if not until_ok(self.env, until):
            return
        self._advance(until)
