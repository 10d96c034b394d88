"""The toy design's Design record: all that the cross-design tools need of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fanoutsim.kernel.design import Design, SweepKey, scale_workload_rates

from .engine import ToyConfig, ToyRealtime, check_toy, latencies, parse_toy_scenario

SWEEP_COLUMNS = ("append_to_handled_mean_s", "appended", "handled", "duplicates", "lost", "valid")


def _report(sim, name=None, checked=None) -> dict:
    checked = checked if checked is not None else check_toy(sim)
    lat = latencies(sim)
    return {
        "name": name,
        "design": "toy",
        "appended": checked.total["appended"],
        "latency_mean_s": float(lat.mean()) if len(lat) else None,
        "check": checked.total,
    }


def _format_report(report: dict) -> str:
    return f"toy {report['name']}: {report['appended']} appended, mean latency {report['latency_mean_s']}\n"


def _format_check(checked) -> str:
    t = checked.total
    return f"toy check: {t['lost']} lost, {t['duplicates']} duplicates — {'VALID' if checked.valid else 'INVALID'}"


def _figures(sim, out: Path, *, checked=None) -> list:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lat = latencies(sim)
    ax.hist(lat, bins=20)
    ax.set_xlabel("append -> handled, s")
    path = Path(out) / "toy_latency.png"
    fig.savefig(path)
    plt.close(fig)
    return [path]


def _sweep_row(sim, checked) -> dict:
    lat = latencies(sim)
    return {
        "append_to_handled_mean_s": float(lat.mean()) if len(lat) else float(np.nan),
        "appended": int(checked.total["appended"]),
        "handled": int(checked.total["handled"]),
        "duplicates": int(checked.total["duplicates"]),
        "lost": int(checked.total["lost"]),
        "valid": bool(checked.valid),
    }


def _tables(sim) -> dict:
    return {"log": sim.log(), "cursors": sim.cursors()}


def _status(rt) -> dict:
    return rt.status()


def _realtime(scenario, db, *, rate=None):
    rate = (sum(w.rate for w in scenario.workloads) if scenario is not None else 0.0) if rate is None else rate
    return ToyRealtime(scenario.config if scenario is not None else ToyConfig(), store=db, rate=rate)


def _write(rt, req: dict) -> dict:
    if set(req) - {"body"}:
        raise ValueError(f"unknown field {sorted(set(req) - {'body'})[0]!r} of an append; fields: body")
    return {"seq": rt.append(str(req.get("body", "")))}


DESIGN = Design(
    name="toy",
    title="a log and one consumer with a cursor (the tests' fourth design)",
    config_type=ToyConfig,
    crash_points=(),
    fault_kinds=(),
    parse_scenario=parse_toy_scenario,
    check=check_toy,
    report=_report,
    format_report=_format_report,
    format_check=_format_check,
    tables=_tables,
    figures=_figures,
    config_table="toy",
    sweep_columns=SWEEP_COLUMNS,
    sweep_row=_sweep_row,
    sweep_keys={"rate": SweepKey("appends per virtual second", scenario=scale_workload_rates)},
    realtime=_realtime,
    write=_write,
    write_fields={"body": "the appended row's body"},
    status=_status,
)
