"""One pass of the prune loop (seed 000, "Watermark, TTL, and pruning").

``ttl`` (as shipped) deletes every firing older than the retention, whatever
the watermarks say: a subscription paused longer than the retention silently
loses what was pruned under it (seed 001's "TTL prune gotcha").
``conservative`` (seed 000's wording) also requires every enabled subscription
of the firing's reactor and tenant to be at or past it, so nothing is deleted
that some subscriber would still deliver — and a never-polled subscription
(NULL watermark) holds its stream open indefinitely.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fanoutsim.kernel.timeutil import seconds_to_us

if TYPE_CHECKING:
    from fanoutsim.designs.reactor.steps import Engine


def prune_once(e: Engine, now: int) -> int:
    """Delete in chunks of ``reactor_firings_prune_chunk``, each its own
    transaction; returns the number of rows deleted."""
    cfg = e.config
    cutoff = now - seconds_to_us(cfg.reactor_firings_retention)
    conservative = cfg.prune_policy == "conservative"
    chunk = cfg.reactor_firings_prune_chunk
    total = 0
    while True:
        with e.store.transaction() as tx:
            # nothing old enough: the delete would find nothing
            deleted = tx.prune_firings(cutoff, conservative, chunk) if tx.has_firings_before(cutoff) else []
        for fid in deleted:
            e.trace.add(now, "pruned", "pruner", what=fid)
        total += len(deleted)
        if deleted:
            e.metrics.inc("fanoutsim_reactor_firings_pruned_total", len(deleted))
        if len(deleted) < chunk:
            break
        e.faults.point("prune.mid_delete", now, deleted=total)
    e.trace.add(now, "pruned", "pruner", detail=str(total))
    return total
