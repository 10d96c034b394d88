"""The write path: a domain change and its outbox row, in one transaction.

``commit`` upserts a page and appends ``outbox(seq, ts, topic, kind, ref,
due_at)`` in the same transaction, so the change and the fact that it happened
cannot split: a crash between them (``commit.after_change_before_outbox``)
rolls both back. Only after the commit is the hint sent — the seq, nothing
else — so a crash at ``commit.before_notify`` leaves a committed row that no
hint announces; the safety poll finds it. Over PostgreSQL on the wall clock the
hint is a real ``pg_notify`` in the commit's own transaction instead
(``notify_in_tx``): PostgreSQL delivers it at COMMIT, and not at all if the
transaction rolls back.

The seq is drawn from the log's sequence *before* the transaction that inserts
it, as a Postgres ``nextval`` is: seqs are assigned in reserve order but become
visible in commit order. :func:`reserve` alone is what a slow writer does
first; :func:`commit` with that ``seq`` is its late commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.validate import is_whole

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.steps import Engine


def reserve(e: Engine, now: int) -> int:
    """Take the next seq now (it is a gap until a commit fills it)."""
    with e.store.transaction() as tx:
        seq = tx.reserve_outbox_seq()
    e.trace.add(now, "reserved", "writer", None, seq)
    return seq


def commit(
    e: Engine,
    now: int,
    page_id: str,
    body: str | None,
    *,
    topic: str | None = None,
    kind: str = "page.updated",
    due_at: int | None = None,
    seq: int | None = None,
    stamp: int | None = None,
) -> int:
    """Write ``body`` to page ``page_id`` and its outbox row; returns the seq.
    ``due_at`` (epoch us, not in the past) makes the row deferred work;
    ``seq``/``stamp`` finish a commit whose seq was reserved earlier."""
    check_name("page name", page_id)
    if due_at is not None:
        if not is_whole(due_at):
            raise TypeError(f"due_at must be epoch microseconds (int), got {due_at!r}")
        if due_at < now:
            raise ValueError(f"due_at {due_at} is in the past (now is {now}); deferred work must be due now or later")
    topic = f"page:{page_id}" if topic is None else check_name("topic name", topic)
    if seq is None:
        seq = reserve(e, now)
    ts = now if stamp is None else stamp
    with e.store.transaction() as tx:
        tx.upsert_page({"id": page_id, "body": body, "updated_at": now})
        e.faults.point("commit.after_change_before_outbox", now, what=seq)
        tx.insert_outbox({"seq": seq, "ts": ts, "topic": topic, "kind": kind, "ref": page_id, "due_at": due_at})
        if e.config.notify and e.notify_in_tx is not None:  # PostgreSQL: delivered at COMMIT, or never
            e.notify_in_tx(tx, [str(seq)])
    e.metrics.inc("fanoutsim_outbox_commits_total", kind=kind)
    e.trace.add(now, "committed", "writer", None, seq, None, kind)
    e.faults.point("commit.before_notify", now, what=seq)
    if e.config.notify:
        e.notify(now, [str(seq)])
    return seq
