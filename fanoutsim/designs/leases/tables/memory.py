"""The leased-consumer design's tables in memory: the memory adapter of :mod:`.port`."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from types import SimpleNamespace

from fanoutsim.kernel.store.base import check_limit

from .port import DEFAULT_DATABASE, TABLES, LeaseTx, check_database

# -- the memory adapter -----------------------------------------------------------------
# the memory adapter's attributes holding one database's tables
_ATTRS = (
    "events",
    "event_seqs",
    "event_ids",
    "event_parts",
    "lease_consumers",
    "cp_index",
    "res_index",
    "res_part",
    "leases",
    "retries",
    "dead_letters",
    "history",
)


def memory_init(s) -> None:
    """The leased-consumer design's tables on a new MemoryStore: the default
    database's as attributes of the store, a named one's as a namespace in
    ``s.lease_dbs``; ``s.lease_db`` the current one."""
    _empty(s)
    s.lease_dbs: dict[str, SimpleNamespace] = {}
    s.lease_db = DEFAULT_DATABASE


def _empty(s) -> None:
    s.events: dict[int, dict] = {}
    s.event_seqs: list[int] = []  # sorted
    s.event_ids: dict[str, int] = {}
    s.event_parts: dict[str, list[int]] = {}  # partition -> its seqs, sorted
    s.lease_consumers: dict[str, dict] = {}
    s.cp_index: dict[str, dict[str, dict]] = {}  # consumer -> partition -> checkpoint row
    s.res_index: dict[str, dict[str, dict[str, dict]]] = {}  # consumer -> partition -> event_id -> row
    s.res_part: dict[tuple[str, str], str] = {}  # (consumer, event_id) -> partition
    s.leases: dict[tuple[str, str], dict] = {}
    s.retries: dict[tuple[str, str], dict] = {}
    s.dead_letters: dict[tuple[str, str], dict] = {}
    s.history = {"incarnation": 1, "last_commit": 0, "last_seq": 0, "leases_granted": 0}


def _drop_event(s, seq: int) -> dict:
    row = s.events.pop(seq)
    del s.event_seqs[bisect_left(s.event_seqs, seq)]
    del s.event_ids[row["event_id"]]
    part = s.event_parts[row["partition"]]
    del part[bisect_left(part, seq)]
    if not part:
        del s.event_parts[row["partition"]]
    return row


def _restore_event(s, row: dict) -> None:
    seq = row["seq"]
    s.events[seq] = row
    insort(s.event_seqs, seq)
    s.event_ids[row["event_id"]] = seq
    insort(s.event_parts.setdefault(row["partition"], []), seq)


def _add_resolution(s, row: dict) -> None:
    c, eid, part = row["consumer"], row["event_id"], row["partition"]
    s.res_index.setdefault(c, {}).setdefault(part, {})[eid] = row
    s.res_part[(c, eid)] = part


def _drop_resolution(s, consumer: str, event_id: str) -> dict:
    part = s.res_part.pop((consumer, event_id))
    by = s.res_index[consumer]
    row = by[part].pop(event_id)
    if not by[part]:
        del by[part]
        if not by:
            del s.res_index[consumer]
    return row


class LeaseMemoryTx(LeaseTx):
    """The leased-consumer design's methods of the memory adapter's transaction
    (a mixin of :class:`~fanoutsim.kernel.store.memory.MemoryTx`)."""

    __slots__ = ()

    def _d(self):
        """The current database's tables (the store itself for the default one)."""
        s = self.s
        return s if s.lease_db == DEFAULT_DATABASE else s.lease_dbs[s.lease_db]

    def use_database(self, name):
        s = self.s
        if s.lease_db == name:
            return
        check_database(name)
        if self.undo:
            raise RuntimeError("use_database must come first in a transaction")
        if name != DEFAULT_DATABASE and name not in s.lease_dbs:
            ns = SimpleNamespace()
            _empty(ns)
            s.lease_dbs[name] = ns
        s.lease_db = name

    def table_rows(self, table):
        return MEMORY_ROWS[table](self._d())

    def clear_database(self):
        d = self._d()
        before = {a: getattr(d, a) for a in _ATTRS}
        _empty(d)

        def undo():
            for a, v in before.items():
                setattr(d, a, v)

        self.undo.append(undo)

    def get_history(self):
        return dict(self._d().history)

    def lock_history(self):
        return self.get_history()

    def lock_lease_consumer(self, consumer):
        return self.get_lease_consumer(consumer)

    def lock_lease_consumers(self):
        return self.list_lease_consumers()

    def set_history(self, row):
        s = self._d()
        before = s.history
        s.history = {k: row[k] for k in TABLES["history"]}

        def undo():
            s.history = before

        self.undo.append(undo)

    def insert_event(self, row):
        s = self._d()
        seq, eid = row["seq"], row["event_id"]
        if seq in s.events:
            raise self._duplicate(f"events.seq {seq}")
        if eid in s.event_ids:
            raise self._duplicate(f"events.event_id {eid}")
        _restore_event(s, {k: row[k] for k in TABLES["events"]})
        self.undo.append(lambda: _drop_event(s, seq))

    def get_event(self, event_id):
        s = self._d()
        seq = s.event_ids.get(event_id)
        return None if seq is None else dict(s.events[seq])

    def get_event_at(self, seq):
        row = self._d().events.get(seq)
        return None if row is None else dict(row)

    def event_window(self, consumer, after, limit, partition=None):
        s = self._d()
        limit = check_limit(limit)
        cps = s.cp_index.get(consumer, {})
        events, out = s.events, []
        parts = (
            s.event_parts.items()
            if partition is None
            else ([(partition, s.event_parts[partition])] if partition in s.event_parts else [])
        )
        for part, seqs in parts:
            cp = cps.get(part)
            i = bisect_right(seqs, after if cp is None else max(after, cp["seq"]))
            out.extend(seqs[i : i + limit])
        if partition is None:
            out.sort()
        return [dict(events[q]) for q in out]

    def event_bounds(self):
        seqs = self._d().event_seqs
        return (seqs[0], seqs[-1]) if seqs else (None, None)

    def prune_events(self, cutoff, fence, limit=None):
        s = self._d()
        if limit is not None:
            check_limit(limit)
        doomed = [
            q
            for q in s.event_seqs
            if s.events[q]["committed_at"] < cutoff and (fence is None or s.events[q]["commit_seq"] < fence)
        ]
        if limit is not None:
            doomed = doomed[:limit]
        out = []
        for q in doomed:
            row = _drop_event(s, q)
            self.undo.append(lambda row=row: _restore_event(s, row))
            out.append(row["event_id"])
        return out

    def get_lease_consumer(self, consumer):
        row = self._d().lease_consumers.get(consumer)
        return None if row is None else dict(row)

    def put_lease_consumer(self, row):
        self._put(self._d().lease_consumers, row["consumer"], {k: row[k] for k in TABLES["lease_consumers"]})

    def delete_lease_consumer(self, consumer):
        return self._pop(self._d().lease_consumers, consumer)

    def list_lease_consumers(self):
        c = self._d().lease_consumers
        return [dict(c[k]) for k in sorted(c)]

    def list_checkpoints(self, consumer):
        cps = self._d().cp_index.get(consumer, {})
        return [dict(cps[p]) for p in sorted(cps)]

    def set_checkpoint(self, consumer, partition, seq, commit_seq):
        self._index_put(
            self._d().cp_index,
            consumer,
            partition,
            {"consumer": consumer, "partition": partition, "seq": seq, "commit_seq": commit_seq},
        )

    def clear_checkpoints(self, consumer):
        return self._index_clear(self._d().cp_index, consumer)

    def insert_resolution(self, row):
        s = self._d()
        key = (row["consumer"], row["event_id"])
        if key in s.res_part:
            raise self._duplicate(f"resolutions {key}")
        row = {k: row[k] for k in TABLES["resolutions"]}
        _add_resolution(s, row)
        self.undo.append(lambda: _drop_resolution(s, *key))

    def list_resolutions(self, consumer, partition=None):
        by = self._d().res_index.get(consumer, {})
        rows = [r for p in ((partition,) if partition is not None else by) for r in by.get(p, {}).values()]
        rows.sort(key=lambda r: r["seq"])
        return [dict(r) for r in rows]

    def delete_resolution(self, consumer, event_id):
        s = self._d()
        if (consumer, event_id) not in s.res_part:
            return False
        row = _drop_resolution(s, consumer, event_id)
        self.undo.append(lambda: _add_resolution(s, row))
        return True

    def clear_resolutions(self, consumer):
        s = self._d()
        rows = [r for by in s.res_index.get(consumer, {}).values() for r in by.values()]
        for r in rows:
            _drop_resolution(s, consumer, r["event_id"])

        def undo():
            for r in rows:
                _add_resolution(s, r)

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

    def _index_clear(self, index: dict, outer) -> int:
        gone = index.pop(outer, None)
        if not gone:
            return 0
        self.undo.append(lambda: index.__setitem__(outer, gone))
        return len(gone)

    def insert_lease(self, row):
        s = self._d()
        key = (row["consumer"], row["event_id"])
        if key in s.leases:
            raise self._duplicate(f"leases {key}")
        self._put(s.leases, key, {k: row[k] for k in TABLES["leases"]})

    def get_lease(self, consumer, event_id):
        row = self._d().leases.get((consumer, event_id))
        return None if row is None else dict(row)

    def list_leases(self, consumer=None):
        return _by_consumer_seq(self._d().leases, consumer)

    def delete_lease(self, consumer, event_id):
        return self._pop(self._d().leases, (consumer, event_id))

    def has_lease_due(self, now):
        return any(r["expires_at"] <= now for r in self._d().leases.values())

    def expired_leases(self, now, limit):
        rows = [r for r in self._d().leases.values() if r["expires_at"] <= now]
        rows.sort(key=lambda r: (r["expires_at"], r["consumer"], r["seq"]))
        return [dict(r) for r in rows[: check_limit(limit)]]

    def put_retry(self, row):
        self._put(self._d().retries, (row["consumer"], row["event_id"]), {k: row[k] for k in TABLES["retries"]})

    def get_retry(self, consumer, event_id):
        row = self._d().retries.get((consumer, event_id))
        return None if row is None else dict(row)

    def delete_retry(self, consumer, event_id):
        return self._pop(self._d().retries, (consumer, event_id))

    def list_retries(self, consumer=None):
        return _by_consumer_seq(self._d().retries, consumer)

    def clear_retries(self, consumer):
        return self._clear(self._d().retries, consumer)

    def insert_dead_letter(self, row):
        s = self._d()
        key = (row["consumer"], row["event_id"])
        if key in s.dead_letters:
            raise self._duplicate(f"dead_letters {key}")
        self._put(s.dead_letters, key, {k: row[k] for k in TABLES["dead_letters"]})

    def list_dead_letters(self, consumer=None):
        return _by_consumer_seq(self._d().dead_letters, consumer)

    def clear_dead_letters(self, consumer):
        return self._clear(self._d().dead_letters, consumer)


def _by_consumer_seq(table: dict, consumer: str | None) -> list[dict]:
    rows = [r for r in table.values() if consumer is None or r["consumer"] == consumer]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [dict(r) for r in rows]


def _resolution_rows(s) -> list[dict]:
    rows = [r for by in s.res_index.values() for part in by.values() for r in part.values()]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [dict(r) for r in rows]


MEMORY_ROWS = {
    "events": lambda s: [dict(s.events[q]) for q in s.event_seqs],
    "lease_consumers": lambda s: [dict(s.lease_consumers[k]) for k in sorted(s.lease_consumers)],
    "checkpoints": lambda s: [dict(s.cp_index[c][p]) for c in sorted(s.cp_index) for p in sorted(s.cp_index[c])],
    "resolutions": lambda s: _resolution_rows(s),
    "leases": lambda s: _by_consumer_seq(s.leases, None),
    "retries": lambda s: _by_consumer_seq(s.retries, None),
    "dead_letters": lambda s: _by_consumer_seq(s.dead_letters, None),
    "history": lambda s: [dict(s.history)],
}
