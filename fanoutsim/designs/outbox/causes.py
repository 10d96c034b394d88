"""The outbox checker's causes in plain words, and which ones its contract accepts."""

from __future__ import annotations

CAUSES = {
    "lost": {
        "late_commit": "the row committed after this consumer had read past its seq (a seq is assigned at "
        "insert, visible at commit): read_mode settled or gap closes that hole",
        "seek": "the consumer's cursor was moved past the row by hand (set_cursor), a deliberate skip",
        "gap_timeout": "read_mode gap waited for the missing seq and gave up, as configured",
        "pruned": "retention deleted the row before the consumer handled it",
        "unknown": "nothing in the mechanism explains it: a defect",
    },
    "duplicates": {
        "crash": "the process crashed after the handler ran and before the cursor passed the row, so the "
        "restart handled it again (at-least-once)",
        "reset": "the cursor was moved back by hand and the row replayed, by design",
        "unknown": "nothing in the mechanism explains it: a defect",
    },
}


def expected(checked, kind: str, cause: str) -> bool:
    """A loss by seek, a gap timeout or retention is a documented way to drop a
    row; a late commit is a broken promise; a duplicate is the at-least-once
    promise unless nothing explains it."""
    if kind == "duplicates":
        return cause != "unknown"
    from .checker import _PROMISED  # the checker's own rule: its verdict turns invalid on these

    return cause not in _PROMISED


def verdicts(checked) -> list[dict]:
    """The check's duplicated and lost rows one by one, by consumer and seq
    (:func:`fanoutsim.kernel.check.item_verdicts`)."""
    from fanoutsim.kernel.check import item_verdicts

    return item_verdicts(checked.duplicates, checked.lost, reader="consumer", item="seq")
