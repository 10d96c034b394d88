"""Subscriptions: who wants a reactor's firings, per tenant, with which filter.

One row per ``(reactor_name, workflow_name, tenant_id)``; subscribing again
upserts the same row (same id), replacing its predicate and enabling it, while
its watermark stays where it was. The CEL filter is compiled before the
transaction opens, so a bad one writes nothing.
"""

from __future__ import annotations

from fanoutsim.designs.reactor.predicate import compile_predicate
from fanoutsim.kernel.names import check_name


def undeclared_workflow(workflow: str, declared, how: str = "") -> str | None:
    """The one rule for a subscription's workflow, in code and in scenario files:
    when any workflows are declared, it must name one of them (an undeclared
    one would run as an instant no-op, which is almost always a typo); with none
    declared, every workflow is such a no-op. The message, or None if allowed."""
    declared = list(declared)
    if not declared or workflow in declared:
        return None
    return (
        f"workflow {workflow!r} is not declared{how}; a subscription must name a declared workflow once any "
        f"are (an undeclared one would run as an instant no-op); declared: {', '.join(declared)}"
    )


def subscribe(e, now: int, reactor: str, workflow: str, tenant: str = "public", *, when=None) -> str:
    check_name("reactor name", reactor)
    check_name("workflow name", workflow)
    check_name("tenant name", tenant)
    problem = undeclared_workflow(workflow, e.registry.workflows, " (runner.register_workflow declares one)")
    if problem is not None:
        raise ValueError(problem)
    if when is not None:
        compile_predicate(when)  # raises InvalidPredicate; nothing written
    with e.store.transaction() as tx:
        tx.lock_subscriptions()  # another process subscribing the same triple: it finds this one's row
        existing = tx.get_subscription(reactor, workflow, tenant)
        if existing is not None:
            changes = {"predicate": when, "enabled": True, "updated_at": now}
            if existing["predicate"] != when:  # old filter's error state means nothing now
                changes.update(
                    predicate_error_count=0,
                    predicate_error_firing_id=None,
                    last_predicate_error=None,
                    predicate_degraded=False,
                )
            tx.update_subscription(existing["id"], changes)
            return existing["id"]
        sub_id = e.ids.new()
        tx.insert_subscription(
            {
                "id": sub_id,
                "reactor_name": reactor,
                "workflow_name": workflow,
                "tenant_id": tenant,
                "enabled": True,
                "predicate": when,
                "last_seen_fired_at": None,
                "last_seen_firing_id": None,
                "predicate_error_count": 0,
                "predicate_error_firing_id": None,
                "last_predicate_error": None,
                "predicate_degraded": False,
                "created_at": now,
                "updated_at": now,
            }
        )
        return sub_id


def unsubscribe(e, now: int, reactor: str, workflow: str, tenant: str = "public") -> bool:
    with e.store.transaction() as tx:
        existing = tx.get_subscription(reactor, workflow, tenant)
        return existing is not None and tx.delete_subscription(existing["id"])


def set_enabled(e, now: int, reactor: str, workflow: str, tenant: str = "public", enabled: bool = True) -> bool:
    """Pause (``enabled=False``) or resume a subscription; False if there is none."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, got {enabled!r}")
    with e.store.transaction() as tx:
        existing = tx.get_subscription(reactor, workflow, tenant)
        if existing is None:
            return False
        tx.update_subscription(existing["id"], {"enabled": enabled, "updated_at": now})
    e.trace.add(now, "subscription", "runner", who=existing["id"], detail="enabled" if enabled else "disabled")
    return True


def list_subscriptions(e, tenant: str | None = None) -> list[dict]:
    with e.store.transaction() as tx:
        return tx.list_subscriptions(tenant=tenant)
