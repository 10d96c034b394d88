"""The reactor's roles: one part of the runner per OS process, over one PostgreSQL.

``fanoutsim serve --store postgresql://... --role ROLE`` runs

``all``        the whole runner (the default): recovery, the poll loop, the
               executor and its workers, the prune loop, the workloads;
``poller``     the poll loop only, as poller ``poller@PID``: several of them
               read one watermark and dispatch the same firings (the seed runs
               one; running more is how its duplicates are observed for real);
``executor``   recovery, then the executor loop and its workers: it claims
               executions whoever dispatched them (the claim is one
               ``UPDATE ... WHERE status = 'pending'``, so two executors never
               both claim a row); it claims on every tick, having no local
               dispatch to hint it;
``prune``      the prune loop only;
``writers``    the scenario's workloads: firings at their rates, logged for
               the pollers of other processes to read.

A process may run several parts: ``--role executor,prune``. Only ``all`` and
``writers`` run the workloads; every role also takes ``fanoutsim fire`` /
``write``. Recovery requeues every 'running' execution, as the
seed's does at a runner's start: run one executor (or one ``all``) at a time,
or an executor's start requeues another's rows in hand and they run twice.

:func:`check_processes` is the reactor checker over several processes: the
database's tables, the firing history read from ``reactor_firings`` (a
firing written by another process is in no trace) and every process's trace
merged by time. It needs the firings still in the table: run no ``prune``
role before checking.
"""

from __future__ import annotations

from fanoutsim.kernel.runtime.roles import WORKLOADS, Roles

# the runner's groups of loops (ReactorRuntime._start_loops asks for each)
POLL, EXECUTOR, PRUNE = "poll", "executor", "prune"

ROLES = Roles(
    "reactor",
    "the whole runner: recovery, the poll loop, the executor and its workers, the prune loop, the scenario's workloads",
    poller=((POLL,), "the poll loop, as poller poller@PID (several read one watermark: duplicates)"),
    executor=(
        (EXECUTOR,),
        "recovery, then the executor and its workers, claiming on every tick (one at a "
        "time: its recovery requeues every running execution)",
    ),
    prune=((PRUNE,), "the prune loop"),
    writers=((WORKLOADS,), "the scenario's workloads: firings at their rates"),
)


def check_role(role: str) -> str:
    """``role`` if the reactor has it (one, or several joined by commas), else a ValueError naming its roles."""
    return ROLES.check(role).name


class Processes:
    """What :func:`fanoutsim.designs.reactor.checker.check` reads: the tables,
    the config, and the traces of every process merged by time, with the firing
    history of the ``reactor_firings`` table."""

    def __init__(self, store, traces: list, config) -> None:
        import pandas as pd

        from fanoutsim.kernel.runtime.processes import merged_trace

        self.store, self.config = store, config
        self._trace = merged_trace(traces)
        firings = store.rows("reactor_firings")
        self._trace.history = pd.DataFrame(
            {
                "firing": pd.Series([f["id"] for f in firings], dtype=object),
                "reactor_name": pd.Series([f["reactor_name"] for f in firings], dtype=object),
                "tenant_id": pd.Series([f["tenant_id"] for f in firings], dtype=object),
                "fired_at": pd.Series([f["fired_at"] for f in firings], dtype=object),
                "logged_at": pd.Series([f["created_at"] for f in firings], dtype=object),
                "payload": pd.Series([f["payload"] for f in firings], dtype=object),
                "attempt": pd.Series([0] * len(firings), dtype=object),
            }
        )

    def trace(self):
        return self._trace

    def subscriptions(self, tenant=None):
        from fanoutsim.kernel.frames import store_frame

        df = store_frame(self.store, "reactor_subscriptions")
        if tenant is not None:
            df = df[df["tenant_id"] == tenant].reset_index(drop=True)
        return df


def check_processes(store, traces: list, config=None):
    """The reactor checker over the tables of ``store`` and the ``traces`` of
    the processes that shared it (each a trace a ``fanoutsim serve --trace``
    wrote at its stop)."""
    from fanoutsim.designs.reactor.checker import check
    from fanoutsim.designs.reactor.config import SchedulerConfig

    return check(Processes(store, traces, config or SchedulerConfig()))
