"""The leased-consumer design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""

from __future__ import annotations

import os
from pathlib import Path

from fanoutsim.kernel.design import Design, SweepKey, lazy, scale_workload_rates
from fanoutsim.kernel.designkit import checked_columns, join_each, latency_columns, unit_latency_columns, wall_workloads
from fanoutsim.kernel.runtime.roles import WORKLOADS

from .causes import CAUSES
from .causes import expected as _expected
from .config import LeaseConfig
from .faults import FAULTS
from .roles import RECOVERY, ROLES
from .scenario import LEASE_FAULT_KINDS, SCHEMA
from .story import backlog as _backlog
from .story import story as _explain
from .tables import PART


def _tables(sim) -> dict:
    return {
        "events": sim.events(),
        "checkpoints": sim.checkpoints(),
        "dead_letters": sim.dead_letters(),
        "consumers": sim.consumers(),
    }


def _figures(sim, out: Path) -> list:
    from .plots import save_leases_figures

    return list(save_leases_figures(sim, out))


# -- sweeps -------------------------------------------------------------------------
def _sweep_figures(df, scenario, out: Path) -> list:
    """A sweep's figures: each of its headline columns against the first numeric
    grid key, one line per value of the second."""
    from fanoutsim.kernel.plotting import save_sweep_lines

    return save_sweep_lines(
        df, ("publish_to_ack_p99_s", "publish_to_ack_p50_s", "duplicates", "dead_lettered", "lost"), out
    )


_STATS = ("p50", "p99", "mean")
SWEEP_COLUMNS = (
    *(f"publish_to_ack_{s}_s" for s in _STATS),
    "published",
    "delivered",
    "duplicates",
    "dead_lettered",
    "pending",
    "lost",
    "valid",
)


def _sweep_row(sim, checked) -> dict:
    """One sweep run: publish -> ack latency over every (consumer, event) acked
    (seconds; NaN when none), and the checker's totals."""
    from .analysis import event_outcomes

    ev = event_outcomes(sim)
    acked = ev[ev["outcome"] == "acked"]
    return {
        **latency_columns("publish_to_ack", acked["latency_s"], _STATS),
        **checked_columns(checked, ("published", "delivered", "duplicates", "dead_lettered", "pending", "lost")),
        **unit_latency_columns("publish_to_ack", acked, "consumer", UNIT_STATS),
    }


UNIT_STATS = ("p50", "p99")  # per consumer: publish_to_ack_<stat>_s[<consumer>]


# -- the wall clock (fanoutsim serve / write / status) --------------------------------
WRITE_FIELDS = {
    "partition": "the partition the event goes to (required)",
    "kind": 'its kind (default "event")',
    "payload": "its payload, any JSON value (default: none)",
}


def _realtime(scenario, db: str, *, rate: float | None = None, role: str = "all"):
    """A LeaseRealtime over ``db`` (not started) with the scenario's consumers
    (later joins and retirements, and the ``[[actions]]``, that many seconds
    after the start) and workloads; ``rate``: the workloads scaled to that many
    events a second (0: none; with no scenario, one workload). ``role``: the
    part of the node it runs (:mod:`.roles`): every role registers the
    consumers; the workloads run in ``publishers``, the retirements and
    actions where ``recovery`` runs."""
    from fanoutsim.kernel.runtime.control import later

    from .realtime import LeaseRealtime

    part = ROLES.check(role).groups
    if scenario is None:
        rt = LeaseRealtime(store=db, role=role)
        if rate and WORKLOADS in part:
            rt.add_workload(rate)
        return rt
    rt = LeaseRealtime(scenario.config, store=db, faults=scenario.faults, seed=scenario.seed, role=role)
    try:
        join_each(rt, scenario.consumers, lambda c: rt.register_consumer(c.name, **c.arguments()))
        for c in scenario.consumers:
            if c.retire_at is not None and RECOVERY in part:
                later(rt, c.retire_at, lambda name=c.name: rt.retire(name), name=f"fanoutsim-retire-{c.name}")
        for a in scenario.actions if RECOVERY in part else ():
            step = rt.restore if a.kind == "restore" else (lambda a=a: rt.seek(a.consumer, a.position))
            later(rt, a.at, step, name=f"fanoutsim-{a.kind}")
        workloads = wall_workloads(scenario, rate, rt.add_workload if WORKLOADS in part else None)
        for w in workloads if WORKLOADS in part else ():
            w.add_to(rt)
    except BaseException:
        rt.close()
        raise
    return rt


def _write(rt, req: dict) -> dict:
    """A publish: ``{"partition": ..., "kind": ..., "payload": ...}`` -> ``{"event": id}``."""
    unknown = sorted(set(req) - set(WRITE_FIELDS))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} of a publish; fields: {', '.join(WRITE_FIELDS)}")
    partition = req.get("partition")
    if not isinstance(partition, str) or not partition:
        raise ValueError(f"a publish needs the field 'partition', a non-empty string; got {partition!r}")
    kind = req.get("kind", "event")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    return {"event": rt.publish(partition, kind, req.get("payload"))}


def _status(rt) -> dict:
    """The leases in a file: events retained, dead letters, each consumer's
    status (as ``riffdb event status`` tells it), the metrics."""
    from fanoutsim.kernel.frames import json_ready
    from fanoutsim.kernel.timeutil import from_us

    rows = rt.table_rows  # of the runtime's named database
    names = [r["consumer"] for r in rows("lease_consumers")]
    return json_ready(
        {
            "pid": os.getpid(),
            "db": getattr(rt.store, "path", None),
            "now": from_us(rt.now_us()).isoformat(),
            "running": rt.running,
            "events": len(rows("events")),
            "dead_letters": len(rows("dead_letters")),
            "consumers": {name: rt.status(name) for name in names},
            "metrics": rt.metrics(),
        }
    )


DESIGN = Design(
    name="leases",
    title="leased durable consumers with ack/nack, dead letters and retention fences (RiffDB)",
    config_type=LeaseConfig,
    crash_points=FAULTS.points,
    fault_kinds=LEASE_FAULT_KINDS,
    parse_scenario=lazy(f"{__package__}.scenario", "parse_lease_scenario"),
    scenario_schema=SCHEMA,
    check=lazy(f"{__package__}.checker", "check_leases"),
    report=lazy(f"{__package__}.report", "leases_report"),
    format_report=lazy(f"{__package__}.report", "format_leases_report"),
    format_check=lazy(f"{__package__}.report", "format_leases_check"),
    tables=_tables,
    figures=_figures,
    config_table="leases",
    sweep_columns=SWEEP_COLUMNS,
    sweep_row=_sweep_row,
    sweep_unit_columns=tuple(f"publish_to_ack_{s}_s" for s in UNIT_STATS),
    sweep_figures=_sweep_figures,
    sweep_keys={
        "rate": SweepKey(
            "total events published per virtual second: every [[workload]] is scaled "
            "by one factor so that their rates sum to it",
            scenario=scale_workload_rates,
        )
    },
    realtime=_realtime,
    write=_write,
    write_fields=WRITE_FIELDS,
    status=_status,
    roles=ROLES.help,
    store_part=PART,
    explain=_explain,
    backlog=_backlog,
    backlog_name="unresolved",
    causes=CAUSES,
    expected=_expected,
)
