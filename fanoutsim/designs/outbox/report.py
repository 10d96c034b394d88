"""An outbox run's report (:func:`fanoutsim.designs.outbox.analysis.outbox_report`) and its
checker's verdict as plain text. Latencies in seconds: a slow or late consumer stretches them to minutes."""

from __future__ import annotations

from typing import Any

from fanoutsim.kernel.report import (
    cause_lines,
    cause_text,
    count,
    header,
    secs,
    share,
    table,
    with_causes,
)


def format_outbox_report(report: dict[str, Any]) -> str:
    """Render an outbox report (:func:`fanoutsim.designs.outbox.analysis.outbox_report`) as plain text."""
    out = header("fanoutsim outbox report", report)
    cfg = report.get("config", {})
    if cfg:
        read = cfg.get("read_mode")
        if read == "settled":
            read += f" ({secs(cfg.get('settle'), 3).rstrip('0').rstrip('.')} s)"
        elif read == "gap":
            read += f" (timeout {secs(cfg.get('gap_timeout'), 3).rstrip('0').rstrip('.')} s)"
        out.append(
            f"safety poll every {secs(cfg.get('safety_poll_interval'), 3).rstrip('0').rstrip('.')} s "
            f"(batch {cfg.get('batch_limit')}), hints {'on' if cfg.get('notify') else 'off'}, "
            f"read mode {read}, retention {secs(cfg.get('retention'), 0)} s "
            f"(pruned every {secs(cfg.get('retention_interval'), 0)} s)"
        )
    out.append("")

    ob, tot = report["outbox"], report["totals"]
    out += table(
        ["totals", "count", "detail"],
        [
            ["rows committed", count(ob["committed"]), "each with its outbox row, in one transaction"],
            ["rows retained", count(ob["retained"]), "still in the outbox now"],
            ["rows pruned", count(ob["pruned"]), "by the retention step"],
            ["deliveries", count(tot["delivered"]), "(consumer, row) pairs handled at least once"],
            ["duplicates", count(tot["extra_deliveries"]), cause_text(tot["duplicates_by_cause"])],
            ["lost", count(tot["lost"]), cause_text(tot["lost_by_cause"])],
            ["parked", count(tot["parked"]), "retry budget spent: in the parked table"],
            ["pending", count(tot["pending"]), "ahead of a cursor, or deferred, at the end"],
            ["crashes", count(report["crashes"]), "of the dispatcher process"],
        ],
        "<><",
    )
    out.append("")

    out += _consumers_table(report)
    out.append("")

    h, bus = report["hints"], report["bus"]
    out.append(
        f"Hints: {count(h['sent'])} sent, {count(h['dropped'])} dropped{share(h['dropped'], h['sent'])}, "
        f"{count(h['missed'])} missed (no listener), {count(h['coalesced'])} coalesced; "
        f"a row without its hint waits for the safety poll"
    )
    out.append(
        f"Topic bus (best effort, not durable): {count(bus['published'])} rows published, "
        f"{count(bus['unpublished'])} never, {count(bus['receipts'])} receipts by live subscribers"
    )
    return "\n".join(out) + "\n"


def _consumers_table(report: dict[str, Any]) -> list[str]:
    """One row per consumer: its cursor, deliveries and faults, failed attempts
    and commit -> handled latency."""
    out: list[str] = []
    out.append("Consumers (commit -> handled latency in s)")
    rows = []
    for c in report["consumers"]:
        lat = c["latency_s"]
        rows.append(
            [
                c["consumer"],
                count(c["cursor"]),
                count(c["delivered"]),
                with_causes(c["duplicates"], c["duplicates_by_cause"]),
                with_causes(c["lost"], c["lost_by_cause"]),
                count(c["parked"]),
                count(c["pending"]),
                count(c["failures"]),
                secs(lat["p50"], 3),
                secs(lat["p99"], 3),
                secs(lat["max"], 3),
            ]
        )
    if rows:
        out += table(
            [
                "consumer",
                "cursor",
                "delivered",
                "duplicates",
                "lost",
                "parked",
                "pending",
                "failures",
                "p50",
                "p99",
                "max",
            ],
            rows,
            "<>>>>>>>>>>",
        )
        out.append("  failures: failed attempts (retried with backoff; the budget-th parks the row)")
    else:
        out.append("  (none)")
    return out


def format_outbox_check(checked) -> str:
    """The outbox checker's verdict (:func:`fanoutsim.designs.outbox.checker.check_outbox`) as text:
    the totals, the causes, and the rows that make a run INVALID."""
    t = checked.total
    lines = [
        f"outbox check: {'VALID' if checked.valid else 'INVALID'}",
        f"  committed {t['committed']}  delivered {t['delivered']}  duplicates {t['extra_deliveries']}  "
        f"lost {t['lost']}  parked {t['parked']}  pending {t['pending']}",
    ]
    lines += cause_lines(t)
    bad_lost = checked.lost[checked.lost["cause"].isin(("late_commit", "unknown"))]
    bad_dups = checked.duplicates[checked.duplicates["cause"] == "unknown"]
    for what, frame in (("lost", bad_lost), ("duplicated with no cause", bad_dups)):
        for consumer, g in frame.groupby("consumer", sort=True):
            seqs = sorted(int(s) for s in g["seq"])
            shown = ", ".join(map(str, seqs[:10])) + (f", ... ({len(seqs)} in all)" if len(seqs) > 10 else "")
            causes = ", ".join(sorted(set(g["cause"])))
            lines.append(f"  {consumer}: {what} ({causes}): seqs {shown}")
    if not checked.valid:
        lines.append(
            "  (valid needs every loss documented — pruned, gap_timeout — and every duplicate "
            "caused by a crash or a reset)"
        )
    return "\n".join(lines)


# -- what the package template reads here (fanoutsim.kernel.design.TEMPLATE) --------
format_report = format_outbox_report
format_check = format_outbox_check


def report(sim, *, name: str | None = None, checked=None) -> dict[str, Any]:
    """One run as a plain, JSON-ready dict (:func:`~.analysis.outbox_report`)."""
    from .analysis import outbox_report

    return outbox_report(sim, name=name, checked=checked)


def tables(sim) -> dict[str, Any]:
    """The run's tables written as Parquet: the outbox, the cursors, parked rows."""
    return {"outbox": sim.outbox(), "cursors": sim.cursors(), "parked": sim.parked()}
