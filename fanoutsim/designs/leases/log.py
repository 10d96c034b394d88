"""The event log: publish (the write path) and retention (the fence).

:func:`publish` appends one *commit* of one or more events in one
transaction. Each event gets the next log position ``seq`` (the total order)
and the id ``<commit-sequence:event-ordinal>`` of the seed; the counters live
in the ``history`` row, so a rolled-back commit (``publish.before_commit``)
takes its numbers back with it and none is ever reused.

:func:`prune_once` deletes events older than ``retention``, but never past
the *fence*, which follows RiffDB's code rather than the seed's sentence
("prevents history pruning past the commit that still contains its first
required event"). In RiffDB a consumer's checkpoint is the last event of its
contiguous done prefix, and it lets retention prune only up to the commit
*before* the one holding that event (``ConsumerCheckpointV1::retention_frontier``:
``After(e)`` allows ``commit(e) - 1``, ``BeforeFirst`` allows 0 — a consumer
that has resolved nothing allows none); the database's limit is the lowest
over all consumers (``event_consumer_retention_low_water``), and a retired
consumer, deleted, is no longer in that minimum. So the checkpoint's own
commit stays even when the consumer is caught up (RiffDB tests
``retention_frontier_keeps_the_complete_checkpoint_commit`` and, for retire,
``ordered_delivery_retry_checkpoint_seek_and_retire_survive_reopen``).

A fanoutsim consumer reads every partition, where a RiffDB consumer is bound
to one partition's stream, so :func:`frontier` takes the lowest over the
consumer's partitions: each checkpoint row allows up to the commit before its
event; a partition with events past the consumer's start and no checkpoint yet
sits at the start position, which allows up to the commit before the start's
(a start or seek position is RiffDB's seek target ``After(event)``; position 0,
nothing, is ``BeforeFirst``). Events past a checkpoint or the start are
therefore never pruned while the consumer exists, and pulling them never finds
pruned history (:class:`HistoryPruned` guards it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fanoutsim.designs.leases import rules
from fanoutsim.kernel.jsonenc import compact_encoder
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.timeutil import seconds_to_us

if TYPE_CHECKING:
    from fanoutsim.designs.leases.steps import Engine
    from fanoutsim.designs.leases.tables.port import EventRow, LeaseConsumerRow, LeaseTx


class HistoryPruned(ValueError):
    """A position inside pruned history: retention already deleted events a
    consumer there would read (RiffDB's ``HistoryPruned``, RDB-HISTORY-0102)."""


# json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False), without json's set-up per call
_ENCODE = compact_encoder(sort_keys=True)


def _payload(payload: object, where: str) -> str | None:
    """A payload as stored: a string as is, anything else as standard JSON
    (NaN and infinity are refused, as the reactor's payloads refuse them:
    no other JSON reader would take them back)."""
    if payload is None or isinstance(payload, str):
        return payload
    try:
        return _ENCODE(payload)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where}: {type(payload).__name__} value cannot be JSON-encoded ({exc})") from None


def publish(e: Engine, now: int, events: Iterable[tuple[str, str, Any]]) -> list[str]:
    """Append ``[(partition, kind, payload), ...]`` as one commit; their event ids."""
    items: list[tuple[str, str, str | None]] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, (tuple, list)) or len(ev) != 3:
            raise ValueError(f"events[{i}] must be (partition, kind, payload), got {ev!r}")
        partition, kind, payload = ev
        items.append(
            (check_name("partition", partition), check_name("kind", kind), _payload(payload, f"events[{i}] payload"))
        )
    if not items:
        raise ValueError("a commit needs at least one event")
    with e.tx() as tx:
        h = tx.lock_history()  # the log's counters: another node's publish waits for this one
        now = tx.after_locks(now)  # committed after the publish it waited for: stamped so
        commit = h["last_commit"] + 1
        rows: list[EventRow] = []
        for ordinal, (partition, kind, payload) in enumerate(items):
            seq = h["last_seq"] + 1 + ordinal
            row: EventRow = {
                "seq": seq,
                "event_id": f"{commit}:{ordinal}",
                "commit_seq": commit,
                "ordinal": ordinal,
                "partition": partition,
                "kind": kind,
                "payload": payload,
                "committed_at": now,
            }
            tx.insert_event(row)
            rows.append(row)
        tx.set_history({**h, "last_commit": commit, "last_seq": h["last_seq"] + len(rows)})
        e.faults.point("publish.before_commit", now, what=rows[0]["event_id"])
    for r in rows:
        e.trace.add(now, "published", "publisher", None, r["event_id"], r["partition"], str(r["seq"]))
    e.metrics.inc("fanoutsim_lease_events_published_total", len(rows))
    return [r["event_id"] for r in rows]


def horizon(tx: LeaseTx) -> int:
    """The highest seq retention has deleted (0: none): every seq up to it is gone."""
    low, _ = tx.event_bounds()
    return tx.get_history()["last_seq"] if low is None else low - 1


def frontier(tx: LeaseTx, row: LeaseConsumerRow) -> int:
    """The highest commit ``row``'s consumer lets retention prune (0: none)."""
    cps = tx.list_checkpoints(row["consumer"])
    start = max(row["start_commit"] - 1, 0)
    if not cps:
        return start
    out = min(max(cp["commit_seq"] - 1, 0) for cp in cps)
    done = {cp["partition"] for cp in cps}
    if any(ev["partition"] not in done for ev in tx.event_window(row["consumer"], row["start_seq"], 1)):
        out = min(out, start)  # a partition still at the start position
    return out


def fence(tx: LeaseTx) -> int | None:
    """The lowest commit retention must keep: one past the lowest frontier over
    every consumer (None: no consumer, nothing but age limits retention)."""
    out = None
    for c in tx.list_lease_consumers():
        f = frontier(tx, c)
        out = f if out is None else min(out, f)
    return None if out is None else out + 1


def prune_once(e: Engine, now: int) -> int:
    """Delete the events older than ``retention``: never past the fence (RiffDB),
    or whatever the consumers hold (``retention_policy`` ``"interest"`` and
    ``"limits"``: the stream's age limit, JetStream's ``MaxAge``, Redis's
    ``XTRIM MINID``) — then every consumer's lease, retry and resolution of them
    goes too, as nats-server's ``checkPending`` drops pending messages below
    the stream's first. Under ``"interest"`` also every event no consumer needs
    (:func:`~.rules.remove_unneeded`: none acked by all is left, whoever
    acked it last). Returns how many events went."""
    policy = e.config.retention_policy
    with e.tx() as tx:
        if policy != "fence":  # it deletes the consumers' rows too: their locks first, as every transition
            tx.lock_lease_consumers()  # takes them (consumers, then the history), or two nodes deadlock
        tx.lock_history()  # no consumer starts or seeks (against the horizon) while the fence is read
        now = tx.after_locks(now)
        cutoff = now - seconds_to_us(e.config.retention)
        held = fence(tx) if policy == "fence" else None
        gone = tx.prune_events(cutoff, held)
        if policy != "fence":
            rules.forget(tx, gone)
        swept = rules.remove_unneeded(tx, tx.table_rows("events")) if policy == "interest" else []
        if gone or swept:
            e.faults.point("events.mid_prune", now)
    detail = None if held is None else f"fence {held}"
    for eid in gone:
        e.trace.add(now, "pruned", "retention", what=eid, detail=detail if policy == "fence" else "max age")
    for ev in swept:
        e.trace.add(now, "pruned", "retention", what=ev["event_id"], detail="interest")
    e.metrics.inc("fanoutsim_lease_events_pruned_total", len(gone) + len(swept))
    return len(gone) + len(swept)
