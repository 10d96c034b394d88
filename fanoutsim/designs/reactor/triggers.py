"""Trigger-name fan-out: the other "fan-out", kept for contrast (seed 000).

A trigger has a primary workflow (its ``on`` target); any other workflow that
names the trigger is a secondary subscriber. When the trigger fires, every
subscriber gets an execution *at fire time* — no log, no watermark, no
re-delivery. The context is snapshotted to JSON once and each subscriber gets
its own copy rebuilt from that snapshot, so none can alter another's input.
A primary failure fails the fire; a secondary failure is logged and nothing more.
"""

from __future__ import annotations

import json

from fanoutsim.designs.reactor.faults import InsertFailed


class TriggerFireFailed(RuntimeError):
    """The primary workflow of a trigger could not be started."""


def fire_trigger(e, now: int, name: str, context: dict | None = None) -> dict[str, str | None]:
    """Start every subscriber of trigger ``name``; returns workflow -> execution
    id (None where a secondary failed). Raises TriggerFireFailed if the primary failed."""
    subscribers = e.registry.trigger_subscribers(name)
    snapshot = json.dumps({**(context or {}), "trigger_name": name}, separators=(",", ":"))
    started: dict[str, str | None] = {}
    primary_error = None
    for i, workflow in enumerate(subscribers):
        row = {
            "id": e.ids.new(),
            "workflow_name": workflow,
            "tenant_id": "public",
            "context": snapshot,  # each run parses its own copy
            "status": "pending",
            "dispatched_at": now,
            "claimed_at": None,
            "finished_at": None,
        }
        try:
            with e.store.transaction() as tx:
                e.faults.before_insert(workflow, now)
                tx.insert_execution(row)
        except InsertFailed as exc:
            started[workflow] = None
            e.metrics.inc(
                "fanoutsim_trigger_subscriber_failures_total", trigger=name, role="primary" if i == 0 else "secondary"
            )
            e.trace.add(now, "dispatch_failed", "trigger", where=row["id"], detail=f"{name} -> {workflow}: {exc}")
            if i == 0:
                primary_error = exc
            continue
        started[workflow] = row["id"]
        e.trace.add(now, "dispatched", "trigger", where=row["id"], detail=f"{name} -> {workflow}")
    if primary_error is not None:
        raise TriggerFireFailed(f"trigger {name!r}: primary workflow {subscribers[0]!r} failed: {primary_error}")
    return started
