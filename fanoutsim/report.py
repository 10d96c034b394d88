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

from .frames import json_ready

__all__ = ["format_report", "format_outbox_report", "format_outbox_check", "leases_report",
           "format_leases_report", "format_leases_check"]

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


# -- the leased-consumer design (seed 003) ---------------------------------------------
def _counts(series) -> dict[str, int]:
    return {str(k): int(n) for k, n in sorted(series.value_counts().items())}


def leases_report(sim, *, name: str | None = None, checked=None) -> dict[str, Any]:
    """One leases run (:class:`~fanoutsim.runtime.leases.LeaseSimulation`) as a plain,
    JSON-ready dict: the log (published, retained, pruned, the history incarnation),
    totals (deliveries, duplicates and losses by cause, dead letters, pending, out of
    order, crashes, restores), per consumer its limits, counts, in-flight leases,
    leases granted, nacks and expiries, the acks and nacks that failed closed by
    result (``stale_incarnation``, ``expired``, ``wrong_token``, ...), publish ->
    first delivery latency (p50, p99, max, in seconds), and the checker's totals
    under ``check``.

    Every delivery count is the checker's (:func:`~fanoutsim.leases.checker.check_leases`,
    or ``checked`` if given: a check of this same run), so the report and the verdict agree."""
    import dataclasses

    import numpy as np

    from .leases.checker import check_leases
    from .timeutil import US, rfc3339

    checked = check_leases(sim) if checked is None else checked
    t = sim.trace()
    kinds = t["kind"].value_counts()
    total = checked.total
    rows = {r["consumer"]: r for r in sim.store.rows("lease_consumers")}
    in_flight = _counts(sim.leases()["consumer"]) if len(sim.store.rows("leases")) else {}
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
        consumers.append({
            "consumer": c, "retired": bool(r["retired"]), "start_seq": row.get("start_seq"),
            "batch_limit": row.get("batch_limit"), "in_flight_limit": row.get("in_flight_limit"),
            "lease_seconds": row.get("lease_seconds"),
            "delivered": r["delivered"], "duplicates": r["duplicates"],
            "duplicates_by_cause": causes(checked.duplicates, c),
            "lost": r["lost"], "lost_by_cause": causes(checked.lost, c),
            "dead_lettered": r["dead_lettered"], "pending": r["pending"], "out_of_order": r["out_of_order"],
            "in_flight": in_flight.get(c, 0), "leases_granted": by("leased", c),
            "nacked": by("nacked", c), "expired": by("expired", c),
            "acks_refused": by("ack_refused", c, "detail"), "nacks_refused": by("nack_refused", c, "detail"),
            "latency_s": {"p50": float(np.percentile(lat, 50)) if len(lat) else None,
                          "p99": float(np.percentile(lat, 99)) if len(lat) else None,
                          "max": float(lat.max()) if len(lat) else None},
        })
    history = sim.store.rows("history")
    report = {
        "scenario": name,
        "design": "leases",
        "seed": sim.seed,
        "start": rfc3339(sim.start_us),
        "end": rfc3339(sim.now_us()),
        "time_span_s": float(sim.now),
        "config": dataclasses.asdict(sim.config),
        "events": {"published": total["published"], "retained": len(sim.store.rows("events")),
                   "pruned": int(kinds.get("pruned", 0)),
                   "incarnation": history[0]["incarnation"] if history else None},
        "consumers": consumers,
        "totals": {**{k: total[k] for k in ("published", "delivered", "duplicates", "duplicates_by_cause",
                                            "lost", "lost_by_cause", "dead_lettered", "pending",
                                            "out_of_order")},
                   "acks_refused": _counts(t.loc[t["kind"] == "ack_refused", "detail"]),
                   "crashes": int(kinds.get("crashed", 0)), "restores": int(kinds.get("restored", 0)),
                   "seeks": int(kinds.get("seek", 0)), "retired": int(kinds.get("retired", 0))},
        "check": dict(total),
    }
    return json_ready(report)


_ORDER_DETAIL = {"riffdb": "first leases behind a later one of the partition (effects may land in any order)",
                 "head_of_line": "first deliveries behind a later one of the partition"}


def format_leases_report(report: dict[str, Any]) -> str:
    """Render a leases report (:func:`leases_report`) as plain text."""
    out = _header("fanoutsim leases report", report)
    cfg = report.get("config", {})
    if cfg:
        out.append(f"retention {_s(cfg.get('retention'), 0)} s (run every {_s(cfg.get('retention_interval'), 0)} s, "
                   f"never past a consumer's fence), recovery every "
                   f"{_s(cfg.get('recovery_interval'), 3).rstrip('0').rstrip('.')} s, "
                   f"history incarnation {report['events'].get('incarnation')}, "
                   f"partition order {cfg.get('partition_order', 'riffdb')}")
    out.append("")

    ev, tot = report["events"], report["totals"]
    refused = tot.get("acks_refused", {})
    out += _table(
        ["totals", "count", "detail"],
        [["events published", _int(ev["published"]), "committed to the log"],
         ["events retained", _int(ev["retained"]), "still in the log now"],
         ["events pruned", _int(ev["pruned"]), "by retention, behind the fences"],
         ["deliveries", _int(tot["delivered"]), "(consumer, event) pairs whose effect was applied"],
         ["duplicates", _int(tot["duplicates"]), _causes(tot["duplicates_by_cause"])],
         ["lost", _int(tot["lost"]), _causes(tot["lost_by_cause"])],
         ["dead-lettered", _int(tot["dead_lettered"]), "the 10th failed attempt: in dead_letters"],
         ["pending", _int(tot["pending"]), "retained, not yet acknowledged, at the end"],
         ["out of order", _int(tot["out_of_order"]), _ORDER_DETAIL.get(cfg.get("partition_order"),
                                                                      _ORDER_DETAIL["riffdb"])],
         ["acks failed closed", _int(sum(refused.values())), _causes(refused)],
         ["crashes", _int(tot["crashes"]), "of the node (broker and clients)"],
         ["restores", _int(tot["restores"]), "new history incarnations"]],
        "<><",
    )
    out.append("")

    out.append("Consumers (limits: batch/in-flight/lease s; publish -> first delivery in s)")
    rows = []
    for c in report["consumers"]:
        lat = c["latency_s"]
        name = c["consumer"] + (" (retired)" if c["retired"] else "")
        limits = ("-" if c["batch_limit"] is None
                  else f"{c['batch_limit']}/{c['in_flight_limit']}/{c['lease_seconds']:g}")
        rows.append([name, limits, _int(c["delivered"]),
                     _with_causes(c["duplicates"], c["duplicates_by_cause"]),
                     _with_causes(c["lost"], c["lost_by_cause"]), _int(c["dead_lettered"]), _int(c["pending"]),
                     _int(c["in_flight"]), _s(lat["p50"], 3), _s(lat["p99"], 3), _s(lat["max"], 3)])
    if rows:
        out += _table(["consumer", "limits", "delivered", "duplicates", "lost", "dead", "pending", "in flight",
                       "p50", "p99", "max"], rows, "<<>>>>>>>>>")
    else:
        out.append("  (none)")
    failed = [(c["consumer"], c["acks_refused"], c["nacks_refused"]) for c in report["consumers"]
              if c["acks_refused"] or c["nacks_refused"]]
    if failed:
        out.append("")
        out.append("Failed closed (the ack or nack changed nothing)")
        for name, acks, nacks in failed:
            parts = [f"acks: {_causes(acks)}"] if acks else []
            parts += [f"nacks: {_causes(nacks)}"] if nacks else []
            out.append(f"  {name}: {'; '.join(parts)}")
    return "\n".join(out) + "\n"


def format_leases_check(checked) -> str:
    """The leases checker's verdict (:func:`~fanoutsim.leases.checker.check_leases`) as text:
    the totals, the causes, and the events that make a run INVALID."""
    t = checked.total
    lines = [f"leases check: {'VALID' if checked.valid else 'INVALID'}",
             f"  published {t['published']}  delivered {t['delivered']}  duplicates {t['duplicates']}  "
             f"lost {t['lost']}  dead-lettered {t['dead_lettered']}  pending {t['pending']}  "
             f"out of order {t['out_of_order']}"]
    if t["duplicates_by_cause"]:
        lines.append("  duplicate causes: " + _causes(t["duplicates_by_cause"]))
    if t["lost_by_cause"]:
        lines.append("  loss causes: " + _causes(t["lost_by_cause"]))
    if len(checked.out_of_order):
        lines.append("  out-of-order causes: " + _causes(_counts(checked.out_of_order["cause"])))
    bad = [("lost", checked.lost[checked.lost["cause"].isin(("pruned", "unknown"))]),
           ("duplicated with no cause", checked.duplicates[checked.duplicates["cause"] == "unknown"]),
           ("out of order with no cause", checked.out_of_order[checked.out_of_order["cause"] == "unknown"])]
    for what, frame in bad:
        for consumer, g in frame.groupby("consumer", sort=True):
            ids = list(g["event_id"])
            shown = ", ".join(ids[:10]) + (f", ... ({len(ids)} in all)" if len(ids) > 10 else "")
            causes = ", ".join(sorted(set(g["cause"])))
            lines.append(f"  {consumer}: {what} ({causes}): events {shown}")
    if not checked.valid:
        lines.append("  (valid needs no loss but by seek or retire, every duplicate caused by a lease expiry, "
                     "a crash, a restore or a seek, and partition order kept: leases under RiffDB's rule, "
                     "first deliveries under head-of-line)")
    return "\n".join(lines)
