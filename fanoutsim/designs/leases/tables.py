"""The leased-consumer design's tables: its part of the store (seed 003).

The event log (``events``), durable consumers (``lease_consumers``) and their
per-partition ``checkpoints``, ``leases``, ``retries``, ``dead_letters``, and
the one ``history`` row (the incarnation a restore bumps, and the log's
counters): their columns, their part of the ``Tx`` interface, the memory
adapter's state and methods, the DuckDB schema and statements, composed by the
kernel's store as :data:`PART`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_left, bisect_right, insort

from fanoutsim.designs.leases import tables_sql as sql
from fanoutsim.kernel.store.base import StorePart, check_limit
from fanoutsim.kernel.store.base import row_of as _row

# -- the tables ----------------------------------------------------------------------
# table -> columns, in the order DataFrames show them: the event log, consumers,
# their per-partition checkpoints, leases, retries, dead letters, the history row
TABLES: dict[str, tuple[str, ...]] = {
    "events": ("seq", "event_id", "commit_seq", "ordinal", "partition", "kind", "payload", "committed_at"),
    "lease_consumers": ("consumer", "start_seq", "batch_limit", "in_flight_limit", "lease_seconds", "retired"),
    "checkpoints": ("consumer", "partition", "seq"),
    "leases": ("consumer", "event_id", "seq", "partition", "token", "incarnation", "attempt",
               "leased_at", "expires_at"),
    "retries": ("consumer", "event_id", "seq", "partition", "attempts", "not_before", "error"),
    "dead_letters": ("consumer", "event_id", "seq", "partition", "attempts", "error", "payload", "dead_at"),
    "history": ("incarnation", "last_commit", "last_seq", "leases_granted"),
}
TIMESTAMP_COLUMNS = frozenset({"committed_at", "leased_at", "expires_at", "not_before", "dead_at"})


# -- the interface -------------------------------------------------------------------
class LeaseTx(ABC):
    """The leased-consumer design's part of :class:`~fanoutsim.kernel.store.base.Tx`."""

    __slots__ = ()

    # Orderings: events by ``seq``; lease_consumers by ``consumer``;
    # checkpoints by ``(consumer, partition)``; leases, retries and
    # dead_letters by ``(consumer, seq)``. ``history`` is one row.

    # -- history: the incarnation and the log's counters ----------------------
    @abstractmethod
    def get_history(self) -> dict:
        """The one history row: ``incarnation`` (1 at first), ``last_commit``,
        ``last_seq`` and ``leases_granted`` (0 at first); they only grow."""

    @abstractmethod
    def set_history(self, row: dict) -> None:
        """Overwrite the history row with ``row``'s four columns."""

    # -- events -----------------------------------------------------------------
    @abstractmethod
    def insert_event(self, row: dict) -> None:
        """Append one event; a ``seq`` or ``event_id`` already there raises :class:`KeyError`."""

    @abstractmethod
    def get_event(self, event_id: str) -> dict | None: ...

    @abstractmethod
    def event_heads(self, consumer: str, after: int) -> list[dict]:
        """Per partition, the first retained event with ``seq > after`` and
        past ``consumer``'s checkpoint of that partition; by ``seq``."""

    @abstractmethod
    def event_bounds(self) -> tuple[int | None, int | None]:
        """``(lowest, highest)`` retained seq, or ``(None, None)``."""

    @abstractmethod
    def prune_events(self, cutoff: int, fence: int | None, limit: int | None = None) -> list[str]:
        """Delete events with ``committed_at < cutoff`` and, unless ``fence``
        is None, ``commit_seq < fence`` (lowest seq first, at most ``limit``);
        returns their event ids in seq order."""

    # -- consumers and checkpoints ----------------------------------------------
    @abstractmethod
    def get_lease_consumer(self, consumer: str) -> dict | None: ...

    @abstractmethod
    def put_lease_consumer(self, row: dict) -> None:
        """Insert or overwrite one consumer row."""

    @abstractmethod
    def list_lease_consumers(self) -> list[dict]: ...

    @abstractmethod
    def get_checkpoints(self, consumer: str) -> dict:
        """``{partition: seq}``: the last done event of each partition."""

    @abstractmethod
    def set_checkpoint(self, consumer: str, partition: str, seq: int) -> None: ...

    @abstractmethod
    def clear_checkpoints(self, consumer: str) -> int:
        """Delete the consumer's checkpoints; how many there were."""

    # -- leases -------------------------------------------------------------------
    @abstractmethod
    def insert_lease(self, row: dict) -> None:
        """A lease of ``(consumer, event_id)``; a second one raises :class:`KeyError`."""

    @abstractmethod
    def get_lease(self, consumer: str, event_id: str) -> dict | None: ...

    @abstractmethod
    def list_leases(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def delete_lease(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def expired_leases(self, now: int, limit: int) -> list[dict]:
        """Leases with ``expires_at <= now``, by ``(expires_at, consumer, seq)``."""

    # -- retries and dead letters ---------------------------------------------------
    @abstractmethod
    def put_retry(self, row: dict) -> None:
        """Insert or overwrite the retry of ``(consumer, event_id)``."""

    @abstractmethod
    def get_retry(self, consumer: str, event_id: str) -> dict | None: ...

    @abstractmethod
    def delete_retry(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def list_retries(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def insert_dead_letter(self, row: dict) -> None:
        """Retain a dead letter; the same ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_dead_letters(self, consumer: str | None = None) -> list[dict]: ...


# -- the memory adapter -----------------------------------------------------------------
def memory_init(s) -> None:
    """The leased-consumer design's tables on a new MemoryStore."""
    s.events: dict[int, dict] = {}
    s.event_seqs: list[int] = []  # sorted
    s.event_ids: dict[str, int] = {}
    s.event_parts: dict[str, list[int]] = {}  # partition -> its seqs, sorted
    s.lease_consumers: dict[str, dict] = {}
    s.checkpoints: dict[tuple[str, str], int] = {}
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


class LeaseMemoryTx(LeaseTx):
    """The leased-consumer design's methods of the memory adapter's transaction
    (a mixin of :class:`~fanoutsim.kernel.store.memory.MemoryTx`)."""

    __slots__ = ()

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
        _restore_event(s, {k: row[k] for k in TABLES["events"]})
        self.undo.append(lambda: _drop_event(s, seq))

    def get_event(self, event_id):
        s = self.s
        seq = s.event_ids.get(event_id)
        return None if seq is None else dict(s.events[seq])

    def event_heads(self, consumer, after):
        s = self.s
        cps = {p: q for (c, p), q in s.checkpoints.items() if c == consumer}
        heads = []
        for part, seqs in s.event_parts.items():
            cp = cps.get(part)
            i = bisect_right(seqs, after if cp is None else max(after, cp))
            if i < len(seqs):
                heads.append(seqs[i])
        return [dict(s.events[q]) for q in sorted(heads)]

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
            row = _drop_event(s, q)
            self.undo.append(lambda row=row: _restore_event(s, row))
            out.append(row["event_id"])
        return out

    def get_lease_consumer(self, consumer):
        row = self.s.lease_consumers.get(consumer)
        return None if row is None else dict(row)

    def put_lease_consumer(self, row):
        self._put(self.s.lease_consumers, row["consumer"], {k: row[k] for k in TABLES["lease_consumers"]})

    def list_lease_consumers(self):
        c = self.s.lease_consumers
        return [dict(c[k]) for k in sorted(c)]

    def get_checkpoints(self, consumer):
        cp = self.s.checkpoints
        return {p: cp[(c, p)] for c, p in sorted(cp) if c == consumer}

    def set_checkpoint(self, consumer, partition, seq):
        self._put(self.s.checkpoints, (consumer, partition), seq)

    def clear_checkpoints(self, consumer):
        return self._clear(self.s.checkpoints, consumer)

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

    def insert_dead_letter(self, row):
        s = self.s
        key = (row["consumer"], row["event_id"])
        if key in s.dead_letters:
            raise self._duplicate(f"dead_letters {key}")
        self._put(s.dead_letters, key, {k: row[k] for k in TABLES["dead_letters"]})

    def list_dead_letters(self, consumer=None):
        return _by_consumer_seq(self.s.dead_letters, consumer)


def _by_consumer_seq(table: dict, consumer: str | None) -> list[dict]:
    rows = [r for r in table.values() if consumer is None or r["consumer"] == consumer]
    rows.sort(key=lambda r: (r["consumer"], r["seq"]))
    return [dict(r) for r in rows]


MEMORY_ROWS = {
    "events": lambda s: [dict(s.events[q]) for q in s.event_seqs],
    "lease_consumers": lambda s: [dict(s.lease_consumers[k]) for k in sorted(s.lease_consumers)],
    "checkpoints": lambda s: [{"consumer": c, "partition": p, "seq": s.checkpoints[(c, p)]}
                              for c, p in sorted(s.checkpoints)],
    "leases": lambda s: _by_consumer_seq(s.leases, None),
    "retries": lambda s: _by_consumer_seq(s.retries, None),
    "dead_letters": lambda s: _by_consumer_seq(s.dead_letters, None),
    "history": lambda s: [dict(s.history)],
}


# -- the DuckDB adapter ---------------------------------------------------------------
class LeaseDuckDBTx(LeaseTx):
    """The leased-consumer design's methods of the DuckDB adapter's transaction
    (a mixin of :class:`~fanoutsim.kernel.store.duckdb.DuckDBTx`)."""

    __slots__ = ()

    def _one(self, table, statement, params):
        r = self._run(statement, params).fetchone()
        return None if r is None else _row(TABLES[table], r)

    def _all(self, table, statement, params):
        return [_row(TABLES[table], r) for r in self._run(statement, params).fetchall()]

    def get_history(self):
        return self._one("history", sql.GET_HISTORY, None)

    def set_history(self, row):
        self._run(sql.SET_HISTORY, [row[k] for k in TABLES["history"]])

    def insert_event(self, row):
        self._run(sql.INSERT_EVENT, [row[k] for k in TABLES["events"]])

    def get_event(self, event_id):
        return self._one("events", sql.GET_EVENT, [event_id])

    def event_heads(self, consumer, after):
        return self._all("events", sql.EVENT_HEADS, [consumer, after])

    def event_bounds(self):
        return tuple(self._run(sql.EVENT_BOUNDS).fetchone())

    def prune_events(self, cutoff, fence, limit=None):
        limit = 2**62 if limit is None else check_limit(limit)
        rows = self._run(sql.PRUNE_EVENTS, [cutoff, fence, fence, limit]).fetchall()
        return [eid for _, eid in sorted(rows)]

    def get_lease_consumer(self, consumer):
        return self._one("lease_consumers", sql.GET_LEASE_CONSUMER, [consumer])

    def put_lease_consumer(self, row):
        self._run(sql.PUT_LEASE_CONSUMER, [row[k] for k in TABLES["lease_consumers"]])

    def list_lease_consumers(self):
        return self._all("lease_consumers", sql.ALL_ROWS["lease_consumers"], None)

    def get_checkpoints(self, consumer):
        return dict(self._run(sql.GET_CHECKPOINTS, [consumer]).fetchall())

    def set_checkpoint(self, consumer, partition, seq):
        self._run(sql.SET_CHECKPOINT, [consumer, partition, seq])

    def clear_checkpoints(self, consumer):
        return len(self._run(sql.CLEAR_CHECKPOINTS, [consumer]).fetchall())

    def insert_lease(self, row):
        self._run(sql.INSERT_LEASE, [row[k] for k in TABLES["leases"]])

    def get_lease(self, consumer, event_id):
        return self._one("leases", sql.GET_LEASE, [consumer, event_id])

    def list_leases(self, consumer=None):
        return self._all("leases", sql.LIST_LEASES, [consumer, consumer])

    def delete_lease(self, consumer, event_id):
        return self._run(sql.DELETE_LEASE, [consumer, event_id]).fetchone() is not None

    def expired_leases(self, now, limit):
        return self._all("leases", sql.EXPIRED_LEASES, [now, check_limit(limit)])

    def put_retry(self, row):
        self._run(sql.PUT_RETRY, [row[k] for k in TABLES["retries"]])

    def get_retry(self, consumer, event_id):
        return self._one("retries", sql.GET_RETRY, [consumer, event_id])

    def delete_retry(self, consumer, event_id):
        return self._run(sql.DELETE_RETRY, [consumer, event_id]).fetchone() is not None

    def list_retries(self, consumer=None):
        return self._all("retries", sql.LIST_RETRIES, [consumer, consumer])

    def insert_dead_letter(self, row):
        self._run(sql.INSERT_DEAD_LETTER, [row[k] for k in TABLES["dead_letters"]])

    def list_dead_letters(self, consumer=None):
        return self._all("dead_letters", sql.LIST_DEAD_LETTERS, [consumer, consumer])


PART = StorePart(
    name="leases", tables=TABLES, timestamp_columns=TIMESTAMP_COLUMNS, tx=LeaseTx,
    memory_tx=LeaseMemoryTx, memory_init=memory_init, memory_rows=MEMORY_ROWS,
    duckdb_tx=LeaseDuckDBTx, duckdb_migrations=sql.MIGRATIONS, duckdb_rows=sql.ALL_ROWS,
)
