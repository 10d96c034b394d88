"""The outbox design's tables in memory: the memory adapter of :mod:`.port`."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from functools import partial

from fanoutsim.kernel.store.base import check_limit

from .port import TABLES, OutboxTx

_OUTBOX = TABLES["outbox"]


# -- the memory adapter -----------------------------------------------------------------
def memory_init(s) -> None:
    """The outbox's tables on a new MemoryStore."""
    s.outbox: dict[int, dict] = {}
    s.outbox_seqs: list[int] = []  # sorted
    s.outbox_last = 0  # the sequence's last value
    s.cursors: dict[str, int] = {}
    s.parked: dict[tuple[str, int], dict] = {}
    s.deferred: dict[tuple[str, int], int] = {}
    s.pages: dict[str, dict] = {}


def _drop_outbox(s, seq: int) -> dict:
    row = s.outbox.pop(seq)
    del s.outbox_seqs[bisect_left(s.outbox_seqs, seq)]
    return row


def _past(s, after: int, limit: int) -> list[dict]:
    """Up to ``limit`` rows past ``after``: the table's own rows (an outbox row is
    never changed once written; its readers copy what they hand on)."""
    seqs = s.outbox_seqs
    lo = len(seqs) - check_limit(limit) - 1
    # the usual read is near the end of the log (a consumer keeping up): a search of the tail only
    start = bisect_right(seqs, after, lo) if lo > 0 and seqs[lo] <= after else bisect_right(seqs, after)
    outbox = s.outbox
    return [outbox[q] for q in seqs[start : start + limit]]


def _restore_outbox(s, row: dict) -> None:
    s.outbox[row["seq"]] = row
    insort(s.outbox_seqs, row["seq"])


class OutboxMemoryTx(OutboxTx):
    """The outbox's methods of the memory adapter's transaction (a mixin of
    :class:`~fanoutsim.kernel.store.memory.MemoryTx`)."""

    __slots__ = ()

    def reserve_outbox_seq(self):
        s = self.s
        s.outbox_last += 1

        def undo():
            s.outbox_last -= 1

        self.undo.append(undo)
        return s.outbox_last

    def insert_outbox(self, row):
        s = self.s
        seq = self._unique(s.outbox, row["seq"], "outbox.seq")
        s.outbox[seq] = {k: row[k] for k in _OUTBOX}  # the table's columns, in order
        seqs = s.outbox_seqs
        if not seqs or seqs[-1] < seq:
            seqs.append(seq)  # the usual commit: the newest seq
        else:
            insort(seqs, seq)  # a late commit fills its gap
        self.undo.append(partial(_drop_outbox, s, seq))

    def fetch_outbox(self, after, limit):
        return _past(self.s, after, limit)

    def has_outbox_past(self, after):
        seqs = self.s.outbox_seqs
        return bool(seqs) and seqs[-1] > after

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
            row = _drop_outbox(s, q)
            self.undo.append(lambda row=row: _restore_outbox(s, row))
        return doomed

    def get_cursor(self, consumer):
        return self.s.cursors.get(consumer)

    def past_cursor(self, consumer, limit):
        s = self.s
        cursor = s.cursors.get(consumer)
        if cursor is None:
            return None, [], None
        seqs = s.outbox_seqs
        rows = _past(s, cursor, limit) if seqs and seqs[-1] > cursor else []
        return cursor, rows, (self.next_due(consumer) if s.deferred else None)

    def set_cursor(self, consumer, seq):
        self._put(self.s.cursors, consumer, seq)

    def list_cursors(self):
        c = self.s.cursors
        return [{"consumer": k, "seq": c[k]} for k in sorted(c)]

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
        return [{"consumer": consumer, "seq": seq, "due_at": at} for at, seq in due[: check_limit(limit)]]

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


MEMORY_ROWS = {
    "outbox": lambda s: [dict(s.outbox[q]) for q in s.outbox_seqs],
    "cursors": lambda s: [{"consumer": k, "seq": s.cursors[k]} for k in sorted(s.cursors)],
    "parked": lambda s: [dict(s.parked[k]) for k in sorted(s.parked)],
    "deferred": lambda s: [{"consumer": c, "seq": q, "due_at": s.deferred[(c, q)]} for c, q in sorted(s.deferred)],
    "pages": lambda s: [dict(s.pages[k]) for k in sorted(s.pages)],
}
