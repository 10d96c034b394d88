"""Durable consumers: add, seek, retire, status (the administrative half).

A consumer row holds its delivery limits (checked against the seed's ranges),
``start_seq`` — the log position it started from, or was last seeked to — with
that position's commit (``start_commit``), and its ``revision``. Per partition
it has a checkpoint (the last event of the contiguous done prefix, and its
commit) and sparse resolutions past it (see :mod:`.leasing`). An event is
*required* by a consumer when its seq is past both the start and its
partition's checkpoint and it is not resolved.

``seek`` and ``retire`` follow RiffDB's code, which the seed leaves open:

* both are refused while the consumer holds a live lease — expired or not, a
  lease is live until a pull or recovery turns it into a retry — with the
  result ``outstanding_lease`` and nothing changed (``OutstandingLease`` in
  ``evaluate_event_consumer_transition``); the caller waits for its workers
  to finish, or for recovery;
* ``seek`` sets the start position and drops every checkpoint, sparse
  resolution, retry and dead letter of the consumer (RiffDB's ``Seek``
  replaces the delivery rows with none). A seek back re-delivers (duplicates
  with cause ``seek``); a seek forward skips events on purpose (losses with
  cause ``seek``). The position is checked first: past the end of the log, or
  inside pruned history (:class:`~.log.HistoryPruned`), is an error;
* ``retire`` deletes the consumer with all its rows — checkpoints,
  resolutions, retries, dead letters — so it no longer holds a retention
  fence, and the same name can start afresh (``ordered_delivery_retry_
  checkpoint_seek_and_retire_survive_reopen``: after retire, status is none
  and the low water none).

Both return ``applied``, ``outstanding_lease`` or ``not_found``.

``status`` is what ``riffdb event status`` reports (``CoordinatedConsumerStatusV1``):
the ``revision``, the checkpoints, the history ``incarnation`` and the counts
of ``live_leases``, ``retries`` and ``dead_letters`` — plus, for the model's
readers, the lists behind them, the sparse resolutions, the first required
event and the consumer's retention frontier. None for a consumer that does not
exist (retired, or never added), as RiffDB's status is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from fanoutsim.designs.leases.config import DEFAULT_LIMITS, check_limits
from fanoutsim.designs.leases.log import HistoryPruned, frontier, horizon
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.validate import is_whole

if TYPE_CHECKING:
    from fanoutsim.designs.leases.steps import Engine
    from fanoutsim.designs.leases.tables.port import EventRow, LeaseConsumerRow, LeaseTx

# where a consumer starts, or a seek moves it: the log's either end, or a seq
Position = Literal["beginning", "end"] | int

APPLIED, OUTSTANDING_LEASE, NOT_FOUND = "applied", "outstanding_lease", "not_found"


def resolve_position(tx: LeaseTx, name: str, position: Position) -> tuple[int, int]:
    """``(start_seq, start_commit)`` that ``"beginning"``, ``"end"`` or a seq
    stands for, checked; ``"beginning"`` is the oldest retained event (the
    retention horizon), a commit of 0 is RiffDB's ``BeforeFirst``."""
    gone = horizon(tx)
    h = tx.get_history()
    last = h["last_seq"]
    if position == "end":
        seq = last
    elif position == "beginning":
        seq = gone
    elif not is_whole(position):
        raise ValueError(f"position for {name!r} must be 'beginning', 'end' or a seq (int), got {position!r}")
    elif position > last:
        raise ValueError(f"position {position} for {name!r} is past the end of the log (last seq {last})")
    elif position < gone:
        raise HistoryPruned(
            f"position {position} for {name!r} is before the retention horizon: seqs "
            f"{position + 1}..{gone} were pruned (lowest allowed position {gone})"
        )
    else:
        seq = position
    if seq == 0:
        return 0, 0
    ev = tx.get_event_at(seq)
    if ev is not None:
        return seq, ev["commit_seq"]
    low, _ = tx.event_bounds()  # the last pruned event: its commit is the one before the oldest retained
    if low is None:
        return seq, h["last_commit"]
    oldest = cast("EventRow", tx.get_event_at(low))  # low is the oldest retained seq: its event is there
    return seq, oldest["commit_seq"] - 1


def add_consumer(e: Engine, now: int, name: str, start: Position = "beginning", **limits: Any) -> LeaseConsumerRow:
    """Create a durable consumer (kept as it is if it exists); returns its row."""
    check_name("consumer", name)
    unknown = set(limits) - set(DEFAULT_LIMITS)
    if unknown:
        raise TypeError(f"unknown limit(s) {sorted(unknown)}; allowed: {', '.join(DEFAULT_LIMITS)}")
    checked = check_limits(**{**e.config.defaults(), **limits}, limits=e.config.limits)
    checked["lease_seconds"] = e.config.first_lease(checked["lease_seconds"])  # BackOff overrides AckWait
    with e.tx() as tx:
        tx.lock_history()  # two nodes registering one name: the second finds the first's row
        now = tx.after_locks(now)
        found = tx.get_lease_consumer(name)
        if found is not None:
            return found
        seq, commit = resolve_position(tx, name, start)
        row: LeaseConsumerRow = {
            "consumer": name,
            "start_seq": seq,
            "start_commit": commit,
            "batch_limit": checked["batch_limit"],
            "in_flight_limit": checked["in_flight_limit"],
            "lease_seconds": checked["lease_seconds"],
            "revision": 1,
        }
        tx.put_lease_consumer(row)
    e.trace.add(now, "consumer_start", e.actor, name, None, None, str(row["start_seq"]))
    return row


def _refused(e: Engine, now: int, name: str, what: str, result: str) -> str:
    e.trace.add(now, f"{what}_refused", e.actor, name, None, None, result)
    e.metrics.inc("fanoutsim_lease_refused_total", consumer=name, result=result)
    return result


def _clear(tx: LeaseTx, name: str) -> None:
    for clear in (tx.clear_checkpoints, tx.clear_resolutions, tx.clear_retries, tx.clear_dead_letters):
        clear(name)


def seek(e: Engine, now: int, name: str, position: Position) -> str:
    """Move the consumer to ``position`` (administrative): ``applied``, or
    ``outstanding_lease`` / ``not_found`` with nothing changed."""
    check_name("consumer", name)
    with e.tx() as tx:
        row = tx.lock_lease_consumer(name)
        if row is None:
            result = NOT_FOUND
        else:
            tx.lock_history()  # the horizon stays where it is read (retention waits)
            now = tx.after_locks(now)
            seq, commit = resolve_position(tx, name, position)
            if tx.list_leases(name):
                result = OUTSTANDING_LEASE
            else:
                result = APPLIED
                _clear(tx, name)
                tx.put_lease_consumer(
                    {**row, "start_seq": seq, "start_commit": commit, "revision": row["revision"] + 1}
                )
                e.faults.point("seek.before_commit", now, who=name)
    if result != APPLIED:
        return _refused(e, now, name, "seek", result)
    e.trace.add(now, "seek", e.actor, name, None, None, str(seq))
    e.faults.point("seek.after_commit", now, who=name)
    return APPLIED


def retire(e: Engine, now: int, name: str) -> str:
    """Retire the consumer for good — delete it and its rows, releasing its
    retention fence: ``applied``, or ``outstanding_lease`` / ``not_found``."""
    check_name("consumer", name)
    with e.tx() as tx:
        found = tx.lock_lease_consumer(name)
        now = tx.after_locks(now)
        if found is None:
            result = NOT_FOUND
        elif tx.list_leases(name):
            result = OUTSTANDING_LEASE
        else:
            result = APPLIED
            _clear(tx, name)
            tx.delete_lease_consumer(name)
            e.faults.point("retire.before_commit", now, who=name)
    if result != APPLIED:
        return _refused(e, now, name, "retire", result)
    e.trace.add(now, "retired", e.actor, name)
    e.faults.point("retire.after_commit", now, who=name)
    return APPLIED


def status(e: Engine, now: int, name: str) -> dict[str, Any] | None:
    """What ``riffdb event status`` tells (None: no such consumer)."""
    check_name("consumer", name)
    with e.tx() as tx:
        row = tx.get_lease_consumer(name)
        if row is None:
            return None
        sparse = tx.list_resolutions(name)
        heads = tx.event_window(name, row["start_seq"], len(sparse) + 1)
        done = {r["event_id"] for r in sparse}
        first = next((ev for ev in heads if ev["event_id"] not in done), None)
        leases, retries, dead = tx.list_leases(name), tx.list_retries(name), tx.list_dead_letters(name)
        return {
            **row,
            "incarnation": tx.get_history()["incarnation"],
            "checkpoints": {cp["partition"]: cp["seq"] for cp in tx.list_checkpoints(name)},
            "live_leases": len(leases),
            "retries": len(retries),
            "dead_letters": len(dead),
            "in_flight": [lease["event_id"] for lease in leases],
            "retrying": {r["event_id"]: r["attempts"] for r in retries},
            "dead_lettered": [d["event_id"] for d in dead],
            "sparse": [r["event_id"] for r in sparse],
            "first_required": None if first is None else first["event_id"],
            "retention_frontier": frontier(tx, row),
        }
