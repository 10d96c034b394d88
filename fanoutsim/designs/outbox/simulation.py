"""The outbox dispatcher under SimPy's virtual clock: a seeded, replayable run.

The loops, hints and API are :class:`~.runtime.OutboxRuntime`'s, written once
for both clocks; this face only picks the virtual driver
(:class:`~fanoutsim.kernel.runtime.virtual.VirtualRuntime`): virtual seconds
since ``start``, seeded streams, and :meth:`OutboxSimulation.run`.
"""

from __future__ import annotations

from typing import Any

from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.host import checked_outbox_config
from fanoutsim.designs.outbox.runtime import OutboxRuntime
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, until_ok


class OutboxSimulation(OutboxRuntime, VirtualRuntime):
    """One seeded run of the outbox dispatcher under a virtual clock.

    >>> sim = OutboxSimulation(seed=1)
    >>> _ = sim.register_consumer("indexer")
    >>> seq = sim.commit("p1", "hello")
    >>> sim.run(until=1.0)
    >>> sim.cursors()["seq"].tolist()
    [1]
    """

    def __init__(
        self,
        config: OutboxConfig | None = None,
        seed: int = 0,
        store: Any = "memory",
        *,
        start=None,
        faults=None,
        trace: bool = True,
    ) -> None:
        self.config, self.seed = checked_outbox_config(config, seed), seed
        self._open(seed, store, start, faults, trace, opener=open_store)
        self._setup()
        self.restart()
        self._schedule_crashes()
        self._service(self._safety_poll(), "safety-poll")

    def run(self, until: float | None = None) -> None:
        """Advance the virtual clock to ``until`` seconds (absolute, >= now)."""
        if not until_ok(self.env, until):
            return
        self._advance(until)
