"""The outbox design behind ``fanoutsim serve``, ``fanoutsim write`` and
``fanoutsim status`` (what its :class:`~fanoutsim.kernel.design.Design` record
gives the design-free serving process): :func:`open_realtime`, :func:`write`
(a commit) and :func:`status_of`."""

from __future__ import annotations

import math
from typing import Any

from fanoutsim.kernel.designkit import check_write, join_each, populated, status_record, text_field, wall_workloads
from fanoutsim.kernel.validate import is_real

from .roles import ROLES

WRITE_FIELDS = {
    "page": "the page whose change is committed (required)",
    "body": "the change's body (default: none)",
    "topic": "its topic on the bus (default: none)",
    "kind": 'its kind (default "page.updated")',
    "due_in": "seconds from now at which it is due: deferred work (default: now)",
}

# the furthest ahead a write may place work: 100 years, far inside the
# timestamps' year-9999 limit (a larger due_in would overflow the clock)
MAX_DUE_IN = 100 * 365.25 * 86400


def open_realtime(scenario, db: str, *, rate: float | None = None, role: str = "all"):
    """An OutboxRealtime over ``db`` (not started) with the scenario's consumers
    (a later ``join_at`` joins that many seconds after the start) and workloads;
    ``rate``: the workloads scaled to that many commits a second (0: none;
    with no scenario, one workload). ``role``: the part of the dispatcher it
    runs (:mod:`.roles`): every role gives the consumers their cursors; the
    workloads run in ``writers`` (or ``all``)."""
    from .realtime import OutboxRealtime

    writes = ROLES.check(role).writes
    if scenario is None:
        rt = OutboxRealtime(store=db, role=role)
        if rate and writes:
            rt.add_workload(rate)
        return rt
    rt = OutboxRealtime(scenario.config, store=db, faults=scenario.faults, seed=scenario.seed, role=role)

    def populate() -> None:
        join_each(
            rt,
            scenario.consumers,
            lambda c: rt.register_consumer(c.name, c.handler(scenario.seed), start=c.start, **c.guardrails()),
        )
        workloads = wall_workloads(scenario, rate, rt.add_workload if writes else None)
        for w in workloads if writes else ():
            rt.add_workload(w.rate, pages=w.pages, start=w.start, stop=w.stop, topic=w.topic)

    return populated(rt, populate)


def write(rt, req: dict) -> dict:
    """A commit: ``{"page": ..., "body": ..., ...}`` -> ``{"seq": n}``, with
    ``"warning"`` when no consumer has a cursor to read it."""
    check_write(req, WRITE_FIELDS, "a commit")
    page = text_field(req, "page", "a commit")
    for key in ("body", "topic"):
        if req.get(key) is not None and not isinstance(req[key], str):
            raise ValueError(f"{key} must be a string, got {req[key]!r}")
    kind = text_field(req, "kind", default="page.updated")
    due_in = req.get("due_in")
    if due_in is not None and (not is_real(due_in) or not math.isfinite(due_in) or not 0 <= due_in <= MAX_DUE_IN):
        raise ValueError(
            f"due_in must be a number of seconds >= 0 and at most {MAX_DUE_IN:.0f} (100 years), got {due_in!r}"
        )
    seq = rt.commit(
        page, req.get("body"), topic=req.get("topic"), kind=kind, due_at=None if due_in is None else rt.now + due_in
    )
    answer: dict[str, Any] = {"seq": seq}
    if not rt.store.rows("cursors"):  # every consumer reads every row: none at all reads this one
        answer["warning"] = (
            f"no consumer has a cursor in this outbox: row {seq} waits for one (a consumer registered "
            f"later reads it only if it starts at the beginning)"
        )
    return answer


# the definition, in one line, printed beside every cursor lag ``status`` shows
CURSOR_LAG = (
    "the rows committed past the consumer's cursor (the head's seq - the cursor), 0 when it has handled them all"
)


def _count_by_consumer(rows) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["consumer"]] = counts.get(r["consumer"], 0) + 1
    return counts


def status_of(rt) -> dict[str, Any]:
    """The outbox in a file: rows, head, each consumer's cursor and cursor
    lag (:data:`CURSOR_LAG`, under ``definitions``), parked and deferred rows,
    the metrics."""
    from fanoutsim.kernel.frames import json_ready  # pandas: only when asked

    seqs = [r["seq"] for r in rt.store.rows("outbox")]
    head = max(seqs, default=0)
    parked = _count_by_consumer(rt.store.rows("parked"))
    deferred = _count_by_consumer(rt.store.rows("deferred"))
    consumers = {
        r["consumer"]: {
            "cursor": r["seq"],
            "cursor_lag_rows": head - r["seq"],
            "parked": parked.get(r["consumer"], 0),
            "deferred": deferred.get(r["consumer"], 0),
        }
        for r in rt.store.rows("cursors")
    }
    body = {"rows": len(seqs), "head": head, "consumers": consumers, "definitions": {"cursor_lag_rows": CURSOR_LAG}}
    return json_ready(status_record(rt, body))
