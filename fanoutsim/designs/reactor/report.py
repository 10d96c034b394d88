"""The reactor design's delivery report (:func:`fanoutsim.analysis.delivery_report`) as plain text.

Latencies are shown in milliseconds, watermark lag in seconds (its definition,
:data:`~fanoutsim.designs.reactor.analysis.lag.WATERMARK_LAG`, is printed under the table)."""

from __future__ import annotations

import textwrap
from typing import Any

from fanoutsim.designs.reactor.analysis.lag import WATERMARK_LAG
from fanoutsim.kernel.report import (
    Column,
    clip,
    columns_table,
    count,
    ms,
    report_head,
    secs,
    short_secs,
    table,
    totals_table,
)


def format_report(report: dict[str, Any]) -> str:
    """Render a delivery report as an aligned plain-text table."""
    out = report_head("fanoutsim delivery report", report, _settings)
    cfg = report.get("config", {})
    f, ex = report["firings"], report["executions"]
    status = ", ".join(f"{k} {count(v)}" for k, v in ex["by_status"].items())
    prune = f"by the {cfg['prune_policy']} prune loop" if cfg.get("prune_policy") else ""
    out += totals_table(
        [
            ("firings fired", f["fired"], "written to the log"),
            ("firings retained", f["retained"], "still in the log now"),
            ("firings pruned", f["pruned"], prune),
            ("executions", ex["total"], status),
            ("predicate errors", report["predicate_errors"], ""),
            ("dead letters", report["dead_letters"], ""),
            ("dispatch failures", report["dispatch_failures"], ""),
        ]
    )
    out.append("")

    out += _latency_table(report)
    out.append("")
    out += _subscriptions_table(report)
    for e in report.get("predicate_error_examples", ()):
        out.append("")
        out.append(f"Predicate errors of {e['subscription']}: {count(e['count'])}, the first on firing {e['firing']}")
        out.append(f"  filter {e['filter']}: {e['error']}")
        out.append(f"  under predicate_error_policy = {e['outcome']}")
    if ex.get("unmatched"):
        out.append(f"  {count(ex['unmatched'])} execution(s) match no current subscription")
    return "\n".join(out) + "\n"


def _settings(cfg: dict[str, Any]) -> str:
    """The run's settings in one line: the poll, the executor, the prune loop."""
    return (
        f"poll every {short_secs(cfg.get('reactor_poll_interval'))} s "
        f"(batch {cfg.get('reactor_poll_batch_limit')}), "
        f"executor every {short_secs(cfg.get('executor_poll_interval'))} s "
        f"x {cfg.get('executor_workers')} workers, "
        f"prune every {secs(cfg.get('reactor_firings_prune_interval'), 0)} s "
        f"keeping {secs(cfg.get('reactor_firings_retention'), 0)} s ({cfg.get('prune_policy')})"
    )


def _latency_table(report: dict[str, Any]) -> list[str]:
    """The latency percentiles of each path (fire -> dispatch, fire -> claim), in ms."""
    out: list[str] = []
    out.append("Latency (ms)")
    names = {"fire_to_dispatch": "fire -> dispatch", "fire_to_claim": "fire -> claim"}
    rows = []
    for key, stats in report["latency_s"].items():
        rows.append(
            [
                names.get(key, key),
                count(stats["count"]),
                ms(stats["mean"]),
                ms(stats["p50"]),
                ms(stats["p95"]),
                ms(stats["p99"]),
                ms(stats["max"]),
            ]
        )
    out += table(["", "n", "mean", "p50", "p95", "p99", "max"], rows, "<>>>>>>")
    return out


# one row per subscription: its filter, state, executions, p50 latencies, watermark lag and backlog
_SUBSCRIPTION_COLUMNS: tuple[Column, ...] = (
    ("tenant", "<", lambda s: s["tenant"]),
    ("reactor", "<", lambda s: s["reactor"]),
    ("workflow", "<", lambda s: s["workflow"]),
    ("filter", "<", lambda s: clip(s["predicate"], 36)),
    ("state", "<", lambda s: s["state"]),
    ("executions", ">", lambda s: count(s["executions"])),
    ("dispatch", ">", lambda s: ms(s["fire_to_dispatch_p50_s"])),
    ("claim", ">", lambda s: ms(s["fire_to_claim_p50_s"])),
    ("wm lag", ">", lambda s: secs(s["watermark_lag_s"], 2)),
    ("backlog", ">", lambda s: count(s["backlog"])),
)


def _subscriptions_table(report: dict[str, Any]) -> list[str]:
    """One row per subscription: its filter, state, executions, p50 latencies,
    watermark lag and backlog."""
    return columns_table(
        "Subscriptions (latency p50 in ms, watermark lag in s)",
        _SUBSCRIPTION_COLUMNS,
        report["subscriptions"],
        "\n".join(
            textwrap.wrap(
                f"wm lag: watermark lag, {WATERMARK_LAG}; backlog: retained firings after the watermark",
                width=110,
                initial_indent="  ",
                subsequent_indent="    ",
            )
        ),
    )


# -- what the package template reads here (fanoutsim.kernel.design.TEMPLATE) --------
def report(sim, *, name: str | None = None, checked=None) -> dict[str, Any]:
    """One run as a plain, JSON-ready dict: its deliveries, latencies and backlog
    (:func:`~.analysis.delivery.delivery_report`) and the checker's totals under ``check``."""
    from .analysis.delivery import delivery_report
    from .checker import check

    out = delivery_report(sim, name=name)
    out["check"] = (checked if checked is not None else check(sim)).total
    return out


def format_check(checked) -> str:
    """The checker's verdict as the CLI prints it (:func:`~.checker.format_check`)."""
    from .checker import format_check as _format

    return _format(checked)


def tables(sim) -> dict[str, Any]:
    """The run's tables written as Parquet: firings (the decoded payload as JSON
    text beside its bytes), executions (their context as JSON text), subscriptions."""
    import json

    executions = sim.executions()
    executions["context"] = [json.dumps(c, separators=(",", ":")) for c in executions["context"]]
    firings = sim.firings()
    firings["sources"] = [None if c is None else json.dumps(c, separators=(",", ":")) for c in firings["sources"]]
    return {"firings": firings, "executions": executions, "subscriptions": sim.subscriptions()}
