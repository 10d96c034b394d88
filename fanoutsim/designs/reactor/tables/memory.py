"""The reactor design's tables in memory: the memory adapter of :mod:`.port`."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Iterator

from fanoutsim.kernel.packing import HashedStrs, pack
from fanoutsim.kernel.store.base import check_limit

from .port import TABLES, UPDATABLE, ReactorTx, check_subscription_changes

# -- the memory adapter -----------------------------------------------------------------
_MAX_ID = "\uffff"  # sorts after every UUID string

# A live execution is kept as a tuple of its columns in TABLES' order (a dict
# per row was 272 bytes, a tuple is 88-104), replaced on update; a firing and a
# finished execution in columns (_Stream, _Finished). The port's dicts are
# built from them when a row is read.
_F, _E = TABLES["reactor_firings"], TABLES["workflow_executions"]
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


class _Chunk:
    """Finished rows sealed: their ids and contexts packed (pickled, compressed),
    the codes of their workflow, tenant and status and their three times as
    arrays, each allocated once at its size."""

    __slots__ = ("rows", "packed", "codes", "times")

    def __init__(self, rows: list[tuple], codes: _Codes) -> None:
        self.rows = len(rows)
        eids, workflows, tenants, contexts, statuses, *times = zip(*rows)
        self.packed = pack((list(eids), list(contexts)))
        self.codes = tuple(array("I", map(codes.__getitem__, col)) for col in (workflows, tenants, statuses))
        self.times = tuple(
            array("q", col if None not in col else [_NULL if t is None else t for t in col]) for col in times
        )

    def tuples(self, words: list[str]) -> list[tuple]:
        """The rows, as their tuples again."""
        eids, contexts = self.packed.columns()
        wf, tn, st = ([words[c] for c in col] for col in self.codes)
        d, c, f = ([None if t == _NULL else t for t in col] for col in self.times)
        return list(zip(eids, wf, tn, contexts, st, d, c, f))


class _Finished:
    """The executions no claim or requeue looks for — every status but pending
    and running. Such a row is read only with the whole table (or, rarely,
    finished again), so it needs no dict entry of its own (a day's run keeps
    every row): the newest are kept as their tuples (``head``, their ids in
    ``recent``), the others sealed in chunks (:class:`_Chunk`) of
    :attr:`CHUNK` rows, their ids' hashes in ``sealed_ids``: a dict of the ids
    took about 120 bytes an id, and kept every id alive. Both serve the
    primary key (:meth:`has`)."""

    __slots__ = ("head", "recent", "chunks", "sealed", "sealed_ids", "codes")
    CHUNK = 4096

    def __init__(self) -> None:
        self.head: list[tuple] = []
        self.recent: dict[str, None] = {}
        self.chunks: list[_Chunk] = []
        self.sealed = 0  # rows in the chunks
        self.sealed_ids = HashedStrs()
        self.codes = _Codes()

    def __len__(self) -> int:
        return self.sealed + len(self.head)

    def has(self, eid: str) -> bool:
        """Whether a row has id ``eid``: a row of the head, or one whose hash
        is among the sealed ones and (rarely asked: a duplicate id, or a
        second finish) a sealed row says so."""
        if eid in self.recent:
            return True
        if not self.sealed_ids.might_hold(eid):
            return False
        words = self.codes.words
        return any(row[0] == eid for chunk in self.chunks for row in chunk.tuples(words))

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
        head = self.head
        head.append(row)
        self.recent[row[0]] = None
        if len(head) >= self.CHUNK:
            self.chunks.append(_Chunk(head, self.codes))
            self.sealed += len(head)
            self.sealed_ids.update(self.recent)
            self.head, self.recent = [], {}

    def _unseal_from(self, i: int) -> int:
        """The chunk that holds row ``i`` (0 <= i < len) and those after it
        back as tuples in the head; ``i`` as an index into the head."""
        while i < self.sealed:
            rows = self.chunks.pop().tuples(self.codes.words)
            self.sealed -= len(rows)
            self.head[:0] = rows
            for row in rows:
                self.sealed_ids.remove(row[0])
                self.recent[row[0]] = None
        return i - self.sealed

    def insert(self, i: int, row: tuple) -> None:
        """Keep ``row`` (one that :meth:`fits`) as the ``i``-th (the undo of ``pop(i)``)."""
        self.head.insert(self._unseal_from(i) if i < len(self) else len(self.head), row)
        self.recent[row[0]] = None

    def pop(self, i: int = -1) -> tuple:
        """Take the ``i``-th row out (the last by default): its tuple."""
        k = i + len(self) if i < 0 else i
        row = self.head.pop(self._unseal_from(k))
        del self.recent[row[0]]
        return row

    def index(self, eid: str) -> int:
        return next(k for k, row in enumerate(self.rows()) if row[0] == eid)

    def rows(self) -> Iterator[tuple]:
        """Every row's tuple, in the order kept."""
        for chunk in self.chunks:
            yield from chunk.tuples(self.codes.words)
        yield from self.head


class _Stream:
    """One stream's firings (a reactor's, for one tenant) as columns, in
    ``(fired_at, id)`` order: a tuple per row and another for its sort key took
    about 150 bytes a firing, and the collector walked them. The times are
    int64 columns while every time fits one (else lists, which hold any int)."""

    __slots__ = ("key", "fired", "ids", "payloads", "created", "newest_at")

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key  # (reactor, tenant): the one tuple every firing's entry in s.firings names
        self.fired: array[int] | list[int] = array("q")
        self.ids: list[str] = []
        self.payloads: list[bytes] = []
        self.created: array[int] | list[int] = array("q")
        # the last fired_at (None: no firing), as an int a poll pass reads for each
        # subscription without making one from the array
        self.newest_at: int | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def newest(self) -> tuple[int, str]:
        return self.newest_at, self.ids[-1]

    def past(self, at: int, after_id: str = _MAX_ID) -> int:
        """The index of the first firing past ``(at, after_id)``."""
        fired = self.fired
        end = bisect_right(fired, at)  # past every firing of that instant
        if after_id == _MAX_ID:
            return end
        start = end  # the instant's first firing: nearly always the one a cursor saw last
        if start and fired[start - 1] == at:
            start -= 1
            if start and fired[start - 1] == at:
                start = bisect_left(fired, at, 0, start)
        return bisect_right(self.ids, after_id, start, end)

    def insert(self, fid: str, payload: bytes, fired_at: int, created_at: int) -> int:
        """Keep a firing in its place (nearly always the last); returns its index."""
        fired, ids = self.fired, self.ids
        n = len(ids)
        last = fired[-1] if n else None
        i = n if not n or fired_at > last or (fired_at == last and fid > ids[-1]) else self.past(fired_at, fid)
        if type(fired) is array and not (type(fired_at) is int is type(created_at)):
            self._widen()
        try:
            self.fired.insert(i, fired_at)
            try:
                self.created.insert(i, created_at)
            except OverflowError:
                del self.fired[i]
                raise
        except OverflowError:  # past int64: the times become lists
            self._widen()
            self.fired.insert(i, fired_at)
            self.created.insert(i, created_at)
        ids.insert(i, fid)
        self.payloads.insert(i, payload)
        if i == n:
            self.newest_at = fired_at
        return i

    def _widen(self) -> None:
        self.fired, self.created = list(self.fired), list(self.created)

    def row(self, i: int) -> dict:
        """The ``i``-th firing as the port reads it."""
        return {
            "id": self.ids[i],
            "reactor_name": self.key[0],
            "tenant_id": self.key[1],
            "payload": self.payloads[i],
            "fired_at": self.fired[i],
            "created_at": self.created[i],
        }

    def cut(self, start: int, stop: int) -> tuple[list, list, list, list]:
        """Take rows ``start:stop`` out: their columns (what :meth:`paste` puts back)."""
        cols = (self.fired, self.ids, self.payloads, self.created)
        out = tuple(list(col[start:stop]) for col in cols)
        for col in cols:
            del col[start:stop]
        self.newest_at = self.fired[-1] if self.ids else None
        return out  # type: ignore[return-value]

    def paste(self, start: int, cols: tuple[list, list, list, list]) -> None:
        """Put rows a :meth:`cut` took back at ``start``."""
        for col, values in zip((self.fired, self.ids, self.payloads, self.created), cols):
            col[start:start] = type(col)("q", values) if type(col) is array else values
        self.newest_at = self.fired[-1] if self.ids else None


def memory_init(s) -> None:
    """The reactor's tables on a new MemoryStore."""
    # id -> its stream's key (reactor, tenant): a dict the collector stops
    # tracking, as it holds only str and tuples of str
    s.firings: dict[str, tuple[str, str]] = {}
    s.streams: dict[tuple[str, str], _Stream] = {}
    # A subscription row is replaced on update, never changed in place, so a
    # poll pass may go on reading the rows as listed (poll_subs) after later commits.
    s.subs: dict[str, dict] = {}
    s.sub_by_triple: dict[tuple[str, str, str], str] = {}
    s.sub_order: list[str] | None = None
    # the enabled ones' ids in poll order, and their rows: a watermark commit
    # replaces its row there (in a copy, once a pass holds the list), so the
    # next pass takes the rows without listing them again
    s.poll_order: list[str] | None = None
    s.poll_subs: list[dict] | None = None
    s.poll_pos: dict[str, int] = {}  # id -> its place in poll_subs
    s.poll_shared = False  # a pass was given poll_subs: change a copy
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
    """Replace a subscription's row, in the poll list too (in a copy, once a
    pass holds the list); a change of which are enabled lists them again."""
    if row["enabled"] != s.subs[sid]["enabled"]:
        s.poll_order = s.poll_subs = None
    s.subs[sid] = row
    listed = s.poll_subs
    if listed is not None and sid in s.poll_pos:
        if s.poll_shared:  # a pass reads the list as it was given
            listed = s.poll_subs = list(listed)
            s.poll_shared = False
        listed[s.poll_pos[sid]] = row


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
        key = (row["reactor_name"], row["tenant_id"])
        stream = s.streams.get(key)
        if stream is None:
            stream = s.streams[key] = _Stream(key)
        s.firings[fid] = stream.key
        # a BLOB reads back as bytes, whatever was written
        i = stream.insert(fid, bytes(row["payload"]), row["fired_at"], row["created_at"])

        def undo() -> None:  # (the undo log runs backwards: the row is at i again)
            del s.firings[fid]
            stream.cut(i, i + 1)

        self.undo.append(undo)

    def fetch_firings(self, reactor, tenant, after, limit, after_id=None, until=None):
        limit = check_limit(limit)
        stream = self.s.streams.get((reactor, tenant))
        if stream is None:
            return []
        # past the cursor: every firing of its instant, or only those past the compound cursor's id
        start = 0 if after is None else stream.past(after, _MAX_ID if after_id is None else after_id)
        end = start + limit
        if until is not None:
            end = min(end, stream.past(until))
        fired, ids = stream.fired, stream.ids
        reactor, tenant = stream.key
        cols = zip(ids[start:end], stream.payloads[start:end], fired[start:end], stream.created[start:end])
        return [
            {"id": i, "reactor_name": reactor, "tenant_id": tenant, "payload": p, "fired_at": f, "created_at": c}
            for i, p, f, c in cols
        ]

    def prune_firings(self, cutoff, conservative, limit=None):
        s = self.s
        if limit is not None:
            check_limit(limit)
        doomed: list[tuple[int, str, tuple[str, str]]] = []
        for key, stream in s.streams.items():
            bound = cutoff - 1
            if conservative:
                for sub in s.subs.values():
                    if sub["enabled"] and (sub["reactor_name"], sub["tenant_id"]) == key:
                        wm = sub["last_seen_fired_at"]
                        if wm is None:
                            bound = None
                            break
                        bound = min(bound, wm)
            if bound is not None:
                n = stream.past(bound)
                doomed.extend(zip(stream.fired[:n], stream.ids[:n], [key] * n))
        doomed.sort()
        if limit is not None:
            doomed = doomed[:limit]
        # each stream's doomed firings are its oldest: a prefix of its columns
        for key, n in Counter(k for _, _, k in doomed).items():
            self._cut_firings(s.streams[key], n)
        return [fid for _, fid, _ in doomed]

    def _cut_firings(self, stream: _Stream, n: int) -> None:
        """Delete a stream's ``n`` oldest firings."""
        s = self.s
        cols = stream.cut(0, n)
        for fid in cols[1]:
            del s.firings[fid]

        def undo() -> None:
            stream.paste(0, cols)
            s.firings.update(dict.fromkeys(cols[1], stream.key))

        self.undo.append(undo)

    def count_firings(self):
        return len(self.s.firings)

    def has_firings_past(self, reactor, tenant, after, after_id=None):
        stream = self.s.streams.get((reactor, tenant))
        if stream is None or not stream.ids:
            return False
        # fetch_firings starts past the cursor: a row is there iff the newest is past it
        return after is None or stream.newest() > (after, _MAX_ID if after_id is None else after_id)

    def first_with_firings_past(self, subs, i, compound):
        # has_firings_past inlined: a pass over 10,000 subscriptions asks it 10,000
        # times. The newest firing is past the cursor when its fired_at is (ids sort
        # before _MAX_ID), or, for the compound cursor, at the same instant with a
        # greater id: comparing ints, no cursor tuple built per subscription.
        streams = self.s.streams
        for j in range(i, len(subs)):
            sub = subs[j]
            stream = streams.get((sub["reactor_name"], sub["tenant_id"]))
            if stream is None or (newest_at := stream.newest_at) is None:
                continue
            after = sub["last_seen_fired_at"]
            if after is None or newest_at > after:
                return j
            if compound and newest_at == after:
                after_id = sub["last_seen_firing_id"]
                if after_id is not None and stream.ids[-1] > after_id:
                    return j
        return len(subs)

    def has_firings_before(self, cutoff):
        return any(stream.ids and stream.fired[0] < cutoff for stream in self.s.streams.values())

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
        _put_sub(s, sub_id, {**row, **changes})  # a new row: whoever holds the old one keeps it as read
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
            s.poll_subs = list(map(subs.__getitem__, s.poll_order))
            s.poll_pos = {sid: i for i, sid in enumerate(s.poll_order)}
        s.poll_shared = True  # the caller reads it: the next change is made to a copy
        return s.poll_subs

    # -- workflow_executions --------------------------------------------
    def insert_execution(self, row):
        s = self.s
        eid = row["id"]
        if eid in s.executions or s.finished_executions.has(eid):  # (_unique, inline: one insert a dispatch)
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
        if not done.has(execution_id):
            return None
        i = done.index(execution_id)
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
    "reactor_firings": lambda s: sorted(
        (stream.row(i) for stream in s.streams.values() for i in range(len(stream))),
        key=lambda r: (r["fired_at"], r["id"]),
    ),
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
_probe = _Stream(("", ""))
_probe.insert("", b"", 0, 0)
assert tuple(_probe.row(0)) == _F and tuple(_execution(_E)) == _E
del _probe
