"""A delivery report (:func:`fanoutsim.analysis.delivery_report`) as plain text.

The text depends only on the report dict — no wall-clock values, no
environment — so the same seed prints the same report, byte for byte.
Latencies are shown in milliseconds, watermark lag in seconds.
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["format_report"]

_MISSING = "-"


def _ms(seconds: float | None) -> str:
    return _MISSING if seconds is None else f"{seconds * 1000:.1f}"


def _s(seconds: float | None, digits: int = 1) -> str:
    return _MISSING if seconds is None else f"{seconds:.{digits}f}"


def _int(n: int | float | None) -> str:
    if n is None:
        return _MISSING
    return f"{n:,}" if float(n).is_integer() else f"{n:,.2f}"


def _clip(text: str | None, width: int) -> str:
    if text is None:
        return _MISSING
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str, indent: str = "  ") -> list[str]:
    """Aligned columns; ``align`` has one ``<`` or ``>`` per column."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(cells, widths, align)]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def format_report(report: dict[str, Any]) -> str:
    """Render a delivery report as an aligned plain-text table."""
    out: list[str] = []
    title = "fanoutsim delivery report"
    if report.get("scenario"):
        title += f": {report['scenario']}"
    out += [title, "=" * len(title)]
    cfg = report.get("config", {})
    out.append(f"seed {report['seed']}, virtual time {_s(report['time_span_s'])} s "
               f"({report['start']} .. {report['end']})")
    if cfg:
        out.append(
            f"poll every {_s(cfg.get('reactor_poll_interval'), 3).rstrip('0').rstrip('.')} s "
            f"(batch {cfg.get('reactor_poll_batch_limit')}), "
            f"executor every {_s(cfg.get('executor_poll_interval'), 3).rstrip('0').rstrip('.')} s "
            f"x {cfg.get('executor_workers')} workers, "
            f"prune every {_s(cfg.get('reactor_firings_prune_interval'), 0)} s "
            f"keeping {_s(cfg.get('reactor_firings_retention'), 0)} s ({cfg.get('prune_policy')})"
        )
    out.append("")

    f, ex = report["firings"], report["executions"]
    status = ", ".join(f"{k} {_int(v)}" for k, v in ex["by_status"].items())
    prune = f"by the {cfg['prune_policy']} prune loop" if cfg.get("prune_policy") else ""
    out += _table(
        ["totals", "count", "detail"],
        [["firings fired", _int(f["fired"]), "written to the log"],
         ["firings retained", _int(f["retained"]), "still in the log now"],
         ["firings pruned", _int(f["pruned"]), prune],
         ["executions", _int(ex["total"]), status],
         ["predicate errors", _int(report["predicate_errors"]), ""],
         ["dead letters", _int(report["dead_letters"]), ""],
         ["dispatch failures", _int(report["dispatch_failures"]), ""]],
        "<><",
    )
    out.append("")

    out.append("Latency (ms)")
    names = {"fire_to_dispatch": "fire -> dispatch", "fire_to_claim": "fire -> claim"}
    rows = []
    for key, stats in report["latency_s"].items():
        rows.append([names.get(key, key), _int(stats["count"]), _ms(stats["mean"]), _ms(stats["p50"]),
                     _ms(stats["p95"]), _ms(stats["p99"]), _ms(stats["max"])])
    out += _table(["", "n", "mean", "p50", "p95", "p99", "max"], rows, "<>>>>>>")
    out.append("")

    out.append("Subscriptions (latency p50 in ms, watermark lag in s)")
    rows = []
    for s in report["subscriptions"]:
        rows.append([
            s["tenant"], s["reactor"], s["workflow"], _clip(s["predicate"], 36), s["state"],
            _int(s["executions"]), _ms(s["fire_to_dispatch_p50_s"]), _ms(s["fire_to_claim_p50_s"]),
            "never" if s["watermark_lag_s"] is None else _s(s["watermark_lag_s"], 2), _int(s["backlog"]),
        ])
    if rows:
        out += _table(["tenant", "reactor", "workflow", "filter", "state", "executions",
                       "dispatch", "claim", "lag", "backlog"], rows, "<<<<<>>>>>")
        out.append("  lag: virtual clock minus the watermark (the last firing passed); "
                   "backlog: retained firings after the watermark")
    else:
        out.append("  (none)")
    if ex.get("unmatched"):
        out.append(f"  {_int(ex['unmatched'])} execution(s) match no current subscription")
    return "\n".join(out) + "\n"
