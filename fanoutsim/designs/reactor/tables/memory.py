"""The reactor design's tables in memory: the memory adapter of :mod:`.port`."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

from fanoutsim.kernel.store.base import check_limit

from .port import TABLES, UPDATABLE, ReactorTx, check_subscription_changes

# -- the memory adapter -----------------------------------------------------------------
_MAX_ID = "\uffff"  # sorts after every UUID string

# A firing or an execution is kept as a tuple of its columns in TABLES' order
# (a dict per row was 272 bytes, a tuple is 88-104), replaced on update; the
# port's dicts are built from it when a row is read.
_F, _E = TABLES["reactor_firings"], TABLES["workflow_executions"]
F_ID, F_REACTOR, F_TENANT, F_FIRED = 0, 1, 2, 4
E_ID, E_STATUS, E_DISPATCHED = 0, 4, 5


_LIVE = ("pending", "running")  # the statuses a claim or a requeue looks for
_NULL, _MAX = -(2**63), 2**63  # None in an int64 column (no time is that), and its bound


class _Codes(dict[str, int]):
    """A word's code, a new word given the next (its ``words``, by code)."""

    __slots__ = ("words",)

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []

    def __missing__(self, word: str) -> int:
        code = self[word] = len(self.words)
        self.words.append(word)
        return code


class _Finished:
    """The executions no claim or requeue looks for — every status but pending
    and running — as columns. Such a row is read only with the whole table (or,
    rarely, finished again), so it needs no tuple and no dict entry of its
    own (a day's run keeps every row). ``known`` holds their ids, for the
    primary key: a dict of str keys and None values, which the cyclic
    collector stops tracking (a set it would walk, every million ids, on
    every full collection); a workflow, tenant or status is kept as its code."""

    __slots__ = ("ids", "known", "contexts", "codes", "words_of", "times")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.known: dict[str, None] = {}
        self.contexts: list[object] = []
        self.codes = _Codes()
        self.words_of = (array("I"), array("I"), array("I"))  # workflow, tenant, status
        self.times = (array("q"), array("q"), array("q"))  # dispatched_at, claimed_at, finished_at

    def __len__(self) -> int:
        return len(self.ids)

    @staticmethod
    def fits(row: tuple) -> bool:
        """Whether the columns hold ``row`` as it is: its names str, its times int64 or None."""
        d, c, f = row[5], row[6], row[7]
        return (
            type(row[0]) is str
            and type(row[1]) is str
            and type(row[2]) is str
            and type(row[4]) is str
            and (d is None or (type(d) is int and _NULL < d < _MAX))
            and (c is None or (type(c) is int and _NULL < c < _MAX))
            and (f is None or (type(f) is int and _NULL < f < _MAX))
        )

    def append(self, row: tuple) -> None:
        """Keep ``row`` (one that :meth:`fits`) as the last."""
        eid = row[0]
        self.ids.append(eid)
        self.known[eid] = None
        self.contexts.append(row[3])
        codes = self.codes
        wf, tn, st = self.words_of
        wf.append(codes[row[1]])
        tn.append(codes[row[2]])
        st.append(codes[row[4]])
        d, c, f = self.times
        d.append(_NULL if row[5] is None else row[5])
        c.append(_NULL if row[6] is None else row[6])
        f.append(_NULL if row[7] is None else row[7])

    def insert(self, i: int, row: tuple) -> None:
        """Keep ``row`` (one that :meth:`fits`) as the ``i``-th (the undo of ``pop(i)``)."""
        self.ids.insert(i, row[0])
        self.known[row[0]] = None
        self.contexts.insert(i, row[3])
        for col, word in zip(self.words_of, (row[1], row[2], row[4])):
            col.insert(i, self.codes[word])
        for col, v in zip(self.times, row[5:]):
            col.insert(i, _NULL if v is None else v)

    def pop(self, i: int = -1) -> tuple:
        """Take the ``i``-th row out (the last by default): its tuple."""
        eid = self.ids.pop(i)
        del self.known[eid]
        w = self.codes.words
        workflow, tenant, status = (w[col.pop(i)] for col in self.words_of)
        dispatched, claimed, finished = (None if v == _NULL else v for v in [col.pop(i) for col in self.times])
        return (eid, workflow, tenant, self.contexts.pop(i), status, dispatched, claimed, finished)

    def rows(self) -> Iterator[tuple]:
        """Every row's tuple, in the order kept."""
        w = self.codes.words
        wf, tn, st = self.words_of
        for k, eid in enumerate(self.ids):
            times = (None if col[k] == _NULL else col[k] for col in self.times)
            yield (eid, w[wf[k]], w[tn[k]], self.contexts[k], w[st[k]], *times)


class _Stream:
    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: list[tuple[int, str]] = []  # (fired_at, id), sorted


def memory_init(s) -> None:
    """The reactor's tables on a new MemoryStore."""
    s.firings: dict[str, tuple] = {}  # id -> the row's columns
    s.streams: dict[tuple[str, str], _Stream] = {}
    # A subscription row is replaced on update, never changed in place, so a
    # poll pass may go on reading the rows as listed (poll_subs) after later commits.
    s.subs: dict[str, dict] = {}
    s.sub_by_triple: dict[tuple[str, str, str], str] = {}
    s.sub_order: list[str] | None = None
    # the enabled ones' ids in poll order, and their rows: every watermark commit
    # replaces a row, and the next pass takes the rows again, not the order
    s.poll_order: list[str] | None = None
    s.poll_subs: tuple[dict, ...] | None = None
    s.executions: dict[str, tuple] = {}  # id -> the row's columns: the rows pending or running (or that do not fit)
    s.finished_executions = _Finished()  # the others
    s.pending: list[tuple[int, str]] = []


def _index_status(s, row: tuple, old: str | None, new: str | None) -> None:
    """Keep ``pending`` equal to the rows whose status is 'pending' as
    ``row`` goes from status ``old`` to ``new`` (None: no such row)."""
    key = (row[E_DISPATCHED], row[E_ID])
    if old == "pending" and new != "pending":
        del s.pending[bisect_left(s.pending, key)]
    elif new == "pending" and old != "pending":
        insort(s.pending, key)


def _drop_firing(s, fid: str) -> tuple:
    row = s.firings.pop(fid)
    keys = s.streams[(row[F_REACTOR], row[F_TENANT])].keys
    key = (row[F_FIRED], fid)
    del keys[bisect_left(keys, key)]
    return row


def _restore_firing(s, row: tuple) -> None:
    s.firings[row[F_ID]] = row
    insort(s.streams[(row[F_REACTOR], row[F_TENANT])].keys, (row[F_FIRED], row[F_ID]))


def _firing(r: tuple) -> dict:
    """A firing's row as the port reads it (a dict display: cheaper than dict(zip(...)))."""
    return {"id": r[0], "reactor_name": r[1], "tenant_id": r[2], "payload": r[3], "fired_at": r[4], "created_at": r[5]}


def _execution(r: tuple) -> dict:
    """An execution's row as the port reads it."""
    return {
        "id": r[0],
        "workflow_name": r[1],
        "tenant_id": r[2],
        "context": r[3],
        "status": r[4],
        "dispatched_at": r[5],
        "claimed_at": r[6],
        "finished_at": r[7],
    }


def _put_execution(s, row: tuple) -> None:
    """Replace an execution's row (its status index is the caller's)."""
    s.executions[row[E_ID]] = row


def _drop_sub(s, sid: str) -> dict:
    row = s.subs.pop(sid)
    del s.sub_by_triple[(row["reactor_name"], row["workflow_name"], row["tenant_id"])]
    s.sub_order = s.poll_order = s.poll_subs = None
    return row


def _restore_sub(s, row: dict) -> None:
    s.subs[row["id"]] = row
    s.sub_by_triple[(row["reactor_name"], row["workflow_name"], row["tenant_id"])] = row["id"]
    s.sub_order = s.poll_order = s.poll_subs = None


def _put_sub(s, sid: str, row: dict) -> None:
    if row["enabled"] != s.subs[sid]["enabled"]:
        s.poll_order = None
    s.subs[sid] = row
    s.poll_subs = None


def _sub_order(s) -> list[str]:
    if s.sub_order is None:
        s.sub_order = [s.sub_by_triple[t] for t in sorted(s.sub_by_triple, key=lambda t: (t[2], t[0], t[1]))]
    return s.sub_order


class ReactorMemoryTx(ReactorTx):
    """The reactor's methods of the memory adapter's transaction (a mixin of
    :class:`~fanoutsim.kernel.store.memory.MemoryTx`)."""

    __slots__ = ()

    # -- reactor_firings -------------------------------------------------
    def insert_firing(self, row: dict) -> None:
        s = self.s
        fid = self._unique(s.firings, row["id"], "reactor_firings.id")
        # a BLOB reads back as bytes, whatever was written
        kept = (fid, row["reactor_name"], row["tenant_id"], bytes(row["payload"]), row["fired_at"], row["created_at"])
        s.firings[fid] = kept
        stream = s.streams.get((kept[F_REACTOR], kept[F_TENANT]))
        if stream is None:
            stream = s.streams[(kept[F_REACTOR], kept[F_TENANT])] = _Stream()
        key = (kept[F_FIRED], fid)
        insort(stream.keys, key)
        self.undo.append(lambda: _drop_firing(s, fid))

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
        return [_firing(firings[k[1]]) for k in keys[start:end]]

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
            row = _drop_firing(s, fid)
            self.undo.append(lambda row=row: _restore_firing(s, row))
        return [fid for _, fid in doomed]

    def count_firings(self):
        return len(self.s.firings)

    def has_firings_past(self, reactor, tenant, after, after_id=None):
        stream = self.s.streams.get((reactor, tenant))
        if stream is None or not stream.keys:
            return False
        # fetch_firings starts at bisect_right(keys, cursor): a row is there iff the newest is past it
        return after is None or stream.keys[-1] > (after, _MAX_ID if after_id is None else after_id)

    def first_with_firings_past(self, subs, i, compound):
        # has_firings_past inlined: a pass over 10,000 subscriptions asks it 10,000
        # times. The newest key is past the cursor when its fired_at is (ids sort
        # before _MAX_ID), or, for the compound cursor, at the same instant with a
        # greater id: comparing ints, no cursor tuple built per subscription.
        streams = self.s.streams
        for j in range(i, len(subs)):
            sub = subs[j]
            stream = streams.get((sub["reactor_name"], sub["tenant_id"]))
            if stream is None or not stream.keys:
                continue
            newest_at, newest_id = stream.keys[-1]
            after = sub["last_seen_fired_at"]
            if after is None or newest_at > after:
                return j
            if compound and newest_at == after:
                after_id = sub["last_seen_firing_id"]
                if after_id is not None and newest_id > after_id:
                    return j
        return len(subs)

    def has_firings_before(self, cutoff):
        return any(stream.keys and stream.keys[0][0] < cutoff for stream in self.s.streams.values())

    # -- reactor_subscriptions ------------------------------------------
    def get_subscription(self, reactor, workflow, tenant):
        sid = self.s.sub_by_triple.get((reactor, workflow, tenant))
        return None if sid is None else dict(self.s.subs[sid])

    def insert_subscription(self, row):
        s = self.s
        # both keys, like the table's PRIMARY KEY and UNIQUE: a reused id would
        # overwrite a row and leave its old triple pointing at the new one
        triple = (row["reactor_name"], row["workflow_name"], row["tenant_id"])
        self._unique(s.sub_by_triple, triple, "reactor_subscriptions")
        sid = self._unique(s.subs, row["id"], "reactor_subscriptions.id")
        _restore_sub(s, dict(row))
        self.undo.append(lambda: _drop_sub(s, sid))

    def update_subscription(self, sub_id, changes):
        if not UPDATABLE.issuperset(changes):  # (the common case inline: every watermark move)
            check_subscription_changes(changes)  # else a typo would become a new column
        s = self.s
        row = s.subs.get(sub_id)
        if row is None:
            return  # no such row: UPDATE ... WHERE id = ? matches nothing
        new = {**row, **changes}  # a new row: whoever holds the old one keeps it as read
        if "enabled" in changes:
            _put_sub(s, sub_id, new)
        else:  # (_put_sub, inline: the poll order stays)
            s.subs[sub_id] = new
            s.poll_subs = None
        self.undo.append(lambda: _put_sub(s, sub_id, row))

    def delete_subscription(self, sub_id):
        s = self.s
        if sub_id not in s.subs:
            return False
        row = _drop_sub(s, sub_id)
        self.undo.append(lambda: _restore_sub(s, row))
        return True

    def list_subscriptions(self, tenant=None, enabled_only=False):
        s = self.s
        out = []
        for sid in _sub_order(s):
            row = s.subs[sid]
            if (tenant is None or row["tenant_id"] == tenant) and (row["enabled"] or not enabled_only):
                out.append(dict(row))
        return out

    def poll_subscriptions(self):
        # the store's own rows, not copies: none is changed once written (see memory_init)
        s = self.s
        if s.poll_subs is None:
            subs = s.subs
            if s.poll_order is None:
                s.poll_order = [sid for sid in _sub_order(s) if subs[sid]["enabled"]]
            s.poll_subs = tuple(map(subs.__getitem__, s.poll_order))
        return s.poll_subs

    # -- workflow_executions --------------------------------------------
    def insert_execution(self, row):
        s = self.s
        eid = row["id"]
        if eid in s.executions or eid in s.finished_executions.known:  # (_unique, inline: one insert a dispatch)
            raise self._duplicate(f"workflow_executions.id {eid}")
        kept = (
            eid,
            row["workflow_name"],
            row["tenant_id"],
            row["context"],
            row["status"],
            row["dispatched_at"],
            row["claimed_at"],
            row["finished_at"],
        )  # _E's order
        status = kept[E_STATUS]
        done = s.finished_executions
        if status not in _LIVE and done.fits(kept):
            done.append(kept)
            self.undo.append(done.pop)  # (an undo log runs backwards: this row is the last)
            return
        s.executions[eid] = kept
        if status == "pending":
            insort(s.pending, (kept[E_DISPATCHED], eid))

        def undo():
            _index_status(s, kept, status, None)
            del s.executions[eid]

        self.undo.append(undo)

    def has_pending_executions(self):
        return bool(self.s.pending)

    def claim_executions(self, now, limit):
        s = self.s
        taken = s.pending[: check_limit(limit)]
        if not taken:
            return []
        del s.pending[: len(taken)]
        out, before = [], []
        executions = s.executions
        for key in taken:
            row = executions[key[1]]
            before.append(row)
            row = executions[key[1]] = (row[0], row[1], row[2], row[3], "running", row[5], now, row[7])
            out.append(_execution(row))

        def undo():
            for r in before:
                _put_execution(s, r)
            s.pending[:0] = taken  # they were the oldest pending, in order

        self.undo.append(undo)
        return out

    def requeue_running(self):
        s = self.s
        stale = sorted((r[E_DISPATCHED], r[E_ID]) for r in s.executions.values() if r[E_STATUS] == "running")
        before = []
        for key in stale:
            row = s.executions[key[1]]
            before.append(row)
            _put_execution(s, (row[0], row[1], row[2], row[3], "pending", row[5], None, row[7]))
            insort(s.pending, key)

        def undo():
            for r in before:
                _put_execution(s, r)
                s.pending.remove((r[E_DISPATCHED], r[E_ID]))

        self.undo.append(undo)
        return [eid for _, eid in stale]

    def finish_execution(self, execution_id, now, status):
        s = self.s
        row = s.executions.get(execution_id)
        if row is None:
            row = self._unfinish(execution_id)
            if row is None:
                return  # no such row: UPDATE ... WHERE id = ? matches nothing
        new = (row[0], row[1], row[2], row[3], status, row[5], row[6], now)
        _index_status(s, row, row[E_STATUS], status)  # a finished row must not be claimed later
        done = s.finished_executions
        if status not in _LIVE and done.fits(new):
            del s.executions[execution_id]
            done.append(new)

            def undo():
                done.pop()
                _put_execution(s, row)
                _index_status(s, row, status, row[E_STATUS])

        else:
            _put_execution(s, new)

            def undo():
                _put_execution(s, row)
                _index_status(s, row, status, row[E_STATUS])

        self.undo.append(undo)

    def _unfinish(self, execution_id) -> tuple | None:
        """A finished row that is finished again (rare: a second finish of one
        row) goes back among the live rows first: its tuple (None: no such row)."""
        s = self.s
        done = s.finished_executions
        if execution_id not in done.known:
            return None
        i = done.ids.index(execution_id)
        row = s.executions[execution_id] = done.pop(i)

        def undo():
            del s.executions[execution_id]
            done.insert(i, row)

        self.undo.append(undo)
        return row

    def count_executions(self):
        s = self.s
        return len(s.executions) + len(s.finished_executions)


MEMORY_ROWS = {
    "reactor_firings": lambda s: [_firing(r) for r in sorted(s.firings.values(), key=lambda r: (r[F_FIRED], r[F_ID]))],
    "reactor_subscriptions": lambda s: [
        dict(r) for r in sorted(s.subs.values(), key=lambda r: (r["tenant_id"], r["reactor_name"], r["workflow_name"]))
    ],
    "workflow_executions": lambda s: [
        _execution(r)
        for r in sorted(
            [*s.executions.values(), *s.finished_executions.rows()], key=lambda r: (r[E_DISPATCHED], r[E_ID])
        )
    ],
}

# the row displays above spell TABLES' columns in order (checked once, at import)
assert tuple(_firing(_F)) == _F and tuple(_execution(_E)) == _E
