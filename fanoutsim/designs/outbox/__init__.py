"""The transactional outbox dispatcher (seed 002, Subspace).

Every committed change appends one ``outbox`` row in the same transaction;
after the commit a *hint* (only the seq) goes out on a best-effort channel. A
dispatcher wakes on a hint or on its periodic *safety poll* and, for each
*consumer* independently, reads *all* rows past that consumer's *cursor* in
seq order — never just the row a hint named — hands each to the consumer, and
moves the cursor only after the row is durably handled. So a lost hint costs
latency, never data, and a crash re-delivers (at-least-once) but loses nothing.
Guardrails keep one bad row or slow call from wedging the feed: a timeout per
step, backoff with jitter, and *parking* after a retry budget. Rows with a due
time are durable deferred work. A retention step prunes old rows.

Where things live:

=================  ======================================================
``config.py``      ``OutboxConfig`` (dispatcher) and ``ConsumerSpec`` (one consumer)
``commit.py``      the write path: change + outbox row in one transaction, then the hint
``notify.py``      the lossy hint channel (drop, coalesce, delay, silent)
``dispatcher.py``  one consumer's steps: a read past the cursor, its batch (begin, finish)
``consumers.py``   the registry, cursors: add, point, reset and replay
``retention.py``   the retention step
``bus.py``         the topic bus: best-effort, not durable
``engine.py``      one incarnation of the dispatcher process: wires the above
``checker.py``     delivered / duplicated / lost / parked per consumer, and why
``scenario.py``    scenario files with ``design = "outbox"``
``presets.py``     real job queues' defaults (procrastinate 3.10, pgqueuer 1.6) as options
``realqueues/``    those queues run on a real PostgreSQL, against the model
=================  ======================================================

The runtimes are :class:`fanoutsim.designs.outbox.simulation.OutboxSimulation` (the
virtual clock) and :class:`fanoutsim.designs.outbox.realtime.OutboxRealtime`
(the wall clock); both drive the same engine.
"""

from fanoutsim.designs.outbox.config import ConsumerSpec, OutboxConfig
from fanoutsim.designs.outbox.consumers import OutboxRegistry
from fanoutsim.designs.outbox.engine import OutboxEngine

__all__ = ["OutboxConfig", "ConsumerSpec", "OutboxRegistry", "OutboxEngine"]
