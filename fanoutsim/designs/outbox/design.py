"""The outbox design as the cross-design tools see it (see :mod:`fanoutsim.kernel.design`)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from fanoutsim.kernel.design import Design, SweepKey, lazy, scale_workload_rates
from fanoutsim.kernel.designkit import checked_columns, join_each, latency_columns, unit_latency_columns, wall_workloads
from fanoutsim.kernel.runtime.roles import WORKLOADS
from fanoutsim.kernel.validate import is_real

from .causes import CAUSES
from .causes import expected as _expected
from .config import OutboxConfig
from .faults import FAULTS
from .roles import ROLES
from .scenario import OUTBOX_FAULT_KINDS, SCHEMA
from .story import backlog as _backlog
from .story import story as _explain
from .tables import PART


def _tables(sim) -> dict:
    return {"outbox": sim.outbox(), "cursors": sim.cursors(), "parked": sim.parked()}


# -- sweeps -------------------------------------------------------------------------
def _sweep_figures(df, scenario, out: Path) -> list:
    """A sweep's figures: each of its headline columns against the first numeric
    grid key, one line per value of the second."""
    from fanoutsim.kernel.plotting import save_sweep_lines

    return save_sweep_lines(df, ("commit_to_handled_p99_s", "commit_to_handled_p50_s", "extra_deliveries", "lost"), out)


_STATS = ("p50", "p99", "mean", "max")
SWEEP_COLUMNS = (
    *(f"commit_to_handled_{s}_s" for s in _STATS),
    "hinted_share",
    "committed",
    "delivered",
    "extra_deliveries",
    "parked",
    "pending",
    "lost",
    "valid",
)


def _sweep_row(sim, checked) -> dict:
    """One sweep run: commit -> first handled latency over every (consumer, row)
    handled (seconds; NaN when none), ``hinted_share`` — the share of those
    (consumer, row) pairs whose row's own hint reached the listener (NaN when
    none was handled) — and the checker's totals. The latencies and the share
    are :func:`~fanoutsim.designs.outbox.analysis.latency_frame`'s."""
    from .analysis import latency_frame

    lat = latency_frame(sim)
    return {
        **latency_columns("commit_to_handled", lat["latency_s"], _STATS),
        "hinted_share": float(lat["hinted"].mean()) if len(lat) else math.nan,
        **checked_columns(checked, ("committed", "delivered", "extra_deliveries", "parked", "pending", "lost")),
        **unit_latency_columns("commit_to_handled", lat, "consumer", UNIT_STATS),
    }


UNIT_STATS = ("p50", "p99")  # per consumer: commit_to_handled_<stat>_s[<consumer>]


# -- the wall clock (fanoutsim serve / write / status) --------------------------------
WRITE_FIELDS = {
    "page": "the page whose change is committed (required)",
    "body": "the change's body (default: none)",
    "topic": "its topic on the bus (default: none)",
    "kind": 'its kind (default "page.updated")',
    "due_in": "seconds from now at which it is due: deferred work (default: now)",
}


def _realtime(scenario, db: str, *, rate: float | None = None, role: str = "all"):
    """An OutboxRealtime over ``db`` (not started) with the scenario's consumers
    (a later ``join_at`` joins that many seconds after the start) and workloads;
    ``rate``: the workloads scaled to that many commits a second (0: none;
    with no scenario, one workload). ``role``: the part of the dispatcher it
    runs (:mod:`.roles`): every role gives the consumers their cursors; the
    workloads run in ``writers`` (or ``all``)."""
    from .realtime import OutboxRealtime

    writes = WORKLOADS in ROLES.check(role).groups
    if scenario is None:
        rt = OutboxRealtime(store=db, role=role)
        if rate and writes:
            rt.add_workload(rate)
        return rt
    rt = OutboxRealtime(scenario.config, store=db, faults=scenario.faults, seed=scenario.seed, role=role)
    try:
        join_each(
            rt,
            scenario.consumers,
            lambda c: rt.register_consumer(c.name, c.handler(scenario.seed), start=c.start, **c.guardrails()),
        )
        workloads = wall_workloads(scenario, rate, rt.add_workload if writes else None)
        for w in workloads if writes else ():
            rt.add_workload(w.rate, pages=w.pages, start=w.start, stop=w.stop, topic=w.topic)
    except BaseException:
        rt.close()
        raise
    return rt


# the furthest ahead a write may place work: 100 years, far inside the
# timestamps' year-9999 limit (a larger due_in would overflow the clock)
MAX_DUE_IN = 100 * 365.25 * 86400


def _write(rt, req: dict) -> dict:
    """A commit: ``{"page": ..., "body": ..., ...}`` -> ``{"seq": n}``."""
    unknown = sorted(set(req) - set(WRITE_FIELDS))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} of a commit; fields: {', '.join(WRITE_FIELDS)}")
    page = req.get("page")
    if not isinstance(page, str) or not page:
        raise ValueError(f"a commit needs the field 'page', a non-empty string; got {page!r}")
    for key in ("body", "topic"):
        if req.get(key) is not None and not isinstance(req[key], str):
            raise ValueError(f"{key} must be a string, got {req[key]!r}")
    kind = req.get("kind", "page.updated")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    due_in = req.get("due_in")
    if due_in is not None and (not is_real(due_in) or not math.isfinite(due_in) or not 0 <= due_in <= MAX_DUE_IN):
        raise ValueError(
            f"due_in must be a number of seconds >= 0 and at most {MAX_DUE_IN:.0f} (100 years), got {due_in!r}"
        )
    seq = rt.commit(
        page, req.get("body"), topic=req.get("topic"), kind=kind, due_at=None if due_in is None else rt.now + due_in
    )
    return {"seq": seq}


def _status(rt) -> dict:
    """The outbox in a file: rows, head, each consumer's cursor and lag, parked
    and deferred rows, the metrics."""
    from fanoutsim.kernel.frames import json_ready
    from fanoutsim.kernel.timeutil import from_us

    seqs = [r["seq"] for r in rt.store.rows("outbox")]
    head = max(seqs, default=0)
    parked: dict[str, int] = {}
    for r in rt.store.rows("parked"):
        parked[r["consumer"]] = parked.get(r["consumer"], 0) + 1
    deferred: dict[str, int] = {}
    for r in rt.store.rows("deferred"):
        deferred[r["consumer"]] = deferred.get(r["consumer"], 0) + 1
    consumers = {
        r["consumer"]: {
            "cursor": r["seq"],
            "lag": head - r["seq"],
            "parked": parked.get(r["consumer"], 0),
            "deferred": deferred.get(r["consumer"], 0),
        }
        for r in rt.store.rows("cursors")
    }
    return json_ready(
        {
            "pid": os.getpid(),
            "db": getattr(rt.store, "path", None),
            "now": from_us(rt.now_us()).isoformat(),
            "running": rt.running,
            "rows": len(seqs),
            "head": head,
            "consumers": consumers,
            "metrics": rt.metrics(),
        }
    )


DESIGN = Design(
    name="outbox",
    title="transactional outbox with NOTIFY hints, safety poll and per-consumer cursors (Subspace)",
    config_type=OutboxConfig,
    crash_points=FAULTS.points,
    fault_kinds=OUTBOX_FAULT_KINDS,
    parse_scenario=lazy(f"{__package__}.scenario", "parse_outbox_scenario"),
    scenario_schema=SCHEMA,
    check=lazy(f"{__package__}.checker", "check_outbox"),
    report=lazy(f"{__package__}.analysis", "outbox_report"),
    format_report=lazy(f"{__package__}.report", "format_outbox_report"),
    format_check=lazy(f"{__package__}.report", "format_outbox_check"),
    tables=_tables,
    figures=lazy(f"{__package__}.plots", "save_outbox_figures"),
    config_table="outbox",
    sweep_columns=SWEEP_COLUMNS,
    sweep_row=_sweep_row,
    sweep_unit_columns=tuple(f"commit_to_handled_{s}_s" for s in UNIT_STATS),
    sweep_figures=_sweep_figures,
    sweep_keys={
        "rate": SweepKey(
            "total commits per virtual second: every [[workload]] is scaled by one "
            "factor so that their rates sum to it",
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
    backlog_name="unhandled",
    causes=CAUSES,
    expected=_expected,
)
