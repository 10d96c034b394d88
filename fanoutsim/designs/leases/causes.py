"""The leases checker's causes in plain words, and which ones its contract accepts."""

from __future__ import annotations

CAUSES = {
    "lost": {
        "seek": "the consumer was moved (seek) past the event before it was delivered, on purpose",
        "retired": "the consumer was retired on purpose before the event reached it: a retired consumer "
        "owes nothing more",
        "restore": "a backup was restored and the event, published after the backup, was gone from the log",
        "term": "the consumer's worker terminated the event (JetStream's Term): its redelivery stopped, "
        "unprocessed, on purpose",
        "max_deliver": "the event's last allowed delivery (max_deliver) failed and the broker dropped it "
        "for this consumer, on purpose",
        "pruned": "retention deleted the event before the consumer resolved it: its retention fence should "
        "make this impossible",
        "not_retained": "the stream's retention deleted the event before the consumer resolved it: under "
        "this retention policy (JetStream's MaxAge and interest, Redis's XTRIM MINID) no consumer holds "
        "events back",
        "unknown": "nothing in the mechanism explains it: a defect",
    },
    "duplicates": {
        "seek": "the consumer was moved back (seek) over the event, which came again",
        "restore": "a restore brought back older checkpoints, so the event came again",
        "lease_expired": "the worker outlived its lease: the event was leased again and the late ack "
        "failed closed (at-least-once)",
        "late_ack": "the worker outlived its lease and the event was leased again; the broker honoured the "
        "late ack (JetStream, Redis), but the redelivery was already out",
        "claimed": "the worker's lease sat idle past its min-idle-time and a pull claimed it (Redis "
        "XAUTOCLAIM): the event was delivered again",
        "crash": "the node crashed after the effect and before the ack, so the event came again",
        "unknown": "nothing in the mechanism explains it: a defect",
    },
}


def expected(checked, kind: str, cause: str) -> bool:
    """A loss by seek, retirement or restore is what an operator asked for; a
    pruned event is a broken fence; a duplicate is the at-least-once promise
    unless nothing explains it."""
    if kind == "duplicates":
        return cause != "unknown"
    from .checker import _BROKEN  # the checker's own rule: its verdict turns invalid on these

    return cause not in _BROKEN


def verdicts(checked) -> list[dict]:
    """The check's duplicated and lost events one by one, by consumer and
    event id (:func:`fanoutsim.kernel.check.item_verdicts`)."""
    from fanoutsim.kernel.check import item_verdicts

    return item_verdicts(checked.duplicates, checked.lost, reader="consumer", item="event_id")
