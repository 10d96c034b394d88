"""The leases node's roles: one part of it per OS process, over one PostgreSQL.

``fanoutsim serve --store postgresql://... --role ROLE`` runs

``all``         the whole node (the default): recovery, retention, every
                consumer's client and its workers, the scenario's workloads;
``clients``     every consumer's client loop and its workers. Several such
                processes compete for one consumer's events: each pull locks
                the consumer's row, so no event is leased twice at once (see
                :mod:`.leasing`); each pull also expires its own consumer's
                leases first, so clients progress with no ``recovery`` running;
``recovery``    start-up recovery, then lease expiry every
                ``recovery_interval``; and what an operator does at a time:
                the scenario's retirements and ``[[actions]]``, the plan's
                backups and restores (run one: an operator's step pauses only
                the clients of its own process, and waits until the consumer
                holds no lease);
``retention``   the retention loop;
``publishers``  the scenario's workloads: Poisson publishers.

A process may run several parts: ``--role publishers,recovery,retention``.
Every role registers the scenario's consumers (create-if-absent: one
registration creates each, the others find it); only ``clients`` (or ``all``)
runs their clients.

:func:`check_processes` is the leases checker over several processes: the
database's tables and every process's trace merged by time; an event some
process published without a trace (``fanoutsim write``) is read from the
``events`` table, as published when it committed.
"""

from __future__ import annotations

from fanoutsim.kernel.designkit import merged_with_untraced
from fanoutsim.kernel.runtime.roles import WORKLOADS, Roles

# the node's groups of loops (LeaseRuntime._start_loops asks for each)
CLIENTS, RECOVERY, RETENTION = "clients", "recovery", "retention"

ROLES = Roles(
    "leases",
    "the whole node: recovery, retention, every consumer's client and its workers, the workloads",
    clients=(
        (CLIENTS,),
        "every consumer's client loop and its workers; several processes compete for one "
        "consumer's events (each pull also expires its consumer's own leases)",
    ),
    recovery=(
        (RECOVERY,),
        "start-up recovery, lease expiry every recovery_interval, and an operator's "
        "steps: retirements, [[actions]], the plan's backups and restores (run one)",
    ),
    retention=((RETENTION,), "the retention loop"),
    publishers=((WORKLOADS,), "the scenario's workloads: Poisson publishers"),
)


class Processes:
    """What :func:`fanoutsim.designs.leases.checker.check_leases` reads: the
    tables of one named database, the config, and the traces of every process
    merged by time, with the events no trace published."""

    design = "leases"

    def __init__(self, store, traces: list, config, database: str) -> None:
        from fanoutsim.designs.leases.tables import database_rows

        self.store, self.config, self.database = store, config, database
        self.table_rows = lambda table: database_rows(store, table, database)
        self._trace = merged_with_untraced(traces, "published", "event_id", self.table_rows("events"), _publish_row)

    def trace(self):
        return self._trace


def _publish_row(event: dict) -> dict:
    """The ``published`` trace row of a retained event no process traced."""
    return {
        "t": event["committed_at"],
        "kind": "published",
        "actor": "publisher",
        "consumer": None,
        "event_id": event["event_id"],
        "partition": event["partition"],
        "detail": str(event["seq"]),
    }


def check_processes(store, traces: list, config=None, database: str = "default"):
    """The leases checker over the tables of ``store`` (its named ``database``)
    and the ``traces`` of the processes that shared it (each a DataFrame, or a
    trace ``fanoutsim serve --trace`` wrote at its stop)."""
    from fanoutsim.designs.leases.checker import check_leases
    from fanoutsim.designs.leases.config import LeaseConfig

    return check_leases(Processes(store, traces, config or LeaseConfig(), database))
