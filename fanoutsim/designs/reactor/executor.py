"""The executor: claims pending executions and runs their workflow bodies.

A crash abandons the bodies in flight; the next incarnation's ``recover``
puts their rows back to pending. This is the second half of seed 000's latency budget ("one
workflow-execution-insert + one workflow-claim-and-run cycle"): a dispatched
row waits for the executor's next claim tick, then for a free worker, then runs
for its workflow's duration. A workflow with no registered body runs as a
no-op that takes no time.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fanoutsim.designs.reactor.steps import Engine
    from fanoutsim.designs.reactor.tables.port import ExecutionRow


def claim(e: Engine, now: int, limit: int) -> list[ExecutionRow]:
    """Claim up to ``limit`` pending executions, oldest first."""
    return claim_next(e, now, limit) or []


def claim_next(e: Engine, now: int, limit: int) -> list[ExecutionRow] | None:
    """:func:`claim`, or None when the store says nothing is pending: then
    no claim can take anything until a step leaves an execution pending
    (see :func:`has_pending`), and a runtime may sleep until then."""
    if limit <= 0:
        return []
    with e.store.transaction() as tx:
        # nothing pending: the claim would take nothing (a store that cannot tell answers True)
        if not tx.has_pending_executions():
            return None
        rows = tx.claim_executions(now, limit)
    add = e.trace.add
    for row in rows:
        add(now, "claimed", "executor", None, None, row["id"], row["workflow_name"])
    point = e.points["executor.after_claim"]
    if rows and point is not None:
        point("executor.after_claim", now, executions=len(rows))
    return rows


def has_pending(e: Engine, now: int) -> bool:
    """Whether a claim could find anything (False: certainly not)."""
    with e.store.transaction() as tx:
        return tx.has_pending_executions()


def recover(e: Engine, now: int) -> list[str]:
    """At a start of the runner process: executions an earlier incarnation
    claimed and never finished go back to pending, so a worker runs them again
    (workflows are retried; their bodies should be idempotent)."""
    with e.store.transaction() as tx:
        requeued = tx.requeue_running()
    for eid in requeued:
        e.trace.add(now, "requeued", "executor", where=eid)
    if requeued:
        e.metrics.inc("fanoutsim_executions_requeued_total", len(requeued))
    return requeued


def run_body(e: Engine, row: ExecutionRow) -> str:
    """Call the workflow body with a fresh context; ``completed`` or ``failed``."""
    spec = e.registry.workflows.get(row["workflow_name"])
    if spec is None or spec.fn is None:
        return "completed"
    try:
        spec.fn(json.loads(row["context"]))
    except Exception:
        return "failed"
    return "completed"


def duration_of(e: Engine, now: int, row: ExecutionRow) -> float:
    """Seconds the body runs for: fixed, or drawn from the engine's seeded RNG
    (a fault plan may make it slow or wedge it)."""
    spec = e.registry.workflows.get(row["workflow_name"])
    base = 0.0
    if spec is not None:
        d = spec.duration
        base = float(d(e.rng)) if callable(d) else float(d)
    duration: float = e.faults.run_duration(row["workflow_name"], now, base)  # the hook answers in seconds
    return duration


def finish(e: Engine, now: int, execution_id: str, status: str) -> None:
    with e.store.transaction() as tx:
        tx.finish_execution(execution_id, now, status)
    e.trace.add(now, "finished", "executor", where=execution_id, detail=status)
