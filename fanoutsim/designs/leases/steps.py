"""What the leased-consumer design's engine steps read of their engine: a typed port.

Each step module (:mod:`.log`, :mod:`.consumers`, :mod:`.leasing`,
:mod:`.backup`) is a set of functions of the engine ``e`` and ``now``, bound
as :class:`~.engine.LeaseEngine`'s methods. :class:`Engine` names what they may
touch, so a step is checked against that and nothing more: transactions on the
engine's database (:meth:`Engine.tx`, speaking the port
:class:`~.tables.port.LeaseTx`), the config, and what every design's steps
read (:class:`~fanoutsim.kernel.steps.StepEngine`: trace, metrics, faults).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from fanoutsim.kernel.steps import StepEngine

if TYPE_CHECKING:  # names for the checker only: the engine that binds the steps imports them
    from contextlib import AbstractContextManager

    from fanoutsim.designs.leases.config import LeaseConfig
    from fanoutsim.designs.leases.tables.port import LeaseStore, LeaseStoreTx
    from fanoutsim.kernel.metrics import Bump, Family, Observe


class Engine(StepEngine, Protocol):
    """What a leases step reads of :class:`~.engine.LeaseEngine`."""

    store: LeaseStore
    # the named database this broker serves (its tables in the store)
    database: str
    config: LeaseConfig
    # what the lease tokens are drawn from
    seed: int
    # the trace's actor of the broker's steps
    actor: str
    # the counters and the histogram every pull and ack bumps, by consumer
    leased: Family[Bump]
    delivered: Family[Bump]
    acked: Family[Bump]
    publish_to_ack: Family[Observe]

    def tx(self) -> AbstractContextManager[LeaseStoreTx, Literal[False]]:
        """A transaction on the engine's database."""
        ...
