"""Leases: consume, ack, nack, recover, restore — as RiffDB's code does them.

Seed 003 describes RiffDB; its source and tests are public, and where the two
differ this module follows the code (``riffdb-storage-api/src/consumer.rs``,
``riffdb-service/src/consumer_operations.rs``), naming the RiffDB test that
shows each rule:

**Several leases per partition** (``partition_order = "riffdb"``, the default).
A pull reads each partition's *resolution window* — the first
:data:`~.config.RESOLUTION_WINDOW` (65) retained events past the partition's
checkpoint — and leases the eligible ones oldest first (by seq across
partitions) up to ``min(batch_limit, in_flight_limit - live leases)``. An event
is eligible when it has no live lease, is not resolved, and is new or a retry
whose time has come (its next attempt number). A retry holds no lease, so it
uses none of the in-flight budget (``retry_history_does_not_consume_the_live_
lease_budget``) and does not stop the events behind it. An ack of a later event
is held as a *sparse resolution* (table ``resolutions``); the checkpoint jumps
past it once every earlier event is resolved: leasing [first, second] with
batch 2 and in-flight 2 gives both; an ack of second leaves the checkpoint
before first with one sparse resolution; first nacked, re-leased as attempt 2
and acked moves it past second (``ordered_delivery_retry_checkpoint_seek_and_
retire_survive_reopen``). At most :data:`~.config.MAX_SPARSE_RESOLUTIONS` (64)
are held per partition, which the window guarantees (its first event is the
unresolved one). ``partition_order = "head_of_line"`` — the seed's reading, this
model's first — is the same machinery with a window of one event: one lease per
partition, and a retrying event holds its partition.

A fanoutsim consumer reads every partition, where a RiffDB consumer is bound to
one partition's stream: read it as one client holding a RiffDB consumer per
partition under one set of limits — the checkpoint, the sparse resolutions and
the window are per partition, ``batch_limit`` and ``in_flight_limit`` bound the
client's pull and its live leases over all its partitions.

**Leases, acks and nacks.** A lease carries a 64-hex token (sha256 of the
seed, consumer, event id, attempt and the grant counter), the history
incarnation and ``expires_at = now + lease_seconds``; it is committed before
the reply (``lease.after_commit``: a lease nobody holds, which expiry frees).
``ack(event_id, token, incarnation)`` resolves the event only when all three
match a live lease. An incarnation other than the current one is refused
first, before the consumer or the lease is looked at (the service checks it on
entry: ``history_incarnation_mismatch``); then ``not_found`` (no such
consumer: it was retired), ``no_lease`` (RiffDB's ``StaleLease``: no lease, or
already resolved), ``wrong_token`` and ``expired`` (``LeaseExpired``: at or
after ``expires_at``, ``acknowledgement_at_the_expiry_deadline_is_expired``).
``nack(..., delay)`` is a failed attempt: a retry eligible ``delay`` seconds on
(``0 <= delay <= max_retry_delay``, at most 3600 s: ``MAX_CONSUMER_RETRY_DELAY``),
or, on the 10th attempt, a dead letter (kept, with its payload) that resolves
the event (sparse, then the checkpoint) and is never reported as acknowledged.

**When expired leases become retries.** Recovery (:func:`recover`) turns every
expired lease into a failed attempt — an immediate retry, or on the 10th the
dead letter (reason ``lease expired``). A dead letter is a terminal resolution
however it was made — by a nack, by expiry or by a restore — and the
contiguous checkpoint passes it at once, in the same transition (one function
resolves an event: ``_resolve``); otherwise a dead-lettered last event of a
partition would hold its checkpoint, and so its retention fence, for ever.
(RiffDB's storage-level recovery transition records it as a sparse
resolution, ``tenth_expired_attempt_is_dead_lettered_and_terminally_sparse``;
the model compacts it as every other resolution.) It runs
at start-up, before anything is served (``restart_releases_an_expired_lease_as_
an_immediate_retry``; ``restart_retains_unexpired_leases_without_a_transition``),
on the runtimes' recovery loop, and inside every pull: a pull that finds one of
its consumer's leases expired first turns them into retries, then leases again,
so the same event id comes back as the next attempt (``normal_lease_
coordination_releases_expired_work_before_redelivery``).

**Restore** (:func:`restore`) publishes a new history incarnation and turns
every live lease, expired or not, into a failed attempt: a retry redelivered as
the next attempt, counting toward the ten (``restore_rebinds_rows_and_
invalidates_even_unexpired_leases``, ``restart_restore_and_sibling_identity_
recovery_are_exact``). Pre-restore tokens then fail closed (``stale_incarnation``).

Every applied transition adds one to the consumer's ``revision`` (RiffDB's
compare-and-transition revision, which status reports).

**Several nodes on one database** (PostgreSQL, READ COMMITTED: each statement
sees what committed before it began). A transition reads rows and writes
some back, so two nodes acting on one consumer at once would each act on
what it read before the other committed: two pulls would lease the same
event (the second dying on the lease's primary key), a pull and recovery
would both expire one lease. So every transition of a consumer first locks
the consumer's row (``lock_lease_consumer``: ``SELECT ... FOR UPDATE``),
which serializes them as RiffDB's revision check does, and reads the rest
after it, when the other's commit is visible; every change of the log's
counters — a publish, a grant's number, retention, a position resolved
against the horizon — locks the history row. Locks are taken consumers first
(several: in name order), the history last, so no two nodes wait for each
other. Recovery reads the expired leases before it holds their consumers, so
it expires only those still held as read. (A store one process holds runs one
transaction at a time: there a lock is a read, and nothing changes.)
``tests/test_postgres_leases_concurrency.py`` holds each race open.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any, NamedTuple

from fanoutsim.designs.leases import rules
from fanoutsim.designs.leases.config import check_batch
from fanoutsim.designs.leases.log import HistoryPruned, horizon
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.timeutil import US

# the results of ack, nack, in_progress and term: only these changed anything
ACKED, RETRY, DEAD_LETTERED = "acked", "retry_scheduled", "dead_lettered"
EXTENDED, TERMINATED = "extended", "terminated"
# what the last allowed delivery's failure made (LeaseConfig.at_max_deliver), beside DEAD_LETTERED
MAX_DELIVERIES, DROPPED = "max_deliveries", "dropped"
NOT_FOUND, STALE, NO_LEASE, WRONG_TOKEN, EXPIRED = (
    "not_found",
    "stale_incarnation",
    "no_lease",
    "wrong_token",
    "expired",
)
FAILED_CLOSED = (NOT_FOUND, STALE, NO_LEASE, WRONG_TOKEN, EXPIRED)
# what a resolution is
ACKNOWLEDGED = "acknowledged"


class Lease(NamedTuple):
    """One leased event, as ``consume`` replies it: the ``consumer`` it is leased
    to; the event (``event_id``, ``seq``, ``partition``, ``kind``, ``payload``);
    what an ack or a nack must present, its ``token`` and the history
    ``incarnation``; which ``attempt`` this is (1 for the first); and when the
    lease ends, ``expires_at`` (epoch µs). Immutable; a named tuple, since a
    pull makes one per grant and a frozen dataclass costs eight times as much
    to build."""

    consumer: str
    event_id: str
    seq: int
    partition: str
    kind: str
    payload: str | None
    token: str
    incarnation: int
    attempt: int
    expires_at: int


def lease_token(seed: int, consumer: str, event_id: str, attempt: int, grant: int) -> str:
    """A lease's token: a hash of the run's seed, the consumer, the event, the
    attempt and the grant's number, so that every grant has its own, and the same
    run draws the same ones."""
    h = _token_prefix(seed, consumer).copy()
    h.update(f"{event_id}/{attempt}/{grant}".encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=1024)
def _token_prefix(seed: int, consumer: str) -> Any:
    """The hash of a consumer's tokens' first part, ``"{seed}/{consumer}/"``,
    hashed once (a copy takes the rest)."""
    return hashlib.sha256(f"{seed}/{consumer}/".encode())


def bump(tx, row: dict) -> dict:
    """The consumer's next revision, written; returns the new row."""
    row = {**row, "revision": row["revision"] + 1}
    tx.put_lease_consumer(row)
    return row


# -- consume ------------------------------------------------------------------------


class Pull(list):
    """What ``consume`` returns: the leases granted (a list of :class:`Lease`,
    in lease order) and the pull's ``result``, as RiffDB's lease coordination
    carries its transition result with its leases: ``applied`` (the leases may
    be none: nothing eligible, or no room), or ``not_found`` (no such consumer
    — retired, or never added: no lease, nothing changed), the refusal ``ack``,
    ``nack``, ``seek`` and ``retire`` return."""

    def __init__(self, leases=(), result: str = "applied") -> None:
        super().__init__(leases)
        self.result = result

    def __repr__(self) -> str:
        return f"Pull({list.__repr__(self)}, result={self.result!r})"


def consume(e, now: int, consumer: str, batch_limit: int | None = None) -> Pull:
    """Lease up to ``batch_limit`` (default: the consumer's) eligible events.
    Expired leases of the consumer are first turned into retries (a recovery
    transition of its own), then the pull leases again. Under ``lease_expiry
    = "claim"`` (Redis) nothing has expired: the pull first claims the
    consumer's idle leases (XAUTOCLAIM), then reads new events (XREADGROUP)."""
    check_name("consumer", consumer)
    if batch_limit is not None:
        check_batch(batch_limit, e.config.limits)
    out = _lease(e, now, consumer, batch_limit)
    while isinstance(out, int):  # it held a lease expired at that time: recover it, then lease
        # again, since over PostgreSQL the next pull may wait for a lock past another's expiry
        recover(e, out, consumer=consumer)
        out = _lease(e, out, consumer, batch_limit)
    if out.result == NOT_FOUND:
        _refused(e, now, consumer, None, "consume", NOT_FOUND)
    return out


def _lease(e, now: int, consumer: str, batch_limit: int | None) -> Pull | int:
    """One pull of ``consumer`` as one transition: the :class:`Pull`, or, when
    it holds an expired lease, the time it found it so (µs, after any lock
    wait; the caller recovers what expired by then first)."""
    with e.tx() as tx:
        row = tx.lock_lease_consumer(consumer)  # one transition of the consumer at a time
        now = tx.after_locks(now)  # after another node's transition it waited for
        if row is None:
            return Pull(result=NOT_FOUND)
        held = tx.list_leases(consumer)
        idle = [lease for lease in held if lease["expires_at"] <= now]
        if idle and e.config.lease_expiry != "claim":
            return now
        batch = row["batch_limit"] if batch_limit is None else batch_limit
        idle = idle[:batch]  # a claim takes no more than the pull's COUNT
        room = min(batch - len(idle), row["in_flight_limit"] - len(held))
        if room <= 0 and not idle:
            return Pull()
        _check_retained(tx, row, e.config)
        grant = _Grant(e, tx, now, row)
        grant.claim(idle)
        if room > 0:
            grant.new(held, room)
        out, now = grant.finish()
    for lease in grant.claimed:
        _lease_trace(e, now, "claimed", lease, f"attempt {lease['attempt']}: idle")
    for lease, result, moved in grant.ended:
        _ended_trace(e, now, lease, result, "max deliveries")
        _moved(e, now, consumer, moved)
    for lease in out:
        e.trace.add(now, "leased", e.actor, consumer, lease.event_id, lease.partition, f"attempt {lease.attempt}")
    if out:
        e.leased[consumer](len(out))
        _point(e, "lease.after_commit", now, consumer, out[0].event_id)
    return Pull(out)


class _Grant:
    """One pull's grants inside its transaction: the leases it grants (``out``),
    in window order, the leases a claim took back (``claimed``) and the events
    whose last allowed delivery was reached instead of a new one (``ended``:
    ``(lease row, result, checkpoint moved to)``). ``now`` is the time after the
    history lock the first grant takes (the grant counter: another node's pull
    counts too)."""

    def __init__(self, e, tx, now: int, row: dict) -> None:
        self.e, self.tx, self.now, self.row = e, tx, now, row
        self.h: dict | None = None
        self.out: list[Lease] = []
        self.claimed: list[dict] = []
        self.ended: list[tuple[dict, str, dict | None]] = []

    def grant(self, ev: dict, attempt: int) -> None:
        """Lease ``ev`` as delivery ``attempt``."""
        if self.h is None:
            self.h = self.tx.lock_history()
            self.now = self.tx.after_locks(self.now)
        row = self.row
        expires = rules.lease_until(self.e.config, self.now, row["lease_seconds"], attempt)
        self.out.append(_insert_lease(self.e, self.tx, self.h, row["consumer"], ev, attempt, self.now, expires))

    def end(self, lease: dict) -> None:
        """``lease``'s event had its last allowed delivery: what ``at_max_deliver`` says instead of another."""
        self.ended.append((lease, *_terminal(self.e, self.tx, self.now, self.row, lease, "max deliveries")))

    def claim(self, idle: list[dict]) -> None:
        """Redis's XAUTOCLAIM: each idle lease, in seq order, becomes the next
        delivery (a new token, ``delivery_count + 1``), or ends at the limit. An
        entry whose event retention deleted is dropped (Redis 7 deletes it; 6.2
        claims it and replies nil)."""
        for lease in sorted(idle, key=lambda lease: lease["seq"]):
            self.tx.delete_lease(lease["consumer"], lease["event_id"])
            self.claimed.append(lease)
            ev = self.tx.get_event(lease["event_id"])
            if rules.at_limit(self.e.config, lease["attempt"], due=True):
                self.end(lease)
            elif ev is not None:
                self.grant(ev, lease["attempt"] + 1)

    def new(self, held: list[dict], room: int) -> None:
        """Lease up to ``room`` eligible events of the consumer's window, in
        window order; a retry that comes due at its limit ends instead
        (``max_deliver_rule = "deliveries"``)."""
        e, tx, consumer = self.e, self.tx, self.row["consumer"]
        retries = {r["event_id"]: r for r in tx.list_retries(consumer)}
        sparse = tx.list_resolutions(consumer)
        limit = _window_limit(e.config, room, held, retries.values(), sparse)
        granted = 0
        for ev, retry in _candidates(tx, e.config, self.row, held, sparse, retries, limit):
            attempt = 1
            if retry is not None:
                if retry["not_before"] > self.now:
                    continue
                tx.delete_retry(consumer, ev["event_id"])
                if rules.at_limit(e.config, retry["attempts"], due=True):
                    self.end({**retry, "attempt": retry["attempts"]})
                    continue
                attempt = retry["attempts"] + 1
            self.grant(ev, attempt)
            granted += 1
            if granted >= room:
                break

    def finish(self) -> tuple[list[Lease], int]:
        """Write what the pull changed (the grant counter, the revision); the
        leases granted and the time of the step."""
        if self.out or self.claimed or self.ended:
            if self.h is not None:
                self.tx.set_history(self.h)
            bump(self.tx, self.row)
        if self.out:
            _point(self.e, "lease.before_commit", self.now, self.row["consumer"], self.out[0].event_id)
        return self.out, self.now


def _window_limit(config, room: int, *ineligible: Iterable[dict]) -> int:
    """How much of each partition's window to read: enough to find ``room``
    eligible events past its ineligible ones (held, waiting to retry, resolved
    sparsely); head-of-line: each partition's first unresolved event, past its
    sparse dead letters."""
    skip: dict[str, int] = {}  # partition -> its ineligible rows (a Counter costs more for these few)
    for rows in ineligible:
        for r in rows:
            part = r["partition"]
            skip[part] = skip.get(part, 0) + 1
    most = max(skip.values(), default=0)
    if config.partition_order == "head_of_line":
        return 1 + most
    return min(config.window, room + most)


def _candidates(
    tx, config, row: dict, held: list[dict], sparse: list[dict], retries: dict, limit: int
) -> Iterator[tuple[dict, dict | None]]:
    """The window's events the consumer may lease, each with its retry (or
    ``None``): not resolved, not held, and under head-of-line only each
    partition's first unresolved event. Whether a retry's time has come is the
    caller's to judge."""
    resolved = {r["event_id"] for r in sparse}
    leased = {lease["event_id"] for lease in held}
    head_of_line = config.partition_order == "head_of_line"
    blocked: set[str] = set()
    for ev in tx.event_window(row["consumer"], row["start_seq"], limit):
        eid = ev["event_id"]
        if eid in resolved:
            continue
        if head_of_line:
            if ev["partition"] in blocked:
                continue
            blocked.add(ev["partition"])
        if eid in leased:
            continue
        yield ev, retries.get(eid)


def _insert_lease(e, tx, h: dict, consumer: str, ev: dict, attempt: int, now: int, expires: int) -> Lease:
    """Grant one lease on ``ev``: count the grant in the history ``h``, write the
    lease row, and return the :class:`Lease` the pull replies."""
    h["leases_granted"] += 1
    token = lease_token(e.seed, consumer, ev["event_id"], attempt, h["leases_granted"])
    tx.insert_lease(
        {
            "consumer": consumer,
            "event_id": ev["event_id"],
            "seq": ev["seq"],
            "partition": ev["partition"],
            "token": token,
            "incarnation": h["incarnation"],
            "attempt": attempt,
            "leased_at": now,
            "expires_at": expires,
        }
    )
    return Lease(
        consumer,
        ev["event_id"],
        ev["seq"],
        ev["partition"],
        ev["kind"],
        ev["payload"],
        token,
        h["incarnation"],
        attempt,
        expires,
    )


def _check_retained(tx, row: dict, config) -> None:
    """A checkpoint inside pruned history would make the pull skip deleted
    events: refuse it (the fence makes it impossible while the consumer exists).
    Under a retention policy with no fence (``interest``, ``limits``) the pull
    reads on from the oldest retained event, as a JetStream consumer does."""
    if config.retention_policy != "fence":
        return
    gone = horizon(tx)
    if not gone:
        return
    for cp in tx.list_checkpoints(row["consumer"]):
        if cp["seq"] < gone:
            raise HistoryPruned(
                f"consumer {row['consumer']!r} reads partition {cp['partition']!r} after seq {cp['seq']}, "
                f"but retention has deleted every event up to seq {gone}: pulling pruned history"
            )


# -- resolving: the checkpoint and the sparse resolutions ----------------------------


def _resolve(tx, config, row: dict, lease: dict, kind: str | None) -> dict | None:
    """Record ``lease``'s event as resolved (``kind``: acknowledged, terminated,
    dead_lettered or dropped; None: not resolved, only walk) and move the
    partition's checkpoint past every resolved event that follows it — now, or,
    under ``at_max_deliver = "advisory"``, when nats-server's ack floor would
    move (:func:`~.rules.floor_walks`). The one place an event is resolved: an
    ack, and a dead letter whether a nack, lease expiry or a restore made it,
    all compact the checkpoint the same way. Returns the resolution the
    checkpoint moved to (None: it did not move)."""
    consumer, part = row["consumer"], lease["partition"]
    held = tx.list_resolutions(consumer, part)
    if kind is None and not held:
        return None
    rows = {r["event_id"]: r for r in held}
    new = None
    if kind is not None:
        new = {
            "consumer": consumer,
            "event_id": lease["event_id"],
            "seq": lease["seq"],
            "partition": part,
            "commit_seq": int(lease["event_id"].split(":", 1)[0]),
            "kind": kind,
        }
        rows[new["event_id"]] = new
    walks = rules.floor_walks(config, tx, row["start_seq"], lease, kind, held)
    passed = _passed(tx, consumer, row["start_seq"], part, rows) if walks else []
    for r in passed:
        del rows[r["event_id"]]
        if r is not new:
            tx.delete_resolution(consumer, r["event_id"])
    if passed:
        tx.set_checkpoint(consumer, part, passed[-1]["seq"], passed[-1]["commit_seq"])
    if len(rows) > config.max_sparse:
        raise RuntimeError(
            f"consumer {consumer!r} would hold {len(rows)} sparse resolutions in partition {part!r}; "
            f"at most {config.max_sparse}"
        )
    if new is not None and new["event_id"] in rows:
        tx.insert_resolution(new)
    return passed[-1] if passed else None


def _passed(tx, consumer: str, start: int, part: str, rows: dict[str, dict]) -> list[dict]:
    """The resolutions (``rows``, by event id) the checkpoint passes, in seq
    order: each below the first retained event past it that is not resolved.
    One whose event interest retention removed stands in for it, as
    nats-server's ack floor passes the messages an interest stream removed."""
    window = tx.event_window(consumer, start, len(rows), part)  # the first unresolved one is among them
    stop = next((ev["seq"] for ev in window if ev["event_id"] not in rows), None)
    passed = [r for r in rows.values() if stop is None or r["seq"] < stop]
    if len(passed) > 1:  # (an ack in order passes its own resolution alone)
        passed.sort(key=_by_seq)
    return passed


_by_seq = itemgetter("seq")


def _moved(e, now: int, consumer: str, ev: dict | None) -> None:
    """Trace a checkpoint move (after the commit): the event it now stands on."""
    if ev is not None:
        e.trace.add(now, "checkpoint", e.actor, consumer, ev["event_id"], ev["partition"], str(ev["seq"]))


def _fail(
    e, tx, now: int, row: dict, lease: dict, not_before: int, error: str | None, *, due: bool = True
) -> tuple[str, dict | None]:
    """One failed attempt at a leased event (its lease already deleted): a retry
    from ``not_before``, or, at the last allowed delivery (:func:`~.rules.at_limit`;
    ``due``: the next delivery would be made now, as at a lease's expiry), what
    ``at_max_deliver`` says. Returns the result and the event the checkpoint
    moved to (None: it did not move)."""
    if rules.at_limit(e.config, lease["attempt"], due=due):
        return _terminal(e, tx, now, row, lease, error)
    tx.put_retry(
        {
            "consumer": lease["consumer"],
            "event_id": lease["event_id"],
            "seq": lease["seq"],
            "partition": lease["partition"],
            "attempts": lease["attempt"],
            "not_before": not_before,
            "error": error,
        }
    )
    return RETRY, _resolve(tx, e.config, row, lease, None)


def _terminal(e, tx, now: int, row: dict, lease: dict, error: str | None) -> tuple[str, dict | None]:
    """The last allowed delivery of ``lease``'s event failed: a dead letter kept
    with its payload (RiffDB), a dead letter without it (JetStream's
    max-deliveries advisory: the message stays in the stream, and the checkpoint
    passes it only at a later ack), or nothing kept (``drop``); each resolves
    the event. Returns the result and where the checkpoint moved."""
    consumer, event_id, at = lease["consumer"], lease["event_id"], e.config.at_max_deliver
    if at == "drop":
        return DROPPED, _resolve(tx, e.config, row, lease, DROPPED)
    ev = tx.get_event(event_id) if at == "dead_letter" else None
    tx.insert_dead_letter(
        {
            "consumer": consumer,
            "event_id": event_id,
            "seq": lease["seq"],
            "partition": lease["partition"],
            "attempts": lease["attempt"],
            "error": error,
            "payload": None if ev is None else ev["payload"],
            "dead_at": now,
        }
    )
    result = DEAD_LETTERED if at == "dead_letter" else MAX_DELIVERIES
    return result, _resolve(tx, e.config, row, lease, DEAD_LETTERED)


# -- ack and nack -----------------------------------------------------------------------


def _check(
    tx, config, now: int, consumer: str, event_id: str, token, incarnation, *, late: bool = False
) -> tuple[str | None, dict, dict, int, str | None]:
    """(failure result or None, the consumer row, the lease, the time of the
    step: ``now``, or later if it waited for another node's transition, and
    how it was found: None — the live lease the token names; ``"late"`` — an
    expired lease recovery has not taken yet, or (``late``: an ack or a term)
    the event's lease of another delivery; ``"retry"`` — (``late``) the event
    waiting for its redelivery, as a lease row of its last attempt). The last
    two only under ``late_ack = "honour"``, where the broker knows the message
    by its sequence; under ``lease_expiry = "claim"`` a lease never expires."""
    check_name("consumer", consumer)
    check_name("event_id", event_id)
    row = tx.lock_lease_consumer(consumer)  # first: a restore locks consumers before the history
    now = tx.after_locks(now)
    if incarnation != tx.get_history()["incarnation"]:
        return STALE, None, None, now, None
    if row is None:
        return NOT_FOUND, None, None, now, None
    honour = config.late_ack == "honour"
    lease = tx.get_lease(consumer, event_id)
    if lease is None:
        retry = tx.get_retry(consumer, event_id) if honour and late else None
        if retry is None:
            return NO_LEASE, row, None, now, None
        return None, row, {**retry, "attempt": retry["attempts"]}, now, "retry"
    if lease["token"] != token:
        return (None, row, lease, now, "late") if honour and late else (WRONG_TOKEN, row, None, now, None)
    if config.lease_expiry != "claim" and lease["expires_at"] <= now:
        return (None, row, lease, now, "late") if honour else (EXPIRED, row, None, now, None)
    return None, row, lease, now, None


def _point(e, name: str, now: int, consumer: str, event_id: str) -> None:
    """Pass the named point of a pull, an ack or a delivery (asked once per
    plan: a point with no crash armed is not called)."""
    point = e.points[name]
    if point is not None:
        point(name, now, who=consumer, what=event_id)


def _refused(e, now, consumer, event_id, what, result):
    e.trace.add(now, f"{what}_refused", e.actor, consumer, event_id, None, result)
    e.metrics.inc("fanoutsim_lease_refused_total", consumer=consumer, result=result)
    return result


def ack(
    e, now: int, consumer: str, event_id: str, token: str, incarnation: int, delivered_by: str | None = None
) -> str:
    """Acknowledge exactly one leased event: ``acked``, or a fail-closed result.
    ``delivered_by`` (an actor, say ``"caller"``): the ack is that actor's
    delivery, traced as ``delivered`` with the commit — before
    ``ack.after_commit``, so a crash there cannot lose a committed one."""
    with e.tx() as tx:
        failed, row, lease, now, how = _check(tx, e.config, now, consumer, event_id, token, incarnation, late=True)
        if failed is None:
            event = tx.get_event_at(lease["seq"])  # its publish time, for the latency histogram
            moved, gone = _settle(e, tx, row, lease, how, ACKNOWLEDGED)
            bump(tx, row)
            _point(e, "ack.before_commit", now, consumer, event_id)
    if failed is not None:
        return _refused(e, now, consumer, event_id, "ack", failed)
    late = "" if how is None else " (late)"  # honoured: an earlier delivery's, or past its lease
    e.trace.add(now, "acked", e.actor, consumer, event_id, lease["partition"], f"attempt {lease['attempt']}{late}")
    _moved(e, now, consumer, moved)
    _pruned(e, now, gone)
    if delivered_by is not None:  # counted as a worker's delivery is
        e.trace.add(
            now, "delivered", delivered_by, consumer, event_id, lease["partition"], f"attempt {lease['attempt']}"
        )
        e.delivered[consumer]()
    e.acked[consumer]()
    if event is not None:  # a leased event is unresolved, so retention never pruned it
        e.publish_to_ack[consumer]((now - event["committed_at"]) / US)
    _point(e, "ack.after_commit", now, consumer, event_id)
    return ACKED


def deliver(e, now: int, consumer: str, lease: Lease, *, then_ack: bool = True) -> str | None:
    """A worker's effect has landed: the consumer's delivery (traced ``delivered``,
    where the checker counts it), then its ack — with the
    ``worker.after_effect_before_ack`` point between the two, where a crash makes
    the effect happen again once the lease expires. ``then_ack=False``: the
    effect only (the runtime acks later, after an ack's cost: returns None)."""
    e.trace.add(now, "delivered", "worker", consumer, lease.event_id, lease.partition, f"attempt {lease.attempt}")
    e.delivered[consumer]()
    _point(e, "worker.after_effect_before_ack", now, consumer, lease.event_id)
    if not then_ack:
        return None
    return ack(e, now, consumer, lease.event_id, lease.token, lease.incarnation)


def _settle(e, tx, row: dict, lease: dict, how: str | None, kind: str) -> tuple[dict | None, list[dict]]:
    """An ack (or a term: ``kind``) accepted in ``tx``: the event's lease (or,
    ``how == "retry"``, its retry) goes, the event is resolved, and under
    interest retention it is removed if no consumer needs it any more. Returns
    where the checkpoint moved and the events removed."""
    if how == "retry":
        tx.delete_retry(lease["consumer"], lease["event_id"])
    else:
        tx.delete_lease(lease["consumer"], lease["event_id"])
    moved = _resolve(tx, e.config, row, lease, kind)
    if e.config.retention_policy != "interest":
        return moved, []
    ev = tx.get_event(lease["event_id"])
    return moved, ([] if ev is None else rules.remove_unneeded(tx, [ev]))


def _pruned(e, now: int, gone: list[dict]) -> None:
    """Trace the events interest retention removed (after the commit)."""
    for ev in gone:
        e.trace.add(now, "pruned", "retention", what=ev["event_id"], detail="interest")
    if gone:
        e.metrics.inc("fanoutsim_lease_events_pruned_total", len(gone))


def _lease_trace(e, now, kind: str, lease: dict, detail: str) -> None:
    """A trace row of the engine's actor about a lease row's event."""
    e.trace.add(now, kind, e.actor, lease["consumer"], lease["event_id"], lease["partition"], detail)


def _failed_trace(e, now, lease, result, error, kind):
    _lease_trace(e, now, kind, lease, f"attempt {lease['attempt']}: {error}")
    _ended_trace(e, now, lease, result, error)


def _ended_trace(e, now, lease: dict, result: str, error: str) -> None:
    """The trace of an event's last allowed delivery failed (nothing for another result)."""
    if result == DEAD_LETTERED:
        _dead_lettered(e, now, lease, error)
    elif result in (MAX_DELIVERIES, DROPPED):
        _lease_trace(e, now, result, lease, f"{lease['attempt']} deliveries: {error}")
        e.metrics.inc(f"fanoutsim_lease_{result}_total", consumer=lease["consumer"])


def _dead_lettered(e, now, lease: dict, error: str) -> None:
    """The trace and the count of a lease's event dead-lettered: its last attempt failed with ``error``."""
    _lease_trace(e, now, "dead_lettered", lease, f"{lease['attempt']} attempts: {error}")
    e.metrics.inc("fanoutsim_lease_dead_letters_total", consumer=lease["consumer"])


def nack(
    e,
    now: int,
    consumer: str,
    event_id: str,
    token: str,
    incarnation: int,
    delay: float = 0.0,
    error: str | None = None,
) -> str:
    """A failed attempt, reported: ``retry_scheduled`` (after ``delay`` seconds,
    0 through ``max_retry_delay``; see :func:`~.rules.retry_due`),
    ``dead_lettered`` (the 10th; or what ``at_max_deliver`` says at the limit),
    or a fail-closed result. Under ``lease_expiry = "claim"`` (Redis, which has
    no negative acknowledgement) the lease stays as it is, for a claim once it
    is idle: ``retry_scheduled``, and the delay is not used."""
    delay = e.config.check_delay(delay)
    with e.tx() as tx:
        failed, row, lease, now, _ = _check(tx, e.config, now, consumer, event_id, token, incarnation)
        if failed is None:
            result, moved = RETRY, None
            if e.config.lease_expiry != "claim":
                tx.delete_lease(consumer, event_id)
                due = rules.retry_due(e.config, now, delay, lease["attempt"])
                result, moved = _fail(e, tx, now, row, lease, due, error or "nack", due=False)
            bump(tx, row)
            e.faults.point("nack.before_commit", now, who=consumer, what=event_id)
    if failed is not None:
        return _refused(e, now, consumer, event_id, "nack", failed)
    _failed_trace(e, now, lease, result, error or "nack", "nacked")
    _moved(e, now, consumer, moved)
    e.faults.point("nack.after_commit", now, who=consumer, what=event_id)
    return result


def in_progress(e, now: int, consumer: str, event_id: str, token: str, incarnation: int) -> str:
    """Still working (JetStream's ``+WPI``: ``progressUpdate`` sets the pending
    timestamp to now): the lease runs again from now, for the lease of its
    delivery; ``extended``, or a fail-closed result as ``nack``'s. Not a
    delivery: the attempt stays."""
    with e.tx() as tx:
        failed, row, lease, now, _ = _check(tx, e.config, now, consumer, event_id, token, incarnation)
        if failed is None:
            tx.delete_lease(consumer, event_id)
            until = rules.lease_until(e.config, now, row["lease_seconds"], lease["attempt"])
            tx.insert_lease({**lease, "expires_at": until})
            bump(tx, row)
    if failed is not None:
        return _refused(e, now, consumer, event_id, "in_progress", failed)
    _lease_trace(e, now, "in_progress", lease, f"attempt {lease['attempt']}")
    e.metrics.inc("fanoutsim_lease_in_progress_total", consumer=consumer)
    return EXTENDED


def term(e, now: int, consumer: str, event_id: str, token: str, incarnation: int, reason: str | None = None) -> str:
    """Stop redelivering the event, unprocessed (JetStream's ``+TERM``:
    ``processTermLocked`` "Treat like an ack to suppress redelivery", then
    the ``MSG_TERMINATED`` advisory): the event is resolved as ``terminated``
    — the checkpoint passes it, interest retention counts it done — and never
    reported delivered. ``terminated``, or a fail-closed result as ``ack``'s
    (a late term is honoured as a late ack is)."""
    with e.tx() as tx:
        failed, row, lease, now, how = _check(tx, e.config, now, consumer, event_id, token, incarnation, late=True)
        if failed is None:
            moved, gone = _settle(e, tx, row, lease, how, TERMINATED)
            bump(tx, row)
    if failed is not None:
        return _refused(e, now, consumer, event_id, "term", failed)
    _lease_trace(e, now, TERMINATED, lease, f"attempt {lease['attempt']}: {reason or 'term'}")
    e.metrics.inc("fanoutsim_lease_terminated_total", consumer=consumer)
    _moved(e, now, consumer, moved)
    _pruned(e, now, gone)
    return TERMINATED


# -- recovery and restore -------------------------------------------------------------------


def recover(e, now: int, limit: int = 1000, consumer: str | None = None) -> int:
    """Expire leases whose time is up (only ``consumer``'s, if given): each is a
    failed attempt — an immediate retry, or the dead letter, which the
    checkpoint passes as it passes an ack. Returns how many expired. Under
    ``lease_expiry = "claim"`` (Redis) nothing expires: a pull's claim ends an
    idle lease (see :func:`consume`)."""
    if e.config.lease_expiry == "claim":
        return 0
    done = []
    with e.tx() as tx:
        if consumer is None:
            # no lease due (the earliest expiry is still ahead): the read would find nothing
            expired = tx.expired_leases(now, limit) if tx.has_lease_due(now) else []
            rows = {c: tx.lock_lease_consumer(c) for c in sorted({lease["consumer"] for lease in expired})}
            now = tx.after_locks(now)
            # read before the locks: another node's pull or recovery may have expired one since,
            # or its worker's in_progress extended it
            expired = [lease for lease in expired if _held(tx, lease, now)]
        else:
            rows = {consumer: tx.lock_lease_consumer(consumer)}
            now = tx.after_locks(now)  # what expired while it waited for the consumer's lock, too
            expired = [lease for lease in tx.list_leases(consumer) if lease["expires_at"] <= now]
        for lease in expired:
            c = lease["consumer"]
            tx.delete_lease(c, lease["event_id"])
            done.append((lease, *_fail(e, tx, now, rows[c], lease, now, "lease expired")))
        for c in sorted({lease["consumer"] for lease in expired}):
            bump(tx, rows[c])
        if done:
            e.faults.point("recover.before_commit", now, who=done[0][0]["consumer"], what=done[0][0]["event_id"])
    for lease, result, moved in done:
        _failed_trace(e, now, lease, result, "lease expired", "expired")
        _moved(e, now, lease["consumer"], moved)
    if done:
        e.metrics.inc("fanoutsim_lease_expired_total", len(done))
        e.faults.point("recover.after_commit", now, who=done[0][0]["consumer"], what=done[0][0]["event_id"])
    return len(done)


def next_due(e, now: int, consumer: str | None = None) -> int | None:
    """The earliest expiry of a lease (µs; None: no lease) — of ``consumer``'s
    only, if given, and then its earliest retry too: when a loop that waits
    for the broker's next move should look again."""
    with e.tx() as tx:
        times = [lease["expires_at"] for lease in tx.list_leases(consumer)]
        if consumer is not None:
            times += [r["not_before"] for r in tx.list_retries(consumer)]
    return min(times, default=None)


def _held(tx, lease: dict, now: int) -> bool:
    """Whether ``lease`` is still held as it was read (its row, with its token)
    and still expired at ``now``."""
    now_held = tx.get_lease(lease["consumer"], lease["event_id"])
    return now_held is not None and now_held["token"] == lease["token"] and now_held["expires_at"] <= now


def new_incarnation(e, tx, now: int) -> tuple[int, list]:
    """In ``tx``: publish the next history incarnation and turn every live
    lease, expired or not, into a failed attempt (a retry now, or the dead
    letter, which the checkpoint passes). Returns the incarnation and the voided
    ``(lease, result, checkpoint moved to)`` triples, for :func:`trace_voided`
    after the commit."""
    done = []
    rows = {c["consumer"]: c for c in tx.lock_lease_consumers()}  # consumers first, then the history
    h = tx.lock_history()
    h["incarnation"] += 1
    tx.set_history(h)
    for lease in tx.list_leases():
        tx.delete_lease(lease["consumer"], lease["event_id"])
        done.append((lease, *_fail(e, tx, now, rows[lease["consumer"]], lease, now, "restore")))
    for row in rows.values():
        bump(tx, row)
    return h["incarnation"], done


def trace_voided(e, now: int, done: list) -> None:
    """Trace what a new incarnation did to the live leases ``done`` (each
    ``(lease, result, moved)``): each lease voided, a dead letter where it was the
    last attempt, and the checkpoint moves it caused."""
    for lease, result, moved in done:
        _lease_trace(e, now, "lease_voided", lease, "restore")
        _ended_trace(e, now, lease, result, "restore")
        _moved(e, now, lease["consumer"], moved)


def restore(e, now: int) -> int:
    """Publish a new history incarnation (as a restore from backup does): every
    live lease, expired or not, becomes a failed attempt (a retry now, or the
    dead letter, which the checkpoint passes); returns the new incarnation. (The
    tables themselves going back to a backup: :func:`~.backup.restore_backup`.)"""
    with e.tx() as tx:
        incarnation, done = new_incarnation(e, tx, now)
        now = tx.after_locks(now)
    trace_voided(e, now, done)
    e.trace.add(now, "restored", e.actor, detail=str(incarnation))
    return incarnation
