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
``prune``      the prune loop only.

A role other than ``all`` runs no workload (firings come from ``fanoutsim
fire`` / ``write``). Recovery requeues every 'running' execution, as the
seed's does at a runner's start: run one executor (or one ``all``) at a time,
or an executor's start requeues another's rows in hand and they run twice.

:func:`check_processes` is the reactor checker over several processes: the
database's tables, the firing history read from ``reactor_firings`` (a
firing written by another process is in no trace) and every process's trace
merged by time. It needs the firings still in the table: run no ``prune``
role before checking.
"""
from __future__ import annotations

import os

import pandas as pd

from fanoutsim.designs.reactor.engine import ReactorEngine
from fanoutsim.designs.reactor.realtime import Realtime

ROLES = ("all", "poller", "executor", "prune")


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"the reactor design has no role {role!r}; its roles: {', '.join(ROLES)}")
    return role


class RoleRealtime(Realtime):
    """A :class:`Realtime` that runs one role's loops (see the module docstring)."""

    def __init__(self, *args, role: str = "all", **kwargs) -> None:
        self.role = check_role(role)
        if role == "executor":
            self.safety_claim = 0.0  # no dispatch of its own to hint it: claim every tick
        super().__init__(*args, **kwargs)

    def _new_engine(self, incarnation: int) -> ReactorEngine:
        engine = super()._new_engine(incarnation)
        if self.role == "poller":
            engine.poller = f"poller@{os.getpid()}"
        return engine

    def add_workload(self, *args, **kwargs):
        if self.role != "all":
            raise ValueError(f"role {self.role!r} runs no workload: fire with `fanoutsim fire` / `write`, "
                             "or add workloads to the role 'all'")
        return super().add_workload(*args, **kwargs)

    def _start_loops(self, engine: ReactorEngine) -> None:
        if self.role == "all":
            super()._start_loops(engine)
        elif self.role == "poller":
            self._spawn(self._poll_loop(engine), "poll")
        elif self.role == "prune":
            self._spawn(self._prune_loop(engine), "prune")
        else:  # executor
            self._start_executor(engine)
            self._spawn(self._executor_loop(engine), "executor")


class Processes:
    """What :func:`fanoutsim.designs.reactor.checker.check` reads: the tables,
    the config, and the traces of every process merged by time, with the firing
    history of the ``reactor_firings`` table."""

    def __init__(self, store, traces: list[pd.DataFrame], config) -> None:
        from fanoutsim.kernel.trace import TraceFrame

        self.store, self.config = store, config
        merged = pd.concat([pd.DataFrame(t) for t in traces], ignore_index=True)
        merged = merged.sort_values("t", kind="stable").reset_index(drop=True)
        self._trace = TraceFrame(merged)
        firings = store.rows("reactor_firings")
        self._trace.history = pd.DataFrame({
            "firing": pd.Series([f["id"] for f in firings], dtype=object),
            "reactor_name": pd.Series([f["reactor_name"] for f in firings], dtype=object),
            "tenant_id": pd.Series([f["tenant_id"] for f in firings], dtype=object),
            "fired_at": pd.Series([f["fired_at"] for f in firings], dtype=object),
            "logged_at": pd.Series([f["created_at"] for f in firings], dtype=object),
            "payload": pd.Series([f["payload"] for f in firings], dtype=object),
            "attempt": pd.Series([0] * len(firings), dtype=object)})

    def trace(self) -> pd.DataFrame:
        return self._trace

    def subscriptions(self, tenant=None) -> pd.DataFrame:
        from fanoutsim.kernel.frames import store_frame

        df = store_frame(self.store, "reactor_subscriptions")
        if tenant is not None:
            df = df[df["tenant_id"] == tenant].reset_index(drop=True)
        return df


def check_processes(store, traces: list[pd.DataFrame], config=None):
    """The reactor checker over the tables of ``store`` and the ``traces`` of
    the processes that shared it (each a trace a ``fanoutsim serve --trace``
    wrote at its stop)."""
    from fanoutsim.designs.reactor.checker import check
    from fanoutsim.designs.reactor.config import SchedulerConfig

    return check(Processes(store, traces, config or SchedulerConfig()))
