"""The reactor design's tables in SQL: the DuckDB adapter of :mod:`.port` (PostgreSQL runs the
same statements through the kernel's dialect layer); its statements are :mod:`.statements`."""

from __future__ import annotations

import re
from bisect import bisect_right, insort

from fanoutsim.kernel.store.base import check_limit
from fanoutsim.kernel.store.base import row_of as _row
from fanoutsim.kernel.store.sql import fits_timestamp

from . import statements as sql
from .memory import _MAX_ID
from .port import TABLES, TIMESTAMP_COLUMNS, ReactorTx, check_subscription_changes

# -- the DuckDB adapter ---------------------------------------------------------------
_F, _S, _E = TABLES["reactor_firings"], TABLES["reactor_subscriptions"], TABLES["workflow_executions"]


# The adapter's hints (see DuckDBTx): bounds of the committed rows that let a
# step skip a statement that cannot find anything. None: not known yet.
_HEADS = "reactor.heads"  # (reactor, tenant) -> an upper bound of its newest (fired_at, id)
_OLDEST = "reactor.oldest"  # a lower bound of the oldest fired_at (_NO_FIRING: none)
_PENDING = "reactor.pending"  # False: no execution is pending; True: some may be
_SUBS = "reactor.subs"  # every subscription as last read, kept in step with committed updates
_READS = "reactor.reads"  # (reactor, tenant) -> its last fetch and the firings committed since (_Read)
_QUEUE = "reactor.queue"  # the pending executions: (their (dispatched_at, id) in order, id -> row)
_NO_FIRING = 2**63

# What SQL gives back for each column an update may set: an update whose
# values are all of these types is applied to the subscriptions hint as is;
# any other value (an int for a bool, an upper-case UUID) drops the hint.
_UUID = "uuid"
_SUB_TYPES = {
    "enabled": bool,
    "predicate": str,
    "last_seen_fired_at": int,
    "last_seen_firing_id": _UUID,
    "predicate_error_count": int,
    "predicate_error_firing_id": _UUID,
    "last_predicate_error": str,
    "predicate_degraded": bool,
    "created_at": int,
    "updated_at": int,
}


def _as_read(column: str, value) -> bool:
    """Whether ``value`` is exactly what reading ``column`` back would give."""
    if value is None:
        return True
    kind = _SUB_TYPES.get(column)
    if kind is _UUID:
        return _is_uuid_text(value)
    return kind is not None and type(value) is kind


class _Read:
    """A stream's rows past ``cursor`` in fetch order: a prefix of them, or all
    of them (``complete``), as last fetched and kept in step with the firings
    this store committed since."""

    __slots__ = ("cursor", "rows", "complete")

    def __init__(self, cursor: tuple | None, rows: list[dict], complete: bool) -> None:
        self.cursor, self.rows, self.complete = cursor, rows, complete

    def add(self, row: dict) -> None:
        """A committed firing of the stream. Past the cursor it joins the rows
        in order; a prefix stays a prefix unless the firing sorts after it
        (then it is not known whether rows lie between)."""
        key = _fetch_key(row)
        if self.cursor is not None and key <= self.cursor:
            return
        rows = self.rows
        if self.complete or (rows and key < _fetch_key(rows[-1])):
            insort(rows, row, key=_fetch_key)


_DEAD_ROWS = 4096  # rows before the cursor a read keeps before it forgets them


def _from_read(read: _Read | None, cursor: tuple | None, limit: int) -> list[dict] | None:
    """A fetch of ``limit`` rows past ``cursor`` answered from ``read`` (None:
    it cannot be): rows past a cursor at or after the read's are its rows past
    the cursor — enough of them, or all there are (a complete read). Rows
    far behind the cursor asked for are dropped: a slower subscription then
    reads SQL again, which makes a new read from its own cursor."""
    if read is None:
        return None
    if read.cursor is not None and (cursor is None or cursor < read.cursor):
        return None
    rows = read.rows
    start = 0 if cursor is None else bisect_right(rows, cursor, key=_fetch_key)
    if len(rows) - start >= limit or read.complete:
        got = [dict(r) for r in rows[start : start + limit]]
        if start > _DEAD_ROWS:
            del rows[:start]
            read.cursor = cursor
        return got
    return None


# the exact type of each column (but the id) a row read back holds
_FIRING_TYPES = {"reactor_name": str, "tenant_id": str, "payload": bytes, "fired_at": int, "created_at": int}
_EXECUTION_TYPES = {"workflow_name": str, "tenant_id": str, "context": str, "status": str, "dispatched_at": int}


def _row_as_read(row: dict, types: dict[str, type]) -> bool:
    """Whether an inserted row is exactly what reading it back would give: a
    UUID's text for its id, each column of ``types`` of exactly that type."""
    return _is_uuid_text(row["id"]) and all(type(row[c]) is t for c, t in types.items())


def _firing_as_read(row: dict) -> bool:
    """Whether an inserted firing is exactly what reading it back would give."""
    return _row_as_read(row, _FIRING_TYPES)


def _fetch_key(row: dict) -> tuple[int, str]:
    return row["fired_at"], row["id"]


_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _is_uuid_text(value) -> bool:
    """The text DuckDB gives back for a UUID column (lower case, hyphenated)."""
    return type(value) is str and _UUID_TEXT.fullmatch(value) is not None


def _execution_as_read(row: dict) -> bool:
    """Whether an inserted execution is exactly what reading it back would give."""
    return _row_as_read(row, _EXECUTION_TYPES) and all(
        row[c] is None or type(row[c]) is int for c in ("claimed_at", "finished_at")
    )


def _converts(texts, stamps) -> bool:
    """Whether a row that reads back as inserted also converts without fail:
    its text is ASCII and its timestamps bind as datetimes (None: NULL). With
    that, the primary key is the one thing that can refuse its insert."""
    return all(t.isascii() for t in texts) and all(us is None or fits_timestamp(us) for us in stamps)


_CLAIM_IDS: dict[int, str] = {}


def _claim_ids(n: int) -> str:
    """CLAIM_EXECUTION_IDS for ``n`` ids (one statement text per count)."""
    statement = _CLAIM_IDS.get(n)
    if statement is None:
        statement = _CLAIM_IDS[n] = sql.CLAIM_EXECUTION_IDS.format(", ".join("?" * n))
    return statement


def _past(head: tuple[int, str] | None, after: int | None, after_id: str | None) -> bool:
    """Whether a stream whose newest key is ``head`` has a firing past the cursor."""
    if head is None:
        return False
    return after is None or head > (after, _MAX_ID if after_id is None else after_id)


class ReactorDuckDBTx(ReactorTx):
    """The reactor's methods of the DuckDB adapter's transaction (a mixin of
    :class:`~fanoutsim.kernel.store.duckdb.DuckDBTx`).

    The ``has_*`` questions are answered from hints when it can: each stream's
    newest firing (an upper bound: raised by each committed insert, never
    lowered by a prune), the oldest firing (a lower bound) and whether anything
    may be pending. They are loaded by one statement the first time they are
    asked for, and changed only after a commit; a transaction that has written
    asks SQL, since its own rows are not in them yet.

    Where the store keeps hints past a transaction (one process owns a DuckDB
    database), reads are also answered from what was last read: the
    subscriptions (updated in place by each committed update), each stream's
    last fetch (which the firings committed since join, until a prune), so
    that a stream's subscriptions poll without a statement once it has been
    read, and the pending executions, so that a claim updates rows by id."""

    __slots__ = ()

    def insert_firing(self, row):
        as_read = _firing_as_read(row)
        new = as_read and _converts((row["reactor_name"], row["tenant_id"]), (row["fired_at"], row["created_at"]))
        self._insert_new(sql.INSERT_FIRING, [row[k] for k in _F], sql.FIRING_KEYS, row["id"] if new else None)
        hints, stream, key = self.hints, (row["reactor_name"], row["tenant_id"]), (row["fired_at"], str(row["id"]))
        kept = dict(row) if as_read else None  # what the stream's last read gains

        def committed():
            heads = hints.get(_HEADS)
            if heads is not None:
                head = heads.get(stream)
                if head is None or key > head:
                    heads[stream] = key
            oldest = hints.get(_OLDEST)
            if oldest is not None and key[0] < oldest:
                hints[_OLDEST] = key[0]
            reads = hints.get(_READS)
            read = reads.get(stream) if reads else None
            if read is not None:
                if kept is not None:
                    read.add(kept)
                else:
                    reads.pop(stream)

        self._on_commit(committed)

    def has_firings_past(self, reactor, tenant, after, after_id=None):
        if self.begun:
            return self._run(
                sql.HAS_FIRINGS_PAST, [reactor, tenant, after, after, after, after_id, after_id]
            ).fetchone()[0]
        heads = self.hints.get(_HEADS)
        if heads is None:  # the id of the newest is not read: _MAX_ID bounds it
            heads = self.hints[_HEADS] = {(r, t): (at, _MAX_ID) for r, t, at in self._run(sql.STREAM_HEADS).fetchall()}
        return _past(heads.get((reactor, tenant)), after, after_id)

    def has_firings_before(self, cutoff):
        if self.begun:
            return self._run(sql.HAS_FIRINGS_BEFORE, [cutoff]).fetchone()[0]
        oldest = self.hints.get(_OLDEST)
        if oldest is None:
            found = self._run(sql.OLDEST_FIRING).fetchone()[0]
            oldest = self.hints[_OLDEST] = _NO_FIRING if found is None else found
        return oldest < cutoff

    def fetch_firings(self, reactor, tenant, after, limit, after_id=None, until=None):
        check_limit(limit)
        reuse = until is None and not self.begun and self.keeps_hints
        if reuse:
            cursor = None if after is None else (after, _MAX_ID if after_id is None else after_id)
            reads = self.hints.get(_READS)
            if reads is None:
                reads = self.hints[_READS] = {}
            got = _from_read(reads.get((reactor, tenant)), cursor, limit)
            if got is not None:
                return got
        if after_id is not None or until is not None:
            rows = self._run(
                sql.FETCH_FIRINGS_CURSOR,
                [reactor, tenant, after, after, after, after_id, after_id, until, until, limit],
            ).fetchall()
        elif after is None:
            rows = self._run(sql.FETCH_FIRINGS_ALL, [reactor, tenant, limit]).fetchall()
        else:
            rows = self._run(sql.FETCH_FIRINGS_AFTER, [reactor, tenant, after, limit]).fetchall()
        rows = [_row(_F, r) for r in rows]
        if reuse:  # committed rows, read outside any write: what a later fetch would read
            reads[(reactor, tenant)] = _Read(cursor, rows, len(rows) < limit)
            return [dict(r) for r in rows]
        return rows

    def prune_firings(self, cutoff, conservative, limit=None):
        limit = 2**62 if limit is None else check_limit(limit)
        rows = self._run(sql.PRUNE_FIRINGS, [cutoff, conservative, limit]).fetchall()
        if not conservative and len(rows) < limit:  # every firing older than cutoff is gone
            hints = self.hints

            def committed():
                oldest = hints.get(_OLDEST)
                if oldest is not None and oldest < cutoff:
                    hints[_OLDEST] = cutoff

            self._on_commit(committed)
        if rows:
            hints = self.hints
            self._on_commit(lambda: hints.pop(_READS, None))
            self._keys_gone(sql.FIRING_KEYS, [fid for fid, _ in rows])
        return [fid for _, fid in sorted((at, fid) for fid, at in rows)]

    def count_firings(self):
        return self._run(sql.COUNT_FIRINGS).fetchone()[0]

    def count_executions(self):
        return self._run(sql.COUNT_EXECUTIONS).fetchone()[0]

    def lock_subscriptions(self):
        if self.row_locks:  # PostgreSQL: other processes subscribe too
            self._run(sql.LOCK_SUBSCRIPTIONS)

    def get_subscription(self, reactor, workflow, tenant):
        r = self._run(sql.GET_SUBSCRIPTION, [reactor, workflow, tenant]).fetchone()
        return None if r is None else _row(_S, r)

    def insert_subscription(self, row):
        self._run(sql.INSERT_SUBSCRIPTION, [row[k] for k in _S])
        self._subscriptions_changed()

    def update_subscription(self, sub_id, changes):
        check_subscription_changes(changes)
        cols = tuple(changes)
        if not cols:  # "SET" with nothing to set is not SQL; after a failed write, refused all the same
            self._refuse_if_failed()
            return
        self._hold(sql.update_subscription(cols, TIMESTAMP_COLUMNS), [*changes.values(), sub_id])
        if not all(_as_read(c, v) for c, v in changes.items()):
            self._subscriptions_changed()
            return
        hints, changes = self.hints, dict(changes)

        def committed():  # the row as SQL would now read it
            subs = hints.get(_SUBS)
            row = None if subs is None else subs[1].get(sub_id)
            if row is not None:
                row.update(changes)

        self._on_commit(committed)

    def delete_subscription(self, sub_id):
        gone = self._run(sql.DELETE_SUBSCRIPTION, [sub_id]).fetchone() is not None
        self._subscriptions_changed()
        return gone

    def list_subscriptions(self, tenant=None, enabled_only=False):
        if self.begun:  # this transaction's own writes are not in the hint
            rows = self._run(sql.LIST_SUBSCRIPTIONS, [tenant, tenant, enabled_only]).fetchall()
            return [_row(_S, r) for r in rows]
        subs = self.hints.get(_SUBS)
        if subs is None:
            rows = [_row(_S, r) for r in self._run(sql.LIST_SUBSCRIPTIONS, [None, None, False]).fetchall()]
            subs = self.hints[_SUBS] = (rows, {r["id"]: r for r in rows})
        return [
            dict(r)
            for r in subs[0]
            if (tenant is None or r["tenant_id"] == tenant) and (r["enabled"] or not enabled_only)
        ]

    def _subscriptions_changed(self) -> None:
        hints = self.hints
        self._on_commit(lambda: hints.pop(_SUBS, None))

    def _pending(self, pending: bool) -> None:
        """Once this commits, ``pending`` is what the hint says."""
        hints = self.hints
        self._on_commit(lambda: hints.__setitem__(_PENDING, pending))

    def _queue_changed(self) -> None:
        """Once this commits, the pending executions are read again when next claimed."""
        hints = self.hints
        self._on_commit(lambda: hints.pop(_QUEUE, None))

    def insert_execution(self, row):
        as_read = _execution_as_read(row)
        new = as_read and _converts(
            (row["workflow_name"], row["tenant_id"], row["context"], row["status"]),
            (row["dispatched_at"], row["claimed_at"], row["finished_at"]),
        )
        self._insert_new(sql.INSERT_EXECUTION, [row[k] for k in _E], sql.EXECUTION_KEYS, row["id"] if new else None)
        if row["status"] != "pending":
            return
        self._pending(True)
        if not as_read:
            self._queue_changed()
            return
        hints, key, row = self.hints, (row["dispatched_at"], row["id"]), dict(row)

        def committed():
            queue = hints.get(_QUEUE)
            if queue is not None:
                insort(queue[0], key)
                queue[1][key[1]] = row

        self._on_commit(committed)

    def requeue_running(self):
        rows = self._run(sql.REQUEUE_RUNNING).fetchall()
        if rows:
            self._pending(True)
            self._queue_changed()
        return [eid for _, eid in sorted((at, eid) for eid, at in rows)]

    def has_pending_executions(self):
        if self.begun:
            return self._run(sql.HAS_PENDING_EXECUTIONS).fetchone()[0]
        pending = self.hints.get(_PENDING)
        if pending is None:
            pending = self.hints[_PENDING] = bool(self._run(sql.HAS_PENDING_EXECUTIONS).fetchone()[0])
        return pending

    def claim_executions(self, now, limit):
        check_limit(limit)
        if self.keeps_hints and not self.begun:
            rows = self._claim_queued(now, limit)
        else:  # this transaction's own writes are not in the hint
            rows = [_row(_E, r) for r in self._run(sql.CLAIM_EXECUTIONS, [now, limit]).fetchall()]
            rows.sort(key=lambda r: (r["dispatched_at"], r["id"]))
            if self.keeps_hints:
                self._queue_changed()
        if len(rows) < limit:  # it took every pending row
            self._pending(False)
        return rows

    def _claim_queued(self, now, limit) -> list[dict]:
        """The claim, by the ids of the oldest pending executions as the hint
        holds them: the UPDATE finds its rows by key and returns nothing (the
        subquery's scan and ``RETURNING`` were most of a claim's cost)."""
        hints = self.hints
        queue = hints.get(_QUEUE)
        if queue is None:
            pending = [_row(_E, r) for r in self._run(sql.PENDING_EXECUTIONS).fetchall()]
            queue = hints[_QUEUE] = ([(r["dispatched_at"], r["id"]) for r in pending], {r["id"]: r for r in pending})
        keys = queue[0][:limit]
        if not keys:
            return []
        ids = [eid for _, eid in keys]

        def found_all(result) -> None:  # never fails: every write to the table keeps the hint or drops it
            claimed = result.fetchone()[0]
            if claimed != len(ids):
                hints.pop(_QUEUE, None)
                raise RuntimeError(
                    f"the pending-executions hint is out of step with the table: claimed {claimed} of {len(ids)}"
                )

        # held: a claim is mostly its transaction's one write, then sent alone
        self._hold(_claim_ids(len(ids)), [now, *ids], check=found_all)
        rows = queue[1]
        out = [{**rows[eid], "status": "running", "claimed_at": now} for eid in ids]

        def committed():
            q = hints.get(_QUEUE)
            if q is queue:  # nothing dropped it since: its first keys are these
                del q[0][: len(ids)]
                for eid in ids:
                    del q[1][eid]

        self._on_commit(committed)
        return out

    def finish_execution(self, execution_id, now, status):
        self._hold(sql.FINISH_EXECUTION, [status, now, execution_id])
        if status == "pending":
            self._pending(True)
            self._queue_changed()
            return
        hints = self.hints

        def committed():  # a pending row finished without a claim leaves the queue
            queue = hints.get(_QUEUE)
            if queue is not None and execution_id in queue[1]:
                hints.pop(_QUEUE)

        self._on_commit(committed)
