"""One incarnation of the dispatcher process, sans IO.

An :class:`OutboxEngine` never asks what time it is and never sleeps: each
method takes ``now`` (epoch microseconds) and does one step over the store.
A runtime decides when to call it. What it holds in memory — the topic bus and
its live subscribers, the gaps it is waiting on, which consumers it saw fall
behind — dies with it on a crash; the tables (pages, outbox, cursors, parked,
deferred) do not.

Trace columns, read with the outbox's names: ``subscription`` is the consumer,
``firing`` the seq. Kinds: reserved, committed, fetched, delivered (a consumer's
effect: its ``fn`` ran without raising, as its step began), handled (the step
finished and the row goes behind the consumer), failed,
parked, deferred, cursor, cursor_start, reset, pruned, fell_behind, gap_wait,
gap_skipped, hint, hint_dropped, hint_missed, catch_up (a read by every consumer after the
listener connected again), published, crashed, restarted.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from fanoutsim.designs.outbox import commit as _commit
from fanoutsim.designs.outbox import consumers, dispatcher, retention
from fanoutsim.designs.outbox.bus import TopicBus
from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.consumers import OutboxRegistry
from fanoutsim.designs.outbox.metrics import COMMIT_TO_HANDLED, Meters
from fanoutsim.kernel.faults import Faults
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.steps import StepEngineBase
from fanoutsim.kernel.store import Store
from fanoutsim.kernel.trace import Trace, TraceSchema

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.steps import Engine, OutboxStore

    # for mypy only: binding the steps as methods checks nothing until one is called
    def _bound_to(e: OutboxEngine) -> Engine:
        """The engine the steps are bound to reads as :class:`~.steps.Engine` (mypy says where not)."""
        return e


# the trace in the outbox's words: which consumer, which seq
TRACE = TraceSchema(who="consumer", what="seq", where=None)


class OutboxEngine(StepEngineBase):
    actor = "dispatcher"

    def __init__(
        self,
        store: Store,
        config: OutboxConfig,
        registry: OutboxRegistry,
        metrics: Metrics,
        trace: Trace,
        faults: Faults | None = None,
        rng: random.Random | None = None,
        notify: Callable[[int, list[str]], None] | None = None,
        notify_in_tx: Callable[[Any, list[str]], None] | None = None,
    ) -> None:
        # the store composed with the outbox's tables: its transactions speak the port
        self.store = cast("OutboxStore", store)
        self.config = config
        self.registry = registry
        super().__init__(metrics, trace, faults)
        self.rng = rng or random.Random(0)
        self.notify: Callable[[int, list[str]], None] = notify or (lambda now, payloads: None)
        # a hint sent inside the commit's transaction (PostgreSQL's pg_notify), instead of after it
        self.notify_in_tx = notify_in_tx
        # in memory only: gone with this incarnation
        self.bus = TopicBus()
        self.gaps: dict[tuple[str, int], int] = {}  # (consumer, missing seq) -> first seen
        self.behind_noted: set[tuple[str, int]] = set()
        self.wake_at: dict[str, int] = {}  # consumer -> when a wait (settle, gap) ends
        self.due_at_fetch: dict[str, int | None] = {}  # consumer -> next due time, read with its last fetch
        self._meters: dict[str, Meters] = {}  # consumer -> its counters, bound
        # each consumer's commit-to-handled seconds, bound at its first handled row
        self.commit_to_handled = metrics.histograms(COMMIT_TO_HANDLED, "consumer")
        # consumer -> the last seq it finished since its last status write (self_hint_every only)
        self.unreported: dict[str, int] | None = {} if config.self_hint_every is not None else None

    # the write path
    reserve = _commit.reserve
    commit = _commit.commit
    # consumers and cursors
    add_consumer = consumers.add_consumer
    set_cursor = consumers.set_cursor
    reset_consumer = consumers.reset_consumer
    # one consumer's steps: a read, then its batch a step at a time
    fetch = dispatcher.fetch
    fetch_due = dispatcher.fetch_due
    next_due = dispatcher.next_due
    ready = dispatcher.ready
    read = dispatcher.read
    advance = dispatcher.advance
    effect = dispatcher.effect
    # retention
    prune_once = retention.prune_once

    def meters(self, consumer: str) -> Meters:
        """``consumer``'s counters, bound once (a read and each row bump them)."""
        m = self._meters.get(consumer)
        if m is None:
            count = self.metrics.counter
            m = self._meters[consumer] = Meters(
                count("fanoutsim_outbox_fetches_total", consumer=consumer),
                count("fanoutsim_outbox_handled_total", consumer=consumer),
                count("fanoutsim_outbox_failures_total", consumer=consumer),
                count("fanoutsim_outbox_parked_total", consumer=consumer),
            )
        return m

    def publish(self, now: int) -> int:
        """Publish rows committed since the last call to the topic bus."""
        bus = self.bus
        with self.store.transaction() as tx:
            if bus.position is None:  # a new process: live from here on
                bus.position = tx.outbox_bounds()[1]
                return 0
            # nothing committed since the last publish: the read would find nothing
            rows = tx.fetch_outbox(bus.position, 10_000) if tx.has_outbox_past(bus.position) else []
        trace = self.trace
        for r in rows:
            n = bus.publish(r)
            bus.position = r["seq"]
            # the topic in the consumer column: a bus topic is not a consumer, the kind says so
            trace.add(now, "published", "bus", r["topic"], r["seq"], None, str(n))
        return len(rows)
