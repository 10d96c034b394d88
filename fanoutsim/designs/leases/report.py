"""A leases run as a JSON-ready report dict, and that report and its checker's verdict as plain text."""

from __future__ import annotations

from typing import Any

from fanoutsim.designs.leases.config import CHOICES, LeaseConfig
from fanoutsim.kernel.frames import json_ready
from fanoutsim.kernel.report import (
    DELIVERY_COLUMNS,
    LATENCY_COLUMNS,
    Column,
    cause_text,
    columns_table,
    count,
    fault_rows,
    report_head,
    run_span,
    secs,
    short_secs,
    totals_table,
    unexplained_lines,
    verdict_head,
)


def _rows(sim):
    """The reader of ``sim``'s tables (of its named database, if it has one)."""
    return getattr(sim, "table_rows", None) or sim.store.rows


def _counts(series) -> dict[str, int]:
    return {str(k): int(n) for k, n in sorted(series.value_counts().items())}


def leases_report(sim, *, name: str | None = None, checked=None) -> dict[str, Any]:
    """One leases run (:class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`) as a plain,
    JSON-ready dict: the log (published, retained, pruned, the history incarnation),
    totals (deliveries, duplicates and losses by cause, dead letters, pending, out of
    order, crashes, restores), per consumer its limits, counts, in-flight leases,
    leases granted, nacks and expiries, the acks and nacks that failed closed by
    result (``stale_incarnation``, ``expired``, ``wrong_token``, ...), publish ->
    first delivery latency (p50, p99, max, in seconds), and the checker's totals
    under ``check``.

    Every delivery count is the checker's (:func:`~fanoutsim.designs.leases.checker.check_leases`,
    or ``checked`` if given: a check of this same run), so the report and the verdict agree."""
    import dataclasses

    from fanoutsim.designs.leases.checker import check_leases

    checked = check_leases(sim) if checked is None else checked
    t = sim.trace()
    kinds = t["kind"].value_counts()
    total = checked.total
    consumers = _consumer_reports(sim, checked, t)
    history = _rows(sim)("history")
    report = {
        **run_span(sim, name, "leases"),
        "config": dataclasses.asdict(sim.config),
        "events": {
            "published": total["published"],
            "retained": len(_rows(sim)("events")),
            "pruned": int(kinds.get("pruned", 0)),
            "incarnation": history[0]["incarnation"] if history else None,
        },
        "consumers": consumers,
        "totals": {
            **{
                k: total[k]
                for k in (
                    "published",
                    "delivered",
                    "duplicates",
                    "duplicates_by_cause",
                    "lost",
                    "lost_by_cause",
                    "dead_lettered",
                    "pending",
                    "out_of_order",
                )
            },
            "acks_refused": _counts(t.loc[t["kind"] == "ack_refused", "detail"]),
            "crashes": int(kinds.get("crashed", 0)),
            "restores": int(kinds.get("restored", 0)),
            "seeks": int(kinds.get("seek", 0)),
            "retired": int(kinds.get("retired", 0)),
        },
        "check": dict(total),
    }
    return json_ready(report)


def _consumer_reports(sim, checked, t) -> list[dict[str, Any]]:
    """Per consumer of the check (retired ones too): its limits (None once
    retired: retire deletes its row), the checker's counts, its in-flight
    leases, the trace's grants, nacks, expiries and refusals, and its publish
    -> first delivery latency."""
    import numpy as np

    from fanoutsim.kernel.timeutil import US

    rows = {r["consumer"]: r for r in _rows(sim)("lease_consumers")}
    in_flight = _counts(sim.leases()["consumer"]) if len(_rows(sim)("leases")) else {}
    published = t.loc[t["kind"] == "published"].drop_duplicates("event_id").set_index("event_id")["t"]
    delivered = t.loc[t["kind"] == "delivered", ["consumer", "event_id", "t"]]
    first = delivered.groupby(["consumer", "event_id"], as_index=False)["t"].min()
    first["latency_s"] = (first["t"] - first["event_id"].map(published)) / US

    def by(kind: str, consumer: str, column: str | None = None):
        sel = t.loc[(t["kind"] == kind) & (t["consumer"] == consumer)]
        return len(sel) if column is None else _counts(sel[column])

    def causes(frame, consumer: str) -> dict[str, int]:
        return {} if frame.empty else _counts(frame.loc[frame["consumer"] == consumer, "cause"])

    consumers = []
    for r in checked.per_consumer.to_dict("records"):
        c = r["consumer"]
        row = {} if r["retired"] else rows.get(c, {})  # retire deleted the row (and its limits)
        lat = first.loc[first["consumer"] == c, "latency_s"].dropna().to_numpy()
        consumers.append(
            {
                "consumer": c,
                "retired": bool(r["retired"]),
                "start_seq": row.get("start_seq"),
                "batch_limit": row.get("batch_limit"),
                "in_flight_limit": row.get("in_flight_limit"),
                "lease_seconds": row.get("lease_seconds"),
                "delivered": r["delivered"],
                "duplicates": r["duplicates"],
                "duplicates_by_cause": causes(checked.duplicates, c),
                "lost": r["lost"],
                "lost_by_cause": causes(checked.lost, c),
                "dead_lettered": r["dead_lettered"],
                "pending": r["pending"],
                "out_of_order": r["out_of_order"],
                "in_flight": in_flight.get(c, 0),
                "leases_granted": by("leased", c),
                "nacked": by("nacked", c),
                "expired": by("expired", c),
                "acks_refused": by("ack_refused", c, "detail"),
                "nacks_refused": by("nack_refused", c, "detail"),
                "latency_s": {
                    "p50": float(np.percentile(lat, 50)) if len(lat) else None,
                    "p99": float(np.percentile(lat, 99)) if len(lat) else None,
                    "max": float(lat.max()) if len(lat) else None,
                },
            }
        )
    return consumers


_ORDER_DETAIL = {
    "riffdb": "first leases behind a later one of the partition (effects may land in any order)",
    "head_of_line": "first deliveries behind a later one of the partition",
}


def format_leases_report(report: dict[str, Any]) -> str:
    """Render a leases report (:func:`leases_report`) as plain text."""
    out = report_head("fanoutsim leases report", report, lambda cfg: _settings(cfg, report))
    out += _totals_table(report)
    out.append("")
    out += _consumers_table(report)
    out += _failed_closed(report)
    return "\n".join(out) + "\n"


def _settings(cfg: dict[str, Any], report: dict[str, Any]) -> str:
    """The run's settings in one line: retention, recovery, the history incarnation, partition order."""
    policy = cfg.get("retention_policy", "fence")
    held = "never past a consumer's fence" if policy == "fence" else f"{policy}: no fence"
    return (
        f"retention {secs(cfg.get('retention'), 0)} s (run every {secs(cfg.get('retention_interval'), 0)} s, "
        f"{held}), recovery every "
        f"{short_secs(cfg.get('recovery_interval'))} s, "
        f"history incarnation {report['events'].get('incarnation')}, "
        f"partition order {cfg.get('partition_order', 'riffdb')}" + _rules(cfg)
    )


def _rules(cfg: dict[str, Any]) -> str:
    """The brokers' rules the run used where they are not RiffDB's (nothing under the defaults)."""
    defaults = LeaseConfig()
    differ = [
        f"{k} {cfg[k]}"
        for k in (*CHOICES, "max_deliver", "backoff")
        if k not in ("partition_order", "retention_policy")
        and k in cfg
        and _plain(cfg[k]) != _plain(getattr(defaults, k))
    ]
    return f"; brokers' rules: {', '.join(differ)}" if differ else ""


def _plain(value: Any) -> Any:
    """A config value as report.json holds it (a tuple as a list)."""
    return list(value) if isinstance(value, (tuple, list)) else value


def _totals_table(report: dict[str, Any]) -> list[str]:
    """The run's totals: the log's events, the deliveries and their faults, the
    acks that failed closed, crashes and restores."""
    cfg = report.get("config", {})
    ev, tot = report["events"], report["totals"]
    refused = tot.get("acks_refused", {})
    return totals_table(
        [
            ("events published", ev["published"], "committed to the log"),
            ("events retained", ev["retained"], "still in the log now"),
            ("events pruned", ev["pruned"], "by retention, behind the fences"),
            ("deliveries", tot["delivered"], "(consumer, event) pairs whose effect was applied"),
            *fault_rows(tot),
            ("dead-lettered", tot["dead_lettered"], "the 10th failed attempt: in dead_letters"),
            ("pending", tot["pending"], "retained, not yet acknowledged, at the end"),
            (
                "out of order",
                tot["out_of_order"],
                _ORDER_DETAIL.get(cfg.get("partition_order"), _ORDER_DETAIL["riffdb"]),
            ),
            ("acks failed closed", sum(refused.values()), cause_text(refused)),
            ("crashes", tot["crashes"], "of the node (broker and clients)"),
            ("restores", tot["restores"], "new history incarnations"),
        ]
    )


def _limits(c: dict[str, Any]) -> str:
    if c["batch_limit"] is None:
        return "-"
    return f"{c['batch_limit']}/{c['in_flight_limit']}/{c['lease_seconds']:g}"


# one row per consumer: its limits, deliveries and faults, in-flight leases and latency
_CONSUMER_COLUMNS: tuple[Column, ...] = (
    ("consumer", "<", lambda c: c["consumer"] + (" (retired)" if c["retired"] else "")),
    ("limits", "<", _limits),
    *DELIVERY_COLUMNS,
    ("dead", ">", lambda c: count(c["dead_lettered"])),
    ("pending", ">", lambda c: count(c["pending"])),
    ("in flight", ">", lambda c: count(c["in_flight"])),
    *LATENCY_COLUMNS,
)


def _consumers_table(report: dict[str, Any]) -> list[str]:
    """One row per consumer: its limits, deliveries and faults, in-flight
    leases and first-delivery latency."""
    return columns_table(
        "Consumers (limits: batch/in-flight/lease s; publish -> first delivery in s)",
        _CONSUMER_COLUMNS,
        report["consumers"],
    )


def _failed_closed(report: dict[str, Any]) -> list[str]:
    """The consumers whose acks or nacks failed closed, by result."""
    out: list[str] = []
    failed = [
        (c["consumer"], c["acks_refused"], c["nacks_refused"])
        for c in report["consumers"]
        if c["acks_refused"] or c["nacks_refused"]
    ]
    if failed:
        out.append("")
        out.append("Failed closed (the ack or nack changed nothing)")
        for name, acks, nacks in failed:
            parts = [f"acks: {cause_text(acks)}"] if acks else []
            parts += [f"nacks: {cause_text(nacks)}"] if nacks else []
            out.append(f"  {name}: {'; '.join(parts)}")
    return out


# the verdict's totals line: keys of the checker's totals, or (label, key)
_VERDICT_TOTALS = (
    "published",
    "delivered",
    "duplicates",
    "lost",
    ("dead-lettered", "dead_lettered"),
    "pending",
    ("out of order", "out_of_order"),
)


def format_leases_check(checked) -> str:
    """The leases checker's verdict (:func:`~fanoutsim.designs.leases.checker.check_leases`) as text:
    the totals, the causes, and the events that make a run INVALID."""
    lines = verdict_head("leases", checked, _VERDICT_TOTALS)
    if len(checked.out_of_order):
        lines.append("  out-of-order causes: " + cause_text(_counts(checked.out_of_order["cause"])))
    bad = [
        ("lost", checked.lost[checked.lost["cause"].isin(("pruned", "unknown"))]),
        ("duplicated with no cause", checked.duplicates[checked.duplicates["cause"] == "unknown"]),
        ("out of order with no cause", checked.out_of_order[checked.out_of_order["cause"] == "unknown"]),
    ]
    lines += unexplained_lines(bad, "consumer", lambda g: list(g["event_id"]), "events")
    if not checked.valid:
        lines.append(
            "  (valid needs no loss but by seek or retire, every duplicate caused by a lease expiry, "
            "a crash, a restore or a seek, and partition order kept: leases under RiffDB's rule, "
            "first deliveries under head-of-line)"
        )
    return "\n".join(lines)


# -- what the package template reads here (fanoutsim.kernel.design.TEMPLATE) --------
report = leases_report
format_report = format_leases_report
format_check = format_leases_check


def tables(sim) -> dict[str, Any]:
    """The run's tables written as Parquet: events, checkpoints, dead letters, consumers."""
    return {
        "events": sim.events(),
        "checkpoints": sim.checkpoints(),
        "dead_letters": sim.dead_letters(),
        "consumers": sim.consumers(),
    }
