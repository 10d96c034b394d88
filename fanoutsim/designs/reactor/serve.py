"""The reactor design behind ``fanoutsim serve``, ``fanoutsim fire`` and ``fanoutsim status``.

The serving process itself is design-free (:mod:`fanoutsim.serve`, with the
control endpoint of :mod:`fanoutsim.kernel.runtime.control`); this module is
what the reactor's :class:`~fanoutsim.kernel.design.Design` record gives it:

* :func:`open_realtime` — a :class:`~fanoutsim.designs.reactor.realtime.Realtime`
  over the file with a scenario's workflows, subscriptions and workloads;
* :func:`write` — the write command, a firing: ``{"reactor": ..., "payload":
  {...}, "tenant": ...}`` -> ``{"firing": id}``, with ``"warning"`` when no
  subscription reads that reactor in that tenant (:func:`unheard`);
* :func:`status_of` — counts, watermarks and metrics as JSON (what a live view polls).

:func:`fire` and :func:`status` reach a reactor file from another process:
through its server if one holds it, else by opening the file.
"""

from __future__ import annotations

import os
from typing import Any

from fanoutsim.designs.reactor.analysis.lag import WATERMARK_LAG, watermark_lag_us
from fanoutsim.designs.reactor.realtime import Realtime
from fanoutsim.designs.reactor.roles import ROLES
from fanoutsim.kernel.designkit import check_write, populated, status_clock, status_record
from fanoutsim.kernel.runtime.control import server_address, server_info, server_request, sidecar
from fanoutsim.kernel.store.duckdb import StoreError

__all__ = [
    "sidecar",
    "server_address",
    "status_of",
    "apply_scenario",
    "open_realtime",
    "write",
    "WRITE_FIELDS",
    "unheard",
    "fire",
    "status",
]

WRITE_FIELDS = {
    "reactor": "the reactor to fire (required)",
    "payload": "a JSON object of source name -> value (default {})",
    "tenant": 'the tenant (default "public")',
}


def status_of(rt: Realtime) -> dict[str, Any]:
    """The run in a file: firings retained, executions by status, each
    subscription's watermark lag (seconds; its definition under
    ``definitions``), the metrics; lags as of the now :func:`status_clock`
    gives (a virtual run's end, or the wall clock)."""
    subs = rt.store.rows("reactor_subscriptions")
    clock = status_clock(rt)
    now = clock.now_us
    with rt.store.transaction() as tx:
        retained = tx.count_firings()
    by_status: dict[str, int] = {}
    for row in rt.store.rows("workflow_executions"):
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    streams: dict[tuple[str, str], list[int]] = {}
    for f in rt.store.rows("reactor_firings"):
        streams.setdefault((f["reactor_name"], f["tenant_id"]), []).append(f["fired_at"])
    for stamps in streams.values():
        stamps.sort()
    lag = {
        f"{s['reactor_name']}->{s['workflow_name']}@{s['tenant_id']}": watermark_lag_us(
            now, s["last_seen_fired_at"], streams.get((s["reactor_name"], s["tenant_id"]), [])
        )
        / 1e6
        for s in subs
    }
    body = {
        "firings_retained": retained,
        "executions": by_status,
        "watermark_lag_s": lag,
        "definitions": {"watermark_lag_s": WATERMARK_LAG},
    }
    return status_record(rt, body, clock=clock)


def apply_scenario(rt: Realtime, scenario, *, workloads: bool = True) -> None:
    """Register the scenario's workflows, upsert its subscriptions and add its workloads."""
    for wf in scenario.workflows:
        d = wf.duration
        rt.runner.register_workflow(wf.name, duration=d.a if d.law == "fixed" else d)
    for sub in scenario.subscriptions:
        rt.runner.subscribe_workflow_to_reactor(sub.reactor, sub.workflow, sub.tenant, when=sub.when)
    if workloads:
        for w in scenario.workloads:
            rt.add_workload(w.reactor, w.rate, w.tenant, payload=w.payload, start=w.start, stop=w.stop)


def open_realtime(
    scenario, db: str, *, rate: float | None = None, reactor: str = "pricing_reactor", role: str = "all"
) -> Realtime:
    """A Realtime over ``db`` (not started) with ``scenario`` applied. ``rate``:
    fire ``reactor`` that many times a second instead of the scenario's
    workloads (0: no workload; with no scenario, ``reactor`` feeds an ``audit``
    workflow). ``role``: the part of the runner it runs
    (:mod:`fanoutsim.designs.reactor.roles`; ``all`` and ``writers`` run the workloads)."""
    rt = Realtime(
        scenario.config if scenario is not None else None, store=db, faults=getattr(scenario, "faults", None), role=role
    )

    writes = ROLES.check(rt.role).writes

    def populate() -> None:
        if scenario is not None:
            apply_scenario(rt, scenario, workloads=rate is None and writes)
        if rate and writes:
            if scenario is None:
                rt.runner.subscribe_workflow_to_reactor(reactor, "audit")
            rt.add_workload(reactor, rate)

    return populated(rt, populate)


def write(rt: Realtime, req: dict) -> dict:
    """The write command: fire ``req["reactor"]`` with ``req["payload"]`` for ``req["tenant"]``."""
    check_write(req, WRITE_FIELDS, "a firing")
    if "reactor" not in req:
        raise ValueError("a firing needs the field 'reactor' (the reactor to fire)")
    payload = req.get("payload", {})
    if not isinstance(payload, dict):
        raise ValueError(f"payload must be a JSON object of source name -> value, got {payload!r}")
    tenant = req.get("tenant", "public")
    answer: dict[str, Any] = {"firing": rt.fire(req["reactor"], payload, tenant)}
    warning = unheard(rt.store.rows("reactor_subscriptions"), req["reactor"], tenant)
    if warning:
        answer["warning"] = warning
    return answer


def unheard(subs: list[dict], reactor: str, tenant: str) -> str | None:
    """Why a firing of ``reactor`` in ``tenant`` reaches no workflow, naming
    what does subscribe (None: some subscription reads it). A subscription
    reads its own reactor in its own tenant only: a tenant mistyped is a
    firing nobody runs, and a write that succeeds must not hide that."""
    if any(s["reactor_name"] == reactor and s["tenant_id"] == tenant for s in subs):
        return None
    tenants = sorted({s["tenant_id"] for s in subs if s["reactor_name"] == reactor})
    if tenants:
        return (
            f"no subscription of reactor {reactor!r} in tenant {tenant!r}; subscriptions exist in "
            f"tenant(s): {', '.join(tenants)} (the firing is logged, and no workflow runs for it)"
        )
    reactors = sorted({s["reactor_name"] for s in subs})
    elsewhere = f"; subscribed reactor(s): {', '.join(reactors)}" if reactors else "; there is no subscription at all"
    return (
        f"no subscription of reactor {reactor!r} in any tenant{elsewhere} (the firing is logged, and no "
        f"workflow runs for it)"
    )


def _existing(db: str) -> None:
    """Reading a run needs its file: a typo must not create an empty database."""
    if not os.path.exists(db):
        raise StoreError(f"{db}: no such file (start a run with 'fanoutsim serve --db {db}')")


def fire(db: str, reactor: str, payload: dict, tenant: str = "public") -> str:
    """Fire into the reactor file ``db``: through its server if one holds it, else directly."""
    body = {"reactor": reactor, "payload": payload, "tenant": tenant}
    info = server_info(db)
    if info is not None:
        return server_request(info, "/write", body)["firing"]
    _existing(db)
    rt = Realtime(store=db)
    try:
        return write(rt, body)["firing"]
    finally:
        rt.close()


def status(db: str) -> dict[str, Any]:
    """The status of the run in the reactor file ``db``: from its server, or read from the file."""
    info = server_info(db)
    if info is not None:
        return server_request(info, "/status")
    _existing(db)
    rt = Realtime(store=db)
    try:
        return status_of(rt)
    finally:
        rt.close()
