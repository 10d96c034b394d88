"""The reactor checker's causes in plain words, and which ones a run's configuration accepts."""

from __future__ import annotations

CAUSES = {
    "lost": {
        "pruned": "the prune loop deleted the firing before the subscription's poll reached it",
        "tie": "a sibling firing with the same fired_at ended a batch, and the strict '>' of the watermark "
        "never reads that stamp again",
        "late_visibility": "the firing became visible (a late commit, a lagging writer clock) after the "
        "watermark had passed its fired_at",
        "dispatch_failed": "the execution insert failed and the watermark moved past the firing anyway",
        "behind_watermark": "a retained firing behind the watermark was never dispatched",
        "unknown": "nothing in the mechanism explains it: a defect",
    },
    "duplicates": {
        "crash": "the runner crashed after a dispatch committed and before its watermark move did, so the "
        "restart dispatched the firing again (at-least-once)",
        "ambiguous_insert": "an insert whose answer was lost was retried after it had committed",
        "several_pollers": "two pollers read the same watermark and both dispatched the firing",
        "watermark_rewind": "the watermark was moved back by hand and the firing read again",
        "unknown": "nothing in the mechanism explains it: a defect",
    },
}


def expected(checked, kind: str, cause: str) -> bool:
    """A loss is expected when the configuration does not promise the firing
    (a TTL prune, ``dispatch_failure_policy="advance"``: the checker's
    ``promised`` column is false for every such loss); a duplicate is the
    at-least-once promise unless nothing explains it."""
    if cause == "unknown":
        return False
    if kind == "duplicates":
        return True
    frame = checked.lost
    rows = frame[frame["cause"] == cause]
    return not ("promised" in rows.columns and bool(rows["promised"].any()))


def reader_label(reactor: str, workflow: str, tenant: str) -> str:
    """A subscription as the checker's table and the verdicts name it."""
    return f"{reactor}->{workflow}@{tenant}"


def verdicts(checked) -> list[dict]:
    """The check's duplicated and lost firings one by one
    (:func:`fanoutsim.kernel.check.item_verdicts`), each subscription named
    ``reactor->workflow@tenant`` as the checker's table names it."""
    from fanoutsim.kernel.check import item_verdicts

    per = checked.per_subscription
    label = {
        r.subscription: reader_label(r.reactor_name, r.workflow_name, r.tenant_id) for r in per.itertuples(index=False)
    }

    def named(frame):
        return frame.assign(reader=[label.get(s, s) for s in frame["subscription"]])

    return item_verdicts(named(checked.duplicates), named(checked.lost), reader="reader", item="firing")
