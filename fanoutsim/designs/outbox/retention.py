"""The retention step: prune outbox rows past their window.

Rows whose ``ts`` is older than ``retention`` go, whatever the cursors say —
the seed's retention consumer prunes "past their windows" — except rows a
consumer still owes as deferred work (a pause is a row; pruning it would
cancel the pause). A consumer whose cursor is behind the pruned rows never
sees them: the dispatcher notes it (``fell_behind``) and the checker counts
those rows as lost with cause ``pruned``. A rebuildable consumer recovers by a
reset: rebuild from the base tables, then replay what is retained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fanoutsim.kernel.timeutil import seconds_to_us

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.steps import Engine


def prune_once(e: Engine, now: int) -> int:
    cutoff = now - seconds_to_us(e.config.retention)
    with e.store.transaction() as tx:
        seqs = tx.prune_outbox(cutoff)
        if seqs:
            e.faults.point("retention.mid_delete", now)
    for seq in seqs:
        e.trace.add(now, "pruned", "retention", what=seq)
    e.metrics.inc("fanoutsim_outbox_pruned_total", len(seqs))
    return len(seqs)
