"""Backup and restore (seed 003): "Backup and restore preserve consumer state
but publish a new history incarnation. Outstanding pre-restore lease tokens
then fail closed, and the consumer resumes from its restored checkpoint."

:func:`backup` copies every table of the engine's database — the log,
consumers, checkpoints, sparse resolutions, leases, retries, dead letters and
the history row — inside one transaction, so the copy is one committed state
(the store is the truth: nothing is read from an engine's memory). The
:class:`Backup` lives outside the store, as a backup file does: a crash of the
node does not touch it.

:func:`restore_backup` puts a backup back in one transaction: every table of
the database is emptied and refilled from the copy. So, from then on:

* every consumer's checkpoint, sparse resolutions, retries and dead letters
  are what they were at the backup: events acknowledged after it are leased
  and delivered again (duplicates the checker names ``restore``);
* the log is what it was at the backup: events published after it are gone
  (a publisher that still wants them publishes them again, as new events);
  the checker reports those not delivered before the restore as lost with
  cause ``restore``; consumers created after the backup are gone too
  (their losses: ``restore``), and consumers retired after it are back;
* the trace says so: ``restored`` (the new incarnation), ``backup_restored``
  (the backup's label) and a ``checkpoint`` row for every checkpoint the
  backup held, where it now stands again;
* a new history *incarnation* is published — one past the highest the
  database has had — so every lease token handed out before the restore fails
  closed (``stale_incarnation``), and each lease restored from the copy is
  turned into a failed attempt (a retry now, or the dead letter), as
  :func:`~.leasing.restore` does.

One departure from a byte-for-byte restore, for the trace's sake: the
history's counters (``last_commit``, ``last_seq``, ``leases_granted``) keep
the highest values the database has had, so an event published after the
restore gets a fresh id and seq and no event id in a trace ever names two
events (RiffDB's restored log continues from the backup's commit sequence
under the new incarnation; the model numbers on instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from fanoutsim.designs.leases import leasing
from fanoutsim.designs.leases.tables import TABLES

if TYPE_CHECKING:
    from fanoutsim.designs.leases.steps import Engine
    from fanoutsim.designs.leases.tables import port


@dataclass(frozen=True)
class Backup:
    """A copy of one database's tables at ``taken_at`` (µs). ``label`` names it
    in the trace (``<database>@<taken_at>:<last seq>``); ``tables`` maps each
    table to its rows, in the store's order."""

    database: str
    taken_at: int
    label: str
    tables: Mapping[str, tuple[dict[str, Any], ...]]

    def _history(self) -> port.HistoryRow:
        return cast("port.HistoryRow", self.tables["history"][0])  # the history table's one row

    @property
    def last_seq(self) -> int:
        """The last seq the log had handed out when the copy was taken."""
        return self._history()["last_seq"]

    @property
    def incarnation(self) -> int:
        """The history incarnation the copy was taken in (a restore raises it)."""
        return self._history()["incarnation"]


def backup(e: Engine, now: int) -> Backup:
    """A copy of the engine's database, taken inside one transaction."""
    with e.tx() as tx:
        # one committed state: every writer holds a consumer's row or the history row
        tx.lock_lease_consumers()
        tx.lock_history()
        now = tx.after_locks(now)
        tables = {t: tuple(dict(r) for r in tx.table_rows(t)) for t in TABLES}
    label = f"{e.database}@{now}:{tables['history'][0]['last_seq']}"
    e.trace.add(now, "backup", e.actor, detail=label)
    e.metrics.inc("fanoutsim_lease_backups_total")
    return Backup(e.database, now, label, MappingProxyType(tables))


# table -> how one row goes back in (every row's columns, in the table's order)
def _put_back(tx: port.LeaseTx, table: str, row: dict[str, Any]) -> None:
    # ``row`` is a backed-up row of ``table``: each branch names its row type
    if table == "events":
        tx.insert_event(cast("port.EventRow", row))
    elif table == "lease_consumers":
        tx.put_lease_consumer(cast("port.LeaseConsumerRow", row))
    elif table == "checkpoints":
        tx.set_checkpoint(row["consumer"], row["partition"], row["seq"], row["commit_seq"])
    elif table == "resolutions":
        tx.insert_resolution(cast("port.ResolutionRow", row))
    elif table == "leases":
        tx.insert_lease(cast("port.LeaseRow", row))
    elif table == "retries":
        tx.put_retry(cast("port.RetryRow", row))
    elif table == "dead_letters":
        tx.insert_dead_letter(cast("port.DeadLetterRow", row))


def restore_backup(e: Engine, now: int, b: Backup) -> int:
    """Put backup ``b`` back (see the module's docstring); returns the new incarnation."""
    if not isinstance(b, Backup):
        raise TypeError(f"backup must be a Backup (from backup()), got {type(b).__name__}")
    if b.database != e.database:
        raise ValueError(
            f"backup {b.label!r} is of database {b.database!r}; this broker serves "
            f"{e.database!r}: restore it through a broker of {b.database!r}"
        )
    with e.tx() as tx:
        tx.lock_lease_consumers()  # consumers first, then the history, as every transition takes them
        now_h = tx.lock_history()
        tx.clear_database()
        for table in TABLES:
            if table != "history":
                for row in b.tables[table]:
                    _put_back(tx, table, dict(row))
        then = b._history()
        tx.set_history(
            {
                "incarnation": max(now_h["incarnation"], then["incarnation"]),
                "last_commit": max(now_h["last_commit"], then["last_commit"]),
                "last_seq": max(now_h["last_seq"], then["last_seq"]),
                "leases_granted": max(now_h["leases_granted"], then["leases_granted"]),
            }
        )
        incarnation, voided = leasing.new_incarnation(e, tx, now)
        now = tx.after_locks(now)
    leasing.trace_voided(e, now, voided)
    e.trace.add(now, "restored", e.actor, detail=str(incarnation))
    e.trace.add(now, "backup_restored", e.actor, detail=b.label)
    # the checkpoints moved back: the trace says where each one now stands (one a voided
    # lease's dead letter moved past the backup's is traced already, by trace_voided)
    ids = {r["seq"]: r["event_id"] for r in b.tables["events"]}
    moved = {(lease["consumer"], lease["partition"]) for lease, _, ev in voided if ev is not None}
    for cp in b.tables["checkpoints"]:
        if (cp["consumer"], cp["partition"]) in moved:
            continue
        e.trace.add(now, "checkpoint", e.actor, cp["consumer"], ids.get(cp["seq"]), cp["partition"], str(cp["seq"]))
    e.metrics.inc("fanoutsim_lease_restores_total")
    return incarnation
