"""One incarnation of the broker process, sans IO.

A :class:`LeaseEngine` never asks what time it is and never sleeps: each
method takes ``now`` (epoch microseconds) and does one step over the store.
A runtime decides when to call it. It holds nothing durable in memory: a
crash throws it away and a new one works from the tables alone.

Trace columns, read with this design's names (see
:meth:`fanoutsim.designs.leases.simulation.LeaseSimulation.trace`): ``consumer``,
``event_id``, ``partition``. Kinds: published, consumer_start, leased, acked,
ack_refused, nacked, nack_refused, consume_refused (a pull of a consumer that
does not exist), in_progress, in_progress_refused, terminated, term_refused,
claimed (an idle lease a pull took back: ``lease_expiry = "claim"``),
max_deliveries and dropped (the last allowed delivery failed:
``at_max_deliver``), checkpoint (a partition's checkpoint moved: the event it
now stands on, its seq), expired (by recovery: the loop, the
start-up pass or a pull), dead_lettered, lease_voided (by a restore), seek,
seek_refused, retired, retire_refused, restored, backup (a copy of the tables
taken: its label), backup_restored (the label put back), pruned (detail: the
fence, or ``interest``), delivered (by ack, for
an ack by hand: the caller's effect, traced with the ack's commit), and from the runtime:
delivered (a worker's effect), crashed, restarted, fault.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from fanoutsim.designs.leases import backup as backups
from fanoutsim.designs.leases import consumers, leasing, log
from fanoutsim.designs.leases.config import LeaseConfig
from fanoutsim.designs.leases.metrics import PUBLISH_TO_ACK
from fanoutsim.designs.leases.tables import DEFAULT_DATABASE, check_database, in_database
from fanoutsim.designs.leases.tables.port import LeaseStore
from fanoutsim.kernel.faults import Faults
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.steps import StepEngineBase
from fanoutsim.kernel.store import Store
from fanoutsim.kernel.trace import Trace, TraceSchema

if TYPE_CHECKING:
    from fanoutsim.designs.leases.steps import Engine

    # for mypy only: binding the steps as methods checks nothing until one is called
    def _bound_to(e: LeaseEngine) -> Engine:
        """The engine the steps are bound to reads as :class:`~.steps.Engine` (mypy says where not)."""
        return e


# the trace in leases' words; a node's incarnation is its ``process``
TRACE = TraceSchema(who="consumer", what="event_id", where="partition", incarnation="process")


class LeaseEngine(StepEngineBase):
    """The broker of one named database (``database``: its tables in the
    store, see :func:`~.tables.in_database`; sibling databases in the same
    store share nothing — log, consumers, history incarnation)."""

    actor = "broker"

    def __init__(
        self,
        store: Store,
        config: LeaseConfig,
        metrics: Metrics,
        trace: Trace,
        faults: Faults | None = None,
        seed: int = 0,
        database: str = DEFAULT_DATABASE,
    ) -> None:
        # the store composed with the leases tables: its transactions speak the port
        self.store = cast(LeaseStore, store)
        self.database = check_database(database)
        self.config = config
        super().__init__(metrics, trace, faults)
        self.seed = seed
        # every pull and ack counts per consumer: their series bound once
        self.leased = metrics.counters("fanoutsim_lease_leases_total", "consumer")
        self.delivered = metrics.counters("fanoutsim_lease_delivered_total", "consumer")
        self.acked = metrics.counters("fanoutsim_lease_acked_total", "consumer")
        self.publish_to_ack = metrics.histograms(PUBLISH_TO_ACK, "consumer")

    def tx(self) -> in_database:
        """A transaction on this engine's database."""
        return in_database(self.store, self.database)

    # the log
    publish = log.publish
    prune_once = log.prune_once
    # consumers
    add_consumer = consumers.add_consumer
    seek = consumers.seek
    retire = consumers.retire
    status = consumers.status
    # leases
    consume = leasing.consume
    ack = leasing.ack
    deliver = leasing.deliver
    nack = leasing.nack
    in_progress = leasing.in_progress
    term = leasing.term
    recover = leasing.recover
    next_due = leasing.next_due
    restore = leasing.restore
    # backup and restore
    backup = backups.backup
    restore_backup = backups.restore_backup
