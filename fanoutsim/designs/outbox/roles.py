"""The outbox dispatcher's roles: one part of it per OS process, over one PostgreSQL.

``fanoutsim serve --store postgresql://... --role ROLE`` runs

``all``         the whole dispatcher (the default): the topic bus, every
                consumer's loop, the retention loop, the scenario's workloads;
``dispatcher``  the topic bus (the WebSocket half of the fan-out): it
                publishes each row committed since it went live to the live
                subscribers of its topic, woken by LISTEN and the safety poll;
``consumers``   every consumer's loop: each reads past its cursor, handles
                the rows in order and moves its cursor after each, woken by
                LISTEN and the safety poll. Run one: the seed has a single
                dispatcher, and a second process running the same consumers
                would read past the same cursors and handle every row twice;
``retention``   the retention loop;
``writers``     the scenario's workloads: page commits at Poisson times, each
                with its outbox row and its NOTIFY in one transaction.

A process may run several parts: ``--role dispatcher,consumers``. Every role
gives the scenario's consumers their cursors (kept if they have one); only
``consumers`` (or ``all``) runs their loops. Over PostgreSQL a process that
runs the bus or the consumers holds the LISTEN connection (:mod:`.pglisten`):
the writers' NOTIFYs reach it whichever process committed.

:func:`check_processes` is the outbox checker over several processes: the
database's tables and every process's trace merged by time; a row some
process committed without a trace (``fanoutsim write``) is read from the
``outbox`` table, as committed at its stamp. It needs the rows still in the
table: check before retention prunes them.
"""

from __future__ import annotations

from fanoutsim.kernel.designkit import merged_with_untraced
from fanoutsim.kernel.runtime.roles import WORKLOADS, Roles

# the dispatcher's groups of loops (OutboxRuntime._start_loops asks for each)
BUS, CONSUMERS, RETENTION = "bus", "consumers", "retention"

ROLES = Roles(
    "outbox",
    "the whole dispatcher: the topic bus, every consumer's loop, retention, the scenario's workloads",
    dispatcher=(
        (BUS,),
        "the topic bus: each committed row to its topic's live subscribers, woken by LISTEN and the safety poll",
    ),
    consumers=(
        (CONSUMERS,),
        "every consumer's loop, reading past its cursor (run one: two would handle every row twice)",
    ),
    retention=((RETENTION,), "the retention loop"),
    writers=((WORKLOADS,), "the scenario's workloads: page commits at Poisson times"),
)


class Processes:
    """What :func:`fanoutsim.designs.outbox.checker.check` reads: the tables,
    the config, and the traces of every process merged by time, with the
    commits no trace recorded."""

    design = "outbox"

    def __init__(self, store, traces: list, config) -> None:
        self.store, self.config = store, config
        self._trace = merged_with_untraced(traces, "committed", "seq", store.rows("outbox"), _commit_row)

    def trace(self):
        return self._trace


def _commit_row(row: dict) -> dict:
    """The ``committed`` trace row of an outbox row no process traced."""
    return {
        "t": row["ts"],
        "kind": "committed",
        "actor": "writer",
        "consumer": None,
        "seq": row["seq"],
        "detail": row["kind"],
    }


def check_processes(store, traces: list, config=None):
    """The outbox checker over the tables of ``store`` and the ``traces`` of
    the processes that shared it (each a DataFrame, or a trace ``fanoutsim
    serve --trace`` wrote at its stop)."""
    from fanoutsim.designs.outbox.checker import check
    from fanoutsim.designs.outbox.config import OutboxConfig

    return check(Processes(store, traces, config or OutboxConfig()))
