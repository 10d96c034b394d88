"""An outbox run's report (:func:`fanoutsim.designs.outbox.analysis.outbox_report`) and its
checker's verdict as plain text. Latencies in seconds: a slow or late consumer stretches them to minutes."""

from __future__ import annotations

from typing import Any

from fanoutsim.kernel.report import (
    DELIVERY_COLUMNS,
    LATENCY_COLUMNS,
    Column,
    columns_table,
    count,
    fault_rows,
    report_head,
    secs,
    share,
    short_secs,
    totals_table,
    unexplained_lines,
    verdict_head,
)


def format_outbox_report(report: dict[str, Any]) -> str:
    """Render an outbox report (:func:`fanoutsim.designs.outbox.analysis.outbox_report`) as plain text."""
    out = report_head("fanoutsim outbox report", report, _settings)
    ob, tot = report["outbox"], report["totals"]
    out += totals_table(
        [
            ("rows committed", ob["committed"], "each with its outbox row, in one transaction"),
            ("rows retained", ob["retained"], "still in the outbox now"),
            ("rows pruned", ob["pruned"], "by the retention step"),
            ("deliveries", tot["delivered"], "(consumer, row) pairs handled at least once"),
            *fault_rows(tot, "extra_deliveries"),
            ("parked", tot["parked"], "retry budget spent: in the parked table"),
            ("pending", tot["pending"], "not delivered yet: ahead of a cursor, or deferred, at the end"),
            ("crashes", report["crashes"], "of the dispatcher process"),
        ]
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


def _settings(cfg: dict[str, Any]) -> str:
    """The run's settings in one line: the safety poll, the hints, the read mode, retention."""
    read = cfg.get("read_mode")
    if read == "settled":
        read += f" ({short_secs(cfg.get('settle'))} s)"
    elif read == "gap":
        read += f" (timeout {short_secs(cfg.get('gap_timeout'))} s)"
    return (
        f"safety poll every {short_secs(cfg.get('safety_poll_interval'))} s "
        f"(batch {cfg.get('batch_limit')}), hints {'on' if cfg.get('notify') else 'off'}, "
        f"read mode {read}, retention {secs(cfg.get('retention'), 0)} s "
        f"(pruned every {secs(cfg.get('retention_interval'), 0)} s)"
    )


# one row per consumer: its cursor, deliveries and faults, failed attempts and latency
_CONSUMER_COLUMNS: tuple[Column, ...] = (
    ("consumer", "<", lambda c: c["consumer"]),
    ("cursor", ">", lambda c: count(c["cursor"])),
    *DELIVERY_COLUMNS,
    ("parked", ">", lambda c: count(c["parked"])),
    ("pending", ">", lambda c: count(c["pending"])),
    ("failures", ">", lambda c: count(c["failures"])),
    *LATENCY_COLUMNS,
)


def _consumers_table(report: dict[str, Any]) -> list[str]:
    """One row per consumer: its cursor, deliveries and faults, failed attempts
    and commit -> handled latency."""
    return columns_table(
        "Consumers (commit -> handled latency in s)",
        _CONSUMER_COLUMNS,
        report["consumers"],
        "  failures: failed attempts (retried with backoff; the budget-th parks the row)\n"
        # a row counts as delivered when its handler ran, before the cursor moves past it
        "  cursor: the last seq handled in full; a row whose step was still running at the end is delivered, "
        "not pending",
    )


# the verdict's totals line: keys of the checker's totals, or (label, key)
_VERDICT_TOTALS = ("committed", "delivered", ("duplicates", "extra_deliveries"), "lost", "parked", "pending")


def format_outbox_check(checked) -> str:
    """The outbox checker's verdict (:func:`fanoutsim.designs.outbox.checker.check_outbox`) as text:
    the totals, the causes, and the rows that make a run INVALID."""
    lines = verdict_head("outbox", checked, _VERDICT_TOTALS)
    bad_lost = checked.lost[checked.lost["cause"].isin(("late_commit", "unknown"))]
    bad_dups = checked.duplicates[checked.duplicates["cause"] == "unknown"]
    bad = (("lost", bad_lost), ("duplicated with no cause", bad_dups))
    lines += unexplained_lines(bad, "consumer", lambda g: [str(s) for s in sorted(int(s) for s in g["seq"])], "seqs")
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
