"""A delivery report (:func:`fanoutsim.analysis.delivery_report`) as plain text,
and an outbox run's report (:func:`fanoutsim.analysis.outbox.outbox_report`,
:func:`format_outbox_report`) and its checker's verdict (:func:`format_outbox_check`).

The text depends only on the report dict — no wall-clock values, no
environment — so the same seed prints the same report, byte for byte.
Latencies are shown in milliseconds (an outbox run's, which a slow or late
consumer stretches to minutes, in seconds), watermark lag in seconds.
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["format_report", "format_outbox_report", "format_outbox_check"]

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


def _header(title: str, report: dict[str, Any]) -> list[str]:
    """The title (with the scenario's name), underlined, and the run's span."""
    if report.get("scenario"):
        title += f": {report['scenario']}"
    return [title, "=" * len(title),
            f"seed {report['seed']}, virtual time {_s(report['time_span_s'])} s ({report['start']} .. {report['end']})"]


def format_report(report: dict[str, Any]) -> str:
    """Render a delivery report as an aligned plain-text table."""
    out = _header("fanoutsim delivery report", report)
    cfg = report.get("config", {})
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


# -- the outbox design (seed 002) ----------------------------------------------------
def _causes(by_cause: dict[str, int]) -> str:
    return ", ".join(f"{c} {_int(n)}" for c, n in sorted(by_cause.items()))


def _with_causes(n: int, by_cause: dict[str, int]) -> str:
    return f"{_int(n)} ({_causes(by_cause)})" if n and by_cause else _int(n)


def _share(part: int, whole: int) -> str:
    return f" ({part / whole:.1%})" if whole else ""


def format_outbox_report(report: dict[str, Any]) -> str:
    """Render an outbox report (:func:`fanoutsim.analysis.outbox.outbox_report`) as plain text."""
    out = _header("fanoutsim outbox report", report)
    cfg = report.get("config", {})
    if cfg:
        read = cfg.get("read_mode")
        if read == "settled":
            read += f" ({_s(cfg.get('settle'), 3).rstrip('0').rstrip('.')} s)"
        elif read == "gap":
            read += f" (timeout {_s(cfg.get('gap_timeout'), 3).rstrip('0').rstrip('.')} s)"
        out.append(
            f"safety poll every {_s(cfg.get('safety_poll_interval'), 3).rstrip('0').rstrip('.')} s "
            f"(batch {cfg.get('batch_limit')}), hints {'on' if cfg.get('notify') else 'off'}, "
            f"read mode {read}, retention {_s(cfg.get('retention'), 0)} s "
            f"(pruned every {_s(cfg.get('retention_interval'), 0)} s)")
    out.append("")

    ob, tot = report["outbox"], report["totals"]
    out += _table(
        ["totals", "count", "detail"],
        [["rows committed", _int(ob["committed"]), "each with its outbox row, in one transaction"],
         ["rows retained", _int(ob["retained"]), "still in the outbox now"],
         ["rows pruned", _int(ob["pruned"]), "by the retention step"],
         ["deliveries", _int(tot["delivered"]), "(consumer, row) pairs handled at least once"],
         ["duplicates", _int(tot["extra_deliveries"]), _causes(tot["duplicates_by_cause"])],
         ["lost", _int(tot["lost"]), _causes(tot["lost_by_cause"])],
         ["parked", _int(tot["parked"]), "retry budget spent: in the parked table"],
         ["pending", _int(tot["pending"]), "ahead of a cursor, or deferred, at the end"],
         ["crashes", _int(report["crashes"]), "of the dispatcher process"]],
        "<><",
    )
    out.append("")

    out.append("Consumers (commit -> handled latency in s)")
    rows = []
    for c in report["consumers"]:
        lat = c["latency_s"]
        rows.append([c["consumer"], _int(c["cursor"]), _int(c["delivered"]),
                     _with_causes(c["duplicates"], c["duplicates_by_cause"]),
                     _with_causes(c["lost"], c["lost_by_cause"]), _int(c["parked"]), _int(c["pending"]),
                     _int(c["failures"]), _s(lat["p50"], 3), _s(lat["p99"], 3), _s(lat["max"], 3)])
    if rows:
        out += _table(["consumer", "cursor", "delivered", "duplicates", "lost", "parked", "pending",
                       "failures", "p50", "p99", "max"], rows, "<>>>>>>>>>>")
        out.append("  failures: failed attempts (retried with backoff; the budget-th parks the row)")
    else:
        out.append("  (none)")
    out.append("")

    h, bus = report["hints"], report["bus"]
    out.append(f"Hints: {_int(h['sent'])} sent, {_int(h['dropped'])} dropped{_share(h['dropped'], h['sent'])}, "
               f"{_int(h['missed'])} missed (no listener), {_int(h['coalesced'])} coalesced; "
               f"a row without its hint waits for the safety poll")
    out.append(f"Topic bus (best effort, not durable): {_int(bus['published'])} rows published, "
               f"{_int(bus['unpublished'])} never, {_int(bus['receipts'])} receipts by live subscribers")
    return "\n".join(out) + "\n"


def format_outbox_check(checked) -> str:
    """The outbox checker's verdict (:func:`fanoutsim.outbox.checker.check_outbox`) as text:
    the totals, the causes, and the rows that make a run INVALID."""
    t = checked.total
    lines = [f"outbox check: {'VALID' if checked.valid else 'INVALID'}",
             f"  committed {t['committed']}  delivered {t['delivered']}  duplicates {t['extra_deliveries']}  "
             f"lost {t['lost']}  parked {t['parked']}  pending {t['pending']}"]
    if t["duplicates_by_cause"]:
        lines.append("  duplicate causes: " + _causes(t["duplicates_by_cause"]))
    if t["lost_by_cause"]:
        lines.append("  loss causes: " + _causes(t["lost_by_cause"]))
    bad_lost = checked.lost[checked.lost["cause"].isin(("late_commit", "unknown"))]
    bad_dups = checked.duplicates[checked.duplicates["cause"] == "unknown"]
    for what, frame in (("lost", bad_lost), ("duplicated with no cause", bad_dups)):
        for consumer, g in frame.groupby("consumer", sort=True):
            seqs = sorted(int(s) for s in g["seq"])
            shown = ", ".join(map(str, seqs[:10])) + (f", ... ({len(seqs)} in all)" if len(seqs) > 10 else "")
            causes = ", ".join(sorted(set(g["cause"])))
            lines.append(f"  {consumer}: {what} ({causes}): seqs {shown}")
    if not checked.valid:
        lines.append("  (valid needs every loss documented — pruned, gap_timeout — and every duplicate "
                     "caused by a crash or a reset)")
    return "\n".join(lines)
