"""The event log: publish (the write path) and retention (the fence).

:func:`publish` appends one *commit* of one or more events in one
transaction. Each event gets the next log position ``seq`` (the total order)
and the id ``<commit-sequence:event-ordinal>`` of the seed; the counters live
in the ``history`` row, so a rolled-back commit (``publish.before_commit``)
takes its numbers back with it and none is ever reused.

:func:`prune_once` deletes events older than ``retention``, but never past
the *fence*: for every active (not retired) consumer, the commit that still
contains its first required event — the earliest event of any partition that
is neither acknowledged nor dead-lettered (seed 003: "An active consumer's
checkpoint prevents history pruning past the commit that still contains its
first required event"). A retired consumer holds no fence.
"""
from __future__ import annotations

import json

from fanoutsim.kernel.timeutil import seconds_to_us
from fanoutsim.kernel.names import check_name


def _payload(payload) -> str | None:
    if payload is None or isinstance(payload, str):
        return payload
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def publish(e, now: int, events) -> list[str]:
    """Append ``[(partition, kind, payload), ...]`` as one commit; their event ids."""
    items = []
    for i, ev in enumerate(events):
        if not isinstance(ev, (tuple, list)) or len(ev) != 3:
            raise ValueError(f"events[{i}] must be (partition, kind, payload), got {ev!r}")
        partition, kind, payload = ev
        items.append((check_name("partition", partition), check_name("kind", kind), _payload(payload)))
    if not items:
        raise ValueError("a commit needs at least one event")
    with e.store.transaction() as tx:
        h = tx.get_history()
        commit = h["last_commit"] + 1
        rows = []
        for ordinal, (partition, kind, payload) in enumerate(items):
            seq = h["last_seq"] + 1 + ordinal
            row = {"seq": seq, "event_id": f"{commit}:{ordinal}", "commit_seq": commit, "ordinal": ordinal,
                   "partition": partition, "kind": kind, "payload": payload, "committed_at": now}
            tx.insert_event(row)
            rows.append(row)
        tx.set_history({**h, "last_commit": commit, "last_seq": h["last_seq"] + len(rows)})
        e.faults.point("publish.before_commit", now, firing=rows[0]["event_id"])
    for r in rows:
        e.trace.add(now, "published", "publisher", None, r["event_id"], r["partition"], str(r["seq"]))
    e.metrics.inc("fanoutsim_lease_events_published_total", len(rows))
    return [r["event_id"] for r in rows]


def fence(tx) -> int | None:
    """The lowest commit an active consumer still needs (None: no consumer needs any)."""
    out = None
    for c in tx.list_lease_consumers():
        if c["retired"]:
            continue
        heads = tx.event_heads(c["consumer"], c["start_seq"])
        if heads:
            first = heads[0]["commit_seq"]
            out = first if out is None else min(out, first)
    return out


def prune_once(e, now: int) -> int:
    cutoff = now - seconds_to_us(e.config.retention)
    with e.store.transaction() as tx:
        held = fence(tx)
        gone = tx.prune_events(cutoff, held)
        if gone:
            e.faults.point("events.mid_prune", now)
    for eid in gone:
        e.trace.add(now, "pruned", "retention", firing=eid, detail=None if held is None else f"fence {held}")
    e.metrics.inc("fanoutsim_lease_events_pruned_total", len(gone))
    return len(gone)
