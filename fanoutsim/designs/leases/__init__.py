"""Leased durable consumers (seed 003, RiffDB).

Events are appended to a durable log in *commits*; each event belongs to one
*partition* and has the id ``<commit-sequence:event-ordinal>``. A durable
*consumer* pulls: ``consume`` *leases* eligible events — in partition order,
several per partition within a resolution window past the partition's
checkpoint, as RiffDB's code does (or one per partition, the seed's
head-of-line reading: ``LeaseConfig(partition_order="head_of_line")``; see
:mod:`.leasing`) — each with a lease token, the current *history incarnation*
and an expiry. Only an exact ``ack(event_id, token, incarnation)`` resolves an
event; the checkpoint moves past it once every earlier event of the partition
is resolved. A wrong token, an expired lease or a stale incarnation fails
closed. ``nack`` and lease expiry (recovery: at start-up, in a loop, inside a
pull) schedule a bounded retry, and the 10th failed attempt becomes a *dead
letter* so later events continue. ``seek`` moves a checkpoint
(administrative), ``retire`` deletes a consumer and releases its *retention
fence* (both refused while it holds a live lease), and ``restore`` publishes a
new incarnation, turning every live lease into a failed attempt; ``backup``
copies a database's tables and ``restore_backup`` puts them back (checkpoints
and log return to the backup) under a new incarnation. The public API takes a
caller credential (:mod:`.authority`): a consumer's own for its leases, the
admin grant for seek, retire and restores. One store holds sibling *named
databases* (``LeaseSimulation(database=...)``) that share nothing.
Delivery is at-least-once: a worker whose lease expires before its ack, or a
crash between a worker's effect and its ack, re-delivers — from the tables,
never from a script.

Where things live:

=================  ======================================================
``config.py``      ``LeaseConfig``; the seed's limits (batch, in-flight, lease) and ``MAX_ATTEMPTS``;
                   the brokers' rules (NATS JetStream, Redis Streams) as options, RiffDB's by default
``rules.py``       those rules where they differ from RiffDB's: BackOff leases, the nak delay, the limit, interest
``presets.py``     ``LeaseConfig.preset("nats-jetstream-2.15")``, ``("redis-streams-6.2")``: each value's source
``log.py``         publish (one commit of events) and retention behind the fence
``consumers.py``   add, seek, retire, status (RiffDB's revision and counts)
``leasing.py``     consume, ack, nack, in_progress, term, recover (lease expiry), restore
``backup.py``      backup (a copy of the tables) and restore_backup (put back, new incarnation)
``authority.py``   caller credentials: a consumer's own, the admin grant; what each may do
``identity.py``    durable consumer identity: (module hash, operation, parameters, name)
``engine.py``      one incarnation of the broker process: wires the above
``checker.py``     delivered / duplicated / lost / dead-lettered / out of order, and why
``scenario.py``    scenario files with ``design = "leases"``
=================  ======================================================

The runtimes are :class:`fanoutsim.designs.leases.simulation.LeaseSimulation` (the
virtual clock) and :class:`fanoutsim.designs.leases.realtime.LeaseRealtime`
(the wall clock); both drive the same engine.
"""

from fanoutsim.designs.leases.authority import ADMIN, Credential, Unauthorized
from fanoutsim.designs.leases.backup import Backup
from fanoutsim.designs.leases.config import MAX_ATTEMPTS, LeaseConfig
from fanoutsim.designs.leases.engine import LeaseEngine
from fanoutsim.designs.leases.leasing import Lease, Pull
from fanoutsim.designs.leases.log import HistoryPruned

__all__ = [
    "LeaseConfig",
    "LeaseEngine",
    "Lease",
    "Pull",
    "MAX_ATTEMPTS",
    "HistoryPruned",
    "ADMIN",
    "Credential",
    "Unauthorized",
    "Backup",
]
