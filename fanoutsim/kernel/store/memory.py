"""The in-memory store: Python dicts with sorted indexes and an undo log.

Writes apply to the tables at once and push their inverse onto the open
transaction's undo log; rollback replays the log backwards, so a crash inside a
transaction leaves the tables exactly as they were. A lock serialises
transactions (the real-time runtime has threads); under the virtual clock no
transaction ever spans a yield, so the lock is never contended.

Firings are indexed per stream ``(reactor_name, tenant_id)`` by the key
``(fired_at, id)``, which makes the poll loop's fetch a bisection. Every index
(streams, triples, pending executions) must say what the rows say, or the two
adapters would answer the same call differently: each write that changes a
key column updates its index in the same step, and its undo does too.
"""
from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from typing import Callable

from fanoutsim.kernel.store.base import FAILED_TX, SWALLOWED_TX, TABLES, Store, Tx, check_limit, check_subscription_changes

_MAX_ID = "\uffff"  # sorts after every UUID string


class _Stream:
    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: list[tuple[int, str]] = []  # (fired_at, id), sorted


class _Failed:
    """Stands in for the store in a transaction that a failed write ended, so
    that any further use raises, as DuckDB does for an aborted transaction."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getattr__(self, name):
        raise RuntimeError(FAILED_TX.format(self.error))


class MemoryTx(Tx):
    """One transaction, and its own ``with`` block: the engine opens one for
    nearly every step, so one object and two calls is all it costs."""

    __slots__ = ("s", "store", "undo", "failed")

    def __init__(self, store: "MemoryStore") -> None:
        self.s = self.store = store
        self.undo: list[Callable[[], None]] = []
        self.failed = None

    def __enter__(self) -> "MemoryTx":
        store = self.store
        store._lock.acquire()
        if store._open:
            store._lock.release()
            raise RuntimeError("nested transactions are not supported")
        store._open = True
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        store = self.store
        if exc_type is None and self.failed is None:  # commit: the writes are already in place
            store._open = False
            store._lock.release()
            return False
        store._rollback(self)
        if exc_type is None:  # the block swallowed a failed write
            raise RuntimeError(SWALLOWED_TX.format(self.failed)) from self.failed
        return False  # re-raise

    def _duplicate(self, what: str) -> KeyError:
        # SQL aborts the transaction on a constraint violation; so do we (the
        # undo log still holds the earlier writes for the rollback)
        self.failed = KeyError(f"duplicate {what}")
        self.s = _Failed(self.failed)
        return self.failed

    # -- reactor_firings -------------------------------------------------
    def insert_firing(self, row: dict) -> None:
        s = self.s
        fid = row["id"]
        if fid in s.firings:
            raise self._duplicate(f"reactor_firings.id {fid}")
        row = dict(row)
        row["payload"] = bytes(row["payload"])  # a BLOB reads back as bytes, whatever was written
        s.firings[fid] = row
        stream = s.streams.get((row["reactor_name"], row["tenant_id"]))
        if stream is None:
            stream = s.streams[(row["reactor_name"], row["tenant_id"])] = _Stream()
        key = (row["fired_at"], fid)
        insort(stream.keys, key)
        self.undo.append(lambda: s._drop_firing(fid))

    def fetch_firings(self, reactor, tenant, after, limit, after_id=None, until=None):
        s = self.s
        limit = check_limit(limit)
        stream = s.streams.get((reactor, tenant))
        if stream is None:
            return []
        keys = stream.keys
        if after is None:
            start = 0
        else:  # past every key of that instant, or only past the compound cursor
            start = bisect_right(keys, (after, _MAX_ID if after_id is None else after_id))
        end = start + limit
        if until is not None:
            end = min(end, bisect_right(keys, (until, _MAX_ID)))
        firings = s.firings
        return [dict(firings[k[1]]) for k in keys[start:end]]

    def prune_firings(self, cutoff, conservative, limit=None):
        s = self.s
        if limit is not None:
            check_limit(limit)
        doomed: list[tuple[int, str]] = []
        for (reactor, tenant), stream in s.streams.items():
            bound = cutoff - 1
            if conservative:
                for sub in s.subs.values():
                    if sub["enabled"] and sub["reactor_name"] == reactor and sub["tenant_id"] == tenant:
                        wm = sub["last_seen_fired_at"]
                        if wm is None:
                            bound = None
                            break
                        bound = min(bound, wm)
            if bound is not None:
                doomed.extend(stream.keys[: bisect_right(stream.keys, (bound, _MAX_ID))])
        doomed.sort()
        if limit is not None:
            doomed = doomed[:limit]
        for _, fid in doomed:
            row = s._drop_firing(fid)
            self.undo.append(lambda row=row: s._restore_firing(row))
        return [fid for _, fid in doomed]

    def count_firings(self):
        return len(self.s.firings)

    # -- reactor_subscriptions ------------------------------------------
    def get_subscription(self, reactor, workflow, tenant):
        sid = self.s.sub_by_triple.get((reactor, workflow, tenant))
        return None if sid is None else dict(self.s.subs[sid])

    def insert_subscription(self, row):
        s = self.s
        sid = row["id"]
        triple = (row["reactor_name"], row["workflow_name"], row["tenant_id"])
        # both keys, like the table's PRIMARY KEY and UNIQUE: a reused id would
        # overwrite a row and leave its old triple pointing at the new one
        if triple in s.sub_by_triple:
            raise self._duplicate(f"reactor_subscriptions {triple}")
        if sid in s.subs:
            raise self._duplicate(f"reactor_subscriptions.id {sid}")
        s._restore_sub(dict(row))
        self.undo.append(lambda: s._drop_sub(sid))

    def update_subscription(self, sub_id, changes):
        check_subscription_changes(changes)  # else a typo would become a new column
        row = self.s.subs.get(sub_id)
        if row is None:
            return  # no such row: UPDATE ... WHERE id = ? matches nothing
        before = {k: row[k] for k in changes}
        row.update(changes)
        self.undo.append(lambda: row.update(before))

    def delete_subscription(self, sub_id):
        s = self.s
        if sub_id not in s.subs:
            return False
        row = s._drop_sub(sub_id)
        self.undo.append(lambda: s._restore_sub(row))
        return True

    def list_subscriptions(self, tenant=None, enabled_only=False):
        s = self.s
        if s.sub_order is None:
            s.sub_order = [s.sub_by_triple[t] for t in sorted(s.sub_by_triple, key=lambda t: (t[2], t[0], t[1]))]
        out = []
        for sid in s.sub_order:
            row = s.subs[sid]
            if (tenant is None or row["tenant_id"] == tenant) and (row["enabled"] or not enabled_only):
                out.append(dict(row))
        return out

    # -- workflow_executions --------------------------------------------
    def insert_execution(self, row):
        s = self.s
        eid = row["id"]
        if eid in s.executions:
            raise self._duplicate(f"workflow_executions.id {eid}")
        row = s.executions[eid] = dict(row)
        s._index_status(row, None, row["status"])

        def undo():
            s._index_status(row, row["status"], None)
            del s.executions[eid]

        self.undo.append(undo)

    def claim_executions(self, now, limit):
        s = self.s
        taken = s.pending[: check_limit(limit)]
        if not taken:
            return []
        del s.pending[: len(taken)]
        out, before = [], []
        for key in taken:
            row = s.executions[key[1]]
            before.append((row, row["claimed_at"]))
            row["status"] = "running"
            row["claimed_at"] = now
            out.append(dict(row))

        def undo():
            for r, claimed_at in before:
                r["status"], r["claimed_at"] = "pending", claimed_at
            s.pending[:0] = taken  # they were the oldest pending, in order

        self.undo.append(undo)
        return out

    def requeue_running(self):
        s = self.s
        stale = sorted((r["dispatched_at"], r["id"]) for r in s.executions.values() if r["status"] == "running")
        before = []
        for key in stale:
            row = s.executions[key[1]]
            before.append((row, row["claimed_at"]))
            row["status"], row["claimed_at"] = "pending", None
            insort(s.pending, key)

        def undo():
            for r, claimed_at in before:
                r["status"], r["claimed_at"] = "running", claimed_at
                s.pending.remove((r["dispatched_at"], r["id"]))

        self.undo.append(undo)
        return [eid for _, eid in stale]

    def log_runner(self, at, event, detail=None):
        s = self.s
        seq = len(s.runner_log) + 1
        s.runner_log.append({"seq": seq, "happened_at": at, "event": event, "detail": detail})
        self.undo.append(s.runner_log.pop)
        return seq

    def finish_execution(self, execution_id, now, status):
        s = self.s
        row = s.executions.get(execution_id)
        if row is None:
            return  # no such row: UPDATE ... WHERE id = ? matches nothing
        before = (row["status"], row["finished_at"])
        row["status"], row["finished_at"] = status, now
        s._index_status(row, before[0], status)  # a finished row must not be claimed later

        def undo():
            row["status"], row["finished_at"] = before
            s._index_status(row, status, before[0])

        self.undo.append(undo)

    # == the outbox design (seed 002) =====================================
    def reserve_outbox_seq(self):
        s = self.s
        s.outbox_last += 1

        def undo():
            s.outbox_last -= 1

        self.undo.append(undo)
        return s.outbox_last

    def insert_outbox(self, row):
        s = self.s
        seq = row["seq"]
        if seq in s.outbox:
            raise self._duplicate(f"outbox.seq {seq}")
        s.outbox[seq] = {k: row[k] for k in TABLES["outbox"]}  # the table's columns, in order
        insort(s.outbox_seqs, seq)
        self.undo.append(lambda: s._drop_outbox(seq))

    def fetch_outbox(self, after, limit):
        s = self.s
        seqs = s.outbox_seqs
        start = bisect_right(seqs, after)
        return [dict(s.outbox[q]) for q in seqs[start:start + check_limit(limit)]]

    def outbox_bounds(self):
        s = self.s
        return (s.outbox_seqs[0] if s.outbox_seqs else None, s.outbox_last)

    def prune_outbox(self, cutoff, limit=None):
        s = self.s
        if limit is not None:
            check_limit(limit)
        owed = {seq for (_, seq) in s.deferred}
        doomed = [q for q in s.outbox_seqs if s.outbox[q]["ts"] < cutoff and q not in owed]
        if limit is not None:
            doomed = doomed[:limit]
        for q in doomed:
            row = s._drop_outbox(q)
            self.undo.append(lambda row=row: s._restore_outbox(row))
        return doomed

    def get_cursor(self, consumer):
        return self.s.cursors.get(consumer)

    def set_cursor(self, consumer, seq):
        self._put(self.s.cursors, consumer, seq)

    def list_cursors(self):
        c = self.s.cursors
        return [{"consumer": k, "seq": c[k]} for k in sorted(c)]

    def _put(self, table: dict, key, value) -> None:
        """Insert or overwrite one entry; the undo puts back what was there."""
        missing = key not in table
        before = table.get(key)
        table[key] = value

        def undo():
            if missing:
                del table[key]
            else:
                table[key] = before

        self.undo.append(undo)

    def park(self, row):
        self._put(self.s.parked, (row["consumer"], row["seq"]), {k: row[k] for k in TABLES["parked"]})

    def list_parked(self, consumer=None):
        p = self.s.parked
        return [dict(p[k]) for k in sorted(p) if consumer is None or k[0] == consumer]

    def defer(self, consumer, seq, due_at):
        self._put(self.s.deferred, (consumer, seq), due_at)

    def fetch_due(self, consumer, now, limit):
        d = self.s.deferred
        due = sorted((at, seq) for (c, seq), at in d.items() if c == consumer and at <= now)
        return [{"consumer": consumer, "seq": seq, "due_at": at} for at, seq in due[:check_limit(limit)]]

    def next_due(self, consumer):
        if not self.s.deferred:  # the usual case, asked on every fetch
            return None
        return min((at for (c, _), at in self.s.deferred.items() if c == consumer), default=None)

    def delete_deferred(self, consumer, seq):
        d = self.s.deferred
        key = (consumer, seq)
        if key not in d:
            return False
        at = d.pop(key)
        self.undo.append(lambda: d.__setitem__(key, at))
        return True

    def upsert_page(self, row):
        self._put(self.s.pages, row["id"], {k: row[k] for k in TABLES["pages"]})

    def get_page(self, page_id):
        row = self.s.pages.get(page_id)
        return None if row is None else dict(row)

    # == the leased-consumer design (seed 003) ==============================
    def get_history(self):
        return dict(self.s.history)

    def set_history(self, row):
        s = self.s
        before = s.history
        s.history = {k: row[k] for k in TABLES["history"]}

        def undo():
            s.history = before

        self.undo.append(undo)

    def insert_event(self, row):
        s = self.s
        seq, eid = row["seq"], row["event_id"]
        if seq in s.events:
            raise self._duplicate(f"events.seq {seq}")
        if eid in s.event_ids:
            raise self._duplicate(f"events.event_id {eid}")
        s._restore_event({k: row[k] for k in TABLES["events"]})
        self.undo.append(lambda: s._drop_event(seq))

    def get_event(self, event_id):
        s = self.s
        seq = s.event_ids.get(event_id)
        return None if seq is None else dict(s.events[seq])

    def get_event_at(self, seq):
        row = self.s.events.get(seq)
        return None if row is None else dict(row)

    def event_window(self, consumer, after, limit, partition=None):
        s = self.s
        limit = check_limit(limit)
        cps = s.cp_index.get(consumer, {})
        events, out = s.events, []
        parts = s.event_parts.items() if partition is None else (
            [(partition, s.event_parts[partition])] if partition in s.event_parts else [])
        for part, seqs in parts:
            cp = cps.get(part)
            i = bisect_right(seqs, after if cp is None else max(after, cp["seq"]))
            out.extend(seqs[i:i + limit])
        if partition is None:
            out.sort()
        return [dict(events[q]) for q in out]

    def event_bounds(self):
        seqs = self.s.event_seqs
        return (seqs[0], seqs[-1]) if seqs else (None, None)

    def prune_events(self, cutoff, fence, limit=None):
        s = self.s
        if limit is not None:
            check_limit(limit)
        doomed = [q for q in s.event_seqs
                  if s.events[q]["committed_at"] < cutoff and (fence is None or s.events[q]["commit_seq"] < fence)]
        if limit is not None:
            doomed = doomed[:limit]
        out = []
        for q in doomed:
            row = s._drop_event(q)
            self.undo.append(lambda row=row: s._restore_event(row))
            out.append(row["event_id"])
        return out

    def get_lease_consumer(self, consumer):
        row = self.s.lease_consumers.get(consumer)
        return None if row is None else dict(row)

    def put_lease_consumer(self, row):
        self._put(self.s.lease_consumers, row["consumer"], {k: row[k] for k in TABLES["lease_consumers"]})

    def delete_lease_consumer(self, consumer):
        return self._pop(self.s.lease_consumers, consumer)

    def list_lease_consumers(self):
        c = self.s.lease_consumers
        return [dict(c[k]) for k in sorted(c)]

    def list_checkpoints(self, consumer):
        cps = self.s.cp_index.get(consumer, {})
        return [dict(cps[p]) for p in sorted(cps)]

    def set_checkpoint(self, consumer, partition, seq, commit_seq):
        self._index_put(self.s.cp_index, consumer, partition,
                        {"consumer": consumer, "partition": partition, "seq": seq, "commit_seq": commit_seq})

    def clear_checkpoints(self, consumer):
        return self._index_clear(self.s.cp_index, consumer)

    def insert_resolution(self, row):
        s = self.s
        key = (row["consumer"], row["event_id"])
        if key in s.res_part:
            raise self._duplicate(f"resolutions {key}")
        row = {k: row[k] for k in TABLES["resolutions"]}
        s._add_resolution(row)
        self.undo.append(lambda: s._drop_resolution(*key))

    def list_resolutions(self, consumer, partition=None):
        by = self.s.res_index.get(consumer, {})
        rows = [r for p in ((partition,) if partition is not None else by) for r in by.get(p, {}).values()]
        rows.sort(key=lambda r: r["seq"])
        return [dict(r) for r in rows]

    def delete_resolution(self, consumer, event_id):
        s = self.s
        if (consumer, event_id) not in s.res_part:
            return False
        row = s._drop_resolution(consumer, event_id)
        self.undo.append(lambda: s._add_resolution(row))
        return True

    def clear_resolutions(self, consumer):
        s = self.s
        rows = [r for by in s.res_index.get(consumer, {}).values() for r in by.values()]
        for r in rows:
            s._drop_resolution(consumer, r["event_id"])

        def undo():
            for r in rows:
                s._add_resolution(r)

        self.undo.append(undo)
        return len(rows)

    def _index_put(self, index: dict, outer, inner, value) -> None:
        """Set ``index[outer][inner] = value`` with its undo."""
        by = index.setdefault(outer, {})
        had, old = inner in by, by.get(inner)
        by[inner] = value

        def undo():
            if had:
                index.setdefault(outer, {})[inner] = old
            else:
                index.get(outer, {}).pop(inner, None)

        self.undo.append(undo)

    def _clear(self, table: dict, consumer: str) -> int:
        """Delete every entry of ``consumer`` (the first part of the key)."""
        gone = {k: v for k, v in table.items() if k[0] == consumer}
        for k in gone:
            del table[k]
        self.undo.append(lambda: table.update(gone))
        return len(gone)

    def _pop(self, table: dict, key) -> bool:
        if key not in table:
            return False
        value = table.pop(key)
        self.undo.append(lambda: table.__setitem__(key, value))
        return True

    def _index_clear(self, index: dict, outer) -> int:
        gone = index.pop(outer, None)
        if not gone:
            return 0
        self.undo.append(lambda: index.__setitem__(outer, gone))
        return len(gone)

    def insert_lease(self, row):
        s = self.s
        key = (row["consumer"], row["event_id"])
        if key in s.leases:
            raise self._duplicate(f"leases {key}")
        self._put(s.leases, key, {k: row[k] for k in TABLES["leases"]})

    def get_lease(self, consumer, event_id):
        row = self.s.leases.get((consumer, event_id))
        return None if row is None else dict(row)

    def list_leases(self, consumer=None):
        return _by_consumer_seq(self.s.leases, consumer)

    def delete_lease(self, consumer, event_id):
        return self._pop(self.s.leases, (consumer, event_id))

    def expired_leases(self, now, limit):
        rows = [r for r in self.s.leases.values() if r["expires_at"] <= now]
        rows.sort(key=lambda r: (r["expires_at"], r["consumer"], r["seq"]))
        return [dict(r) for r in rows[:check_limit(limit)]]

    def put_retry(self, row):
        self._put(self.s.retries, (row["consumer"], row["event_id"]), {k: row[k] for k in TABLES["retries"]})

    def get_retry(self, consumer, event_id):
        row = self.s.retries.get((consumer, event_id))
        return None if row is None else dict(row)

    def delete_retry(self, consumer, event_id):
        return self._pop(self.s.retries, (consumer, event_id))

    def list_retries(self, consumer=None):
        return _by_consumer_seq(self.s.retries, consumer)

    def clear_retries(self, consumer):
        return self._clear(self.s.retries, consumer)

    def insert_dead_letter(self, row):
        s = self.s
        key = (row["consumer"], row["event_id"])
        if key in s.dead_letters:
            raise self._duplicate(f"dead_letters {key}")
        self._put(s.dead_letters, key, {k: row[k] for k in TABLES["dead_letters"]})

    def list_dead_letters(self, consumer=None):
        return _by_consumer_seq(self.s.dead_letters, consumer)

    def clear_dead_letters(self, consumer):
        return self._clear(self.s.dead_letters, consumer)


def _by_consumer_seq(table: dict, consumer: str | None) -> list[dict]:
    rows = [r for r in table.values() if consumer is None or r["consumer"] == consumer]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [dict(r) for r in rows]


class MemoryStore(Store):
    def __init__(self) -> None:
        self.firings: dict[str, dict] = {}
        self.streams: dict[tuple[str, str], _Stream] = {}
        self.subs: dict[str, dict] = {}
        self.sub_by_triple: dict[tuple[str, str, str], str] = {}
        self.sub_order: list[str] | None = None
        self.executions: dict[str, dict] = {}
        self.pending: list[tuple[int, str]] = []
        self.runner_log: list[dict] = []
        # the outbox design (seed 002)
        self.outbox: dict[int, dict] = {}
        self.outbox_seqs: list[int] = []  # sorted
        self.outbox_last = 0  # the sequence's last value
        self.cursors: dict[str, int] = {}
        self.parked: dict[tuple[str, int], dict] = {}
        self.deferred: dict[tuple[str, int], int] = {}
        self.pages: dict[str, dict] = {}
        # the leased-consumer design (seed 003)
        self.events: dict[int, dict] = {}
        self.event_seqs: list[int] = []  # sorted
        self.event_ids: dict[str, int] = {}
        self.event_parts: dict[str, list[int]] = {}  # partition -> its seqs, sorted
        self.lease_consumers: dict[str, dict] = {}
        self.cp_index: dict[str, dict[str, dict]] = {}  # consumer -> partition -> checkpoint row
        self.res_index: dict[str, dict[str, dict[str, dict]]] = {}  # consumer -> partition -> event_id -> row
        self.res_part: dict[tuple[str, str], str] = {}  # (consumer, event_id) -> partition
        self.leases: dict[tuple[str, str], dict] = {}
        self.retries: dict[tuple[str, str], dict] = {}
        self.dead_letters: dict[tuple[str, str], dict] = {}
        self.history = {"incarnation": 1, "last_commit": 0, "last_seq": 0, "leases_granted": 0}
        # Re-entrant, so that a second ``transaction()`` in the thread holding the
        # lock gets through and finds ``_open`` set (an error, not a deadlock);
        # another thread just waits. No thread ids to look up on the hot path.
        self._lock = threading.RLock()
        self._open = False

    def __repr__(self) -> str:
        return "MemoryStore()"

    # -- transactions ---------------------------------------------------
    def transaction(self) -> MemoryTx:
        return MemoryTx(self)

    def _begin(self) -> MemoryTx:
        return MemoryTx(self).__enter__()

    def _commit(self, tx: MemoryTx) -> None:
        self._open = False
        self._lock.release()

    def _rollback(self, tx: MemoryTx) -> None:
        try:
            for undo in reversed(tx.undo):
                undo()
        finally:
            self._open = False
            self._lock.release()

    # -- helpers the writes and the undo log share ---------------------------
    def _index_status(self, row: dict, old: str | None, new: str | None) -> None:
        """Keep ``pending`` equal to the rows whose status is 'pending' as
        ``row`` goes from status ``old`` to ``new`` (None: no such row)."""
        key = (row["dispatched_at"], row["id"])
        if old == "pending" and new != "pending":
            del self.pending[bisect_left(self.pending, key)]
        elif new == "pending" and old != "pending":
            insort(self.pending, key)

    def _drop_firing(self, fid: str) -> dict:
        row = self.firings.pop(fid)
        keys = self.streams[(row["reactor_name"], row["tenant_id"])].keys
        key = (row["fired_at"], fid)
        del keys[bisect_left(keys, key)]
        return row

    def _restore_firing(self, row: dict) -> None:
        self.firings[row["id"]] = row
        insort(self.streams[(row["reactor_name"], row["tenant_id"])].keys, (row["fired_at"], row["id"]))

    def _drop_outbox(self, seq: int) -> dict:
        row = self.outbox.pop(seq)
        del self.outbox_seqs[bisect_left(self.outbox_seqs, seq)]
        return row

    def _restore_outbox(self, row: dict) -> None:
        self.outbox[row["seq"]] = row
        insort(self.outbox_seqs, row["seq"])

    def _drop_event(self, seq: int) -> dict:
        row = self.events.pop(seq)
        del self.event_seqs[bisect_left(self.event_seqs, seq)]
        del self.event_ids[row["event_id"]]
        part = self.event_parts[row["partition"]]
        del part[bisect_left(part, seq)]
        if not part:
            del self.event_parts[row["partition"]]
        return row

    def _add_resolution(self, row: dict) -> None:
        c, eid, part = row["consumer"], row["event_id"], row["partition"]
        self.res_index.setdefault(c, {}).setdefault(part, {})[eid] = row
        self.res_part[(c, eid)] = part

    def _drop_resolution(self, consumer: str, event_id: str) -> dict:
        part = self.res_part.pop((consumer, event_id))
        by = self.res_index[consumer]
        row = by[part].pop(event_id)
        if not by[part]:
            del by[part]
            if not by:
                del self.res_index[consumer]
        return row

    def _restore_event(self, row: dict) -> None:
        seq = row["seq"]
        self.events[seq] = row
        insort(self.event_seqs, seq)
        self.event_ids[row["event_id"]] = seq
        insort(self.event_parts.setdefault(row["partition"], []), seq)

    def _drop_sub(self, sid: str) -> dict:
        row = self.subs.pop(sid)
        del self.sub_by_triple[(row["reactor_name"], row["workflow_name"], row["tenant_id"])]
        self.sub_order = None
        return row

    def _restore_sub(self, row: dict) -> None:
        self.subs[row["id"]] = row
        self.sub_by_triple[(row["reactor_name"], row["workflow_name"], row["tenant_id"])] = row["id"]
        self.sub_order = None

    # -- reading whole tables -------------------------------------------
    def rows(self, table: str) -> list[dict]:
        with self._lock:  # another thread's transaction may be half applied
            if self._open:  # then it is this thread's own
                raise RuntimeError("rows() reads committed rows; call it outside the open transaction")
            return self._rows(table)

    def _rows(self, table: str) -> list[dict]:
        if table == "reactor_firings":
            return [dict(r) for r in sorted(self.firings.values(), key=lambda r: (r["fired_at"], r["id"]))]
        if table == "reactor_subscriptions":
            return [dict(r) for r in sorted(self.subs.values(),
                                             key=lambda r: (r["tenant_id"], r["reactor_name"], r["workflow_name"]))]
        if table == "workflow_executions":
            return [dict(r) for r in sorted(self.executions.values(), key=lambda r: (r["dispatched_at"], r["id"]))]
        if table == "runner_log":
            return [dict(r) for r in self.runner_log]
        if table == "outbox":
            return [dict(self.outbox[q]) for q in self.outbox_seqs]
        if table == "cursors":
            return [{"consumer": k, "seq": self.cursors[k]} for k in sorted(self.cursors)]
        if table == "parked":
            return [dict(self.parked[k]) for k in sorted(self.parked)]
        if table == "deferred":
            return [{"consumer": c, "seq": q, "due_at": self.deferred[(c, q)]} for c, q in sorted(self.deferred)]
        if table == "pages":
            return [dict(self.pages[k]) for k in sorted(self.pages)]
        if table == "events":
            return [dict(self.events[q]) for q in self.event_seqs]
        if table == "lease_consumers":
            return [dict(self.lease_consumers[k]) for k in sorted(self.lease_consumers)]
        if table == "checkpoints":
            return [dict(self.cp_index[c][p]) for c in sorted(self.cp_index) for p in sorted(self.cp_index[c])]
        if table == "resolutions":
            rows = [r for by in self.res_index.values() for part in by.values() for r in part.values()]
            rows.sort(key=lambda r: (r["consumer"], r["seq"]))
            return [dict(r) for r in rows]
        if table in ("leases", "retries", "dead_letters"):
            return _by_consumer_seq(getattr(self, table), None)
        if table == "history":
            return [dict(self.history)]
        raise KeyError(f"unknown table {table!r}")
