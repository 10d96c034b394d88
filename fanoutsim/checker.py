"""The delivery checker: what was lost, what was duplicated, and why.

In the spirit of Jepsen's total-queue checker, it compares what writers put in
(the trace's firing history) with what subscribers got out (the
``workflow_executions`` table), per subscription, and explains every
difference from the trace alone — never from the fault plan.

For each subscription, a firing is

*expected*      when it was durably logged for the subscription's reactor and
                tenant after the subscription existed, and the subscription's
                CEL filter, evaluated here independently, is true for it;
*delivered*     once or more (each extra delivery is a *duplicate*);
*pending*       when undelivered but still in the log past the watermark:
                backlog, not loss;
*lost*          otherwise.

Causes of a duplicate (the extra delivery's story in the trace):

``ambiguous_insert``   the previous insert committed but reported failure, and was retried
``crash``              the runner crashed after the dispatch and before the watermark passed it
``several_pollers``    another poller replica dispatched it too
``watermark_rewind``   the watermark moved backwards and the firing was read again

Causes of a loss:

``pruned``             deleted by the prune loop before any delivery
``tie``                the watermark landed exactly on its ``fired_at`` via a sibling
                       firing with the same timestamp (the strict ``>`` skips it)
``late_visibility``    it became visible after the watermark had passed its
                       ``fired_at`` (a late commit or a lagging writer clock)
``dispatch_failed``    its insert failed and the watermark advanced anyway
``never_logged``       the writer crashed after the in-process graphs ran and
                       before the row was written (reported apart: not expected)

``valid`` is true when nothing was lost that the configuration promises to
deliver: a TTL prune (``prune_policy="ttl"``) and ``dispatch_failure_policy=
"advance"`` are documented ways to drop firings, every other loss is a broken
promise.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd

from .payload import decode_sources
from .predicate import activation, compile_predicate

LOSS_CAUSES = ("pruned", "tie", "late_visibility", "dispatch_failed", "unknown")
DUPLICATE_CAUSES = ("ambiguous_insert", "crash", "several_pollers", "watermark_rewind", "unknown")


@dataclass
class CheckReport:
    per_subscription: pd.DataFrame
    duplicates: pd.DataFrame   # one row per extra delivery
    lost: pd.DataFrame         # one row per (subscription, lost firing)
    never_logged: pd.DataFrame
    total: dict = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return bool(self.total.get("valid", True))

    def __str__(self) -> str:
        return format_check(self)

    def _repr_html_(self) -> str:
        return f"<pre>{format_check(self)}</pre>"


def _sub_key(row) -> tuple:
    return (row["workflow_name"], row["tenant_id"], row["reactor_name"])


def check(sim) -> CheckReport:
    """Check every subscription of a finished (or paused) run."""
    cfg = sim.config
    compound = cfg.watermark != "fired_at"  # the cursor is (fired_at, id)
    trace = sim.trace()
    history = trace.history
    subs = sim.subscriptions()
    ex = sim.executions()
    retained = set(sim.firings()["id"])

    logged = history[history["logged_at"].notna()]
    never = history[history["logged_at"].isna()]
    by_stream = {k: g for k, g in logged.groupby(["reactor_name", "tenant_id"], sort=False)}
    never_by_stream = {k: g for k, g in never.groupby(["reactor_name", "tenant_id"], sort=False)}
    ex_by_sub = {k: g for k, g in ex.groupby(["workflow_name", "tenant_id", "reactor_name"], sort=False)}

    ev = trace[["t", "kind", "actor", "subscription", "firing", "execution", "detail"]]
    ev = ev.assign(seq=range(len(ev)))
    per_sub_ev = {k: g for k, g in ev[ev["subscription"].notna()].groupby("subscription", sort=False)}
    crashes = ev.loc[ev["kind"] == "crashed", "seq"].tolist()
    pruned_at = dict(zip(ev.loc[(ev["kind"] == "pruned") & ev["firing"].notna(), "firing"],
                         ev.loc[(ev["kind"] == "pruned") & ev["firing"].notna(), "t"]))
    existing_ids = set(ex["id"])

    rows, dup_rows, lost_rows, never_rows = [], [], [], []
    for _, s in subs.iterrows():
        sid = s["id"]
        key = (s["reactor_name"], s["tenant_id"])
        created = int(s["created_at"].value // 1000)
        pred = compile_predicate(s["predicate"]) if s["predicate"] is not None else None

        def passes(payload, reactor=s["reactor_name"], tenant=s["tenant_id"]):
            if pred is None:
                return True
            value, error = pred.evaluate(activation(decode_sources(payload), reactor, tenant))
            return value is True

        stream = by_stream.get(key)
        expected, backfilled = [], 0
        if stream is not None:
            for f in stream.itertuples(index=False):
                if not passes(f.payload):
                    continue
                if f.logged_at < created:
                    backfilled += 1
                    continue
                expected.append(f)
        for f in (never_by_stream.get(key).itertuples(index=False) if key in never_by_stream else ()):
            if passes(f.payload):
                never_rows.append({"subscription": sid, "workflow_name": s["workflow_name"],
                                   "tenant_id": s["tenant_id"], "firing": f.firing,
                                   "cause": "never_logged"})

        mine = ex_by_sub.get(_sub_key(s))
        deliveries = defaultdict(list)  # firing -> [execution ids in dispatch order]
        if mine is not None:
            for fid, eid in zip(mine["reactor_firing_id"], mine["id"]):
                deliveries[fid].append(eid)
        sev = per_sub_ev.get(sid, ev.iloc[0:0])
        dispatch_seq = dict(zip(sev.loc[sev["kind"] == "dispatched", "execution"],
                                sev.loc[sev["kind"] == "dispatched", "seq"]))
        dispatch_actor = dict(zip(sev.loc[sev["kind"] == "dispatched", "execution"],
                                  sev.loc[sev["kind"] == "dispatched", "actor"]))
        failed = sev[sev["kind"] == "dispatch_failed"]
        failed_by_firing = defaultdict(list)
        for fid, eid, seq in zip(failed["firing"], failed["execution"], failed["seq"]):
            failed_by_firing[fid].append((seq, eid))
        wm = sev[sev["kind"] == "watermark"]
        wm_seq = wm["seq"].tolist()
        wm_val = [int(v) for v in wm["detail"]]
        wm_t = wm["t"].tolist()
        wm_firing = wm["firing"].tolist()
        rewinds = [wm_seq[i] for i in range(1, len(wm_val)) if wm_val[i] < wm_val[i - 1]]

        end_wm = s["last_seen_fired_at"]
        end_wm = None if pd.isna(end_wm) else int(end_wm.value // 1000)
        end_wm_id = s["last_seen_firing_id"] or ""
        once = dup_firings = extra = lost = lost_promised = pending = 0
        for f in expected:
            got = deliveries.get(f.firing, [])
            if got:
                if len(got) == 1:
                    once += 1
                    continue
                dup_firings += 1
                # all rows of this firing, in the order they were committed
                commits = sorted(
                    [(dispatch_seq[e], e) for e in got if e in dispatch_seq]
                    + [(seq, e) for seq, e in failed_by_firing.get(f.firing, ()) if e in existing_ids])
                for (prev_seq, prev_eid), (seq, eid) in zip(commits, commits[1:]):
                    extra += 1
                    if prev_eid not in dispatch_seq:
                        cause = "ambiguous_insert"
                    elif dispatch_actor.get(prev_eid) != dispatch_actor.get(eid):
                        cause = "several_pollers"
                    elif any(prev_seq < c < seq for c in crashes):
                        cause = "crash"
                    elif any(prev_seq < r < seq for r in rewinds):
                        cause = "watermark_rewind"
                    else:
                        cause = "unknown"
                    dup_rows.append({"subscription": sid, "workflow_name": s["workflow_name"],
                                     "tenant_id": s["tenant_id"], "firing": f.firing,
                                     "execution": eid, "cause": cause})
                continue
            if f.firing in retained and (end_wm is None or (f.fired_at, f.firing if compound else "")
                                         > (end_wm, end_wm_id if compound else "\uffff")):
                pending += 1  # still ahead of the cursor: backlog, not loss
                continue
            # lost: find the first watermark move at or past its fired_at
            cause, detail = "unknown", None
            passed = next((i for i, v in enumerate(wm_val) if v >= f.fired_at), None)
            pruned = pruned_at.get(f.firing)
            if passed is not None and (pruned is None or wm_t[passed] <= pruned):
                if wm_firing[passed] == f.firing:  # moved past it by its own hand
                    if f.firing in failed_by_firing:
                        cause = "dispatch_failed"
                elif f.logged_at > wm_t[passed]:
                    cause = "late_visibility"
                    detail = f"visible {(f.logged_at - wm_t[passed]) / 1e6:.3f} s after the watermark passed it"
                elif wm_val[passed] == f.fired_at:
                    cause = "tie"
            elif pruned is not None:
                cause = "pruned"
            promised = not ((cause == "pruned" and cfg.prune_policy == "ttl")
                            or (cause == "dispatch_failed" and cfg.dispatch_failure_policy == "advance"))
            lost += 1
            lost_promised += promised
            lost_rows.append({"subscription": sid, "workflow_name": s["workflow_name"],
                              "tenant_id": s["tenant_id"], "firing": f.firing, "cause": cause,
                              "promised": promised, "detail": detail})

        out_of_order = _out_of_order(expected, deliveries, dispatch_seq)
        rows.append({
            "subscription": sid, "reactor_name": s["reactor_name"], "workflow_name": s["workflow_name"],
            "tenant_id": s["tenant_id"], "expected": len(expected), "delivered_once": once,
            "duplicated": dup_firings, "extra_deliveries": extra, "lost": lost,
            "lost_promised": lost_promised, "pending": pending, "out_of_order": out_of_order,
            "backfilled": backfilled, "valid": lost_promised == 0,
        })

    per_sub = pd.DataFrame(rows, columns=[
        "subscription", "reactor_name", "workflow_name", "tenant_id", "expected", "delivered_once",
        "duplicated", "extra_deliveries", "lost", "lost_promised", "pending", "out_of_order",
        "backfilled", "valid"])
    dups = pd.DataFrame(dup_rows, columns=["subscription", "workflow_name", "tenant_id", "firing",
                                           "execution", "cause"])
    lost_df = pd.DataFrame(lost_rows, columns=["subscription", "workflow_name", "tenant_id", "firing",
                                               "cause", "promised", "detail"])
    never_df = pd.DataFrame(never_rows, columns=["subscription", "workflow_name", "tenant_id", "firing", "cause"])
    total = {k: int(per_sub[k].sum()) for k in
             ("expected", "delivered_once", "duplicated", "extra_deliveries", "lost", "lost_promised",
              "pending", "out_of_order", "backfilled")}
    total["never_logged"] = len(never_df)
    total["duplicate_causes"] = {c: int(n) for c, n in dups["cause"].value_counts().items()}
    total["loss_causes"] = {c: int(n) for c, n in lost_df["cause"].value_counts().items()}
    total["valid"] = bool(per_sub["valid"].all()) if len(per_sub) else True
    return CheckReport(per_sub, dups, lost_df, never_df, total)


def _out_of_order(expected, deliveries, dispatch_seq) -> int:
    """Firings first delivered after a firing with a later fired_at was."""
    firsts = []
    for f in expected:
        seqs = [dispatch_seq[e] for e in deliveries.get(f.firing, ()) if e in dispatch_seq]
        if seqs:
            firsts.append((min(seqs), f.fired_at))
    firsts.sort()
    count, high = 0, None
    for _, fired_at in firsts:
        if high is not None and fired_at < high:
            count += 1
        high = fired_at if high is None else max(high, fired_at)
    return count


def format_check(report: CheckReport) -> str:
    t = report.total
    lines = [f"delivery check: {'VALID' if report.valid else 'INVALID'}",
             f"  expected {t['expected']}  delivered once {t['delivered_once']}  "
             f"duplicated {t['duplicated']} (+{t['extra_deliveries']} extra deliveries)  "
             f"lost {t['lost']} ({t['lost_promised']} promised)  pending {t['pending']}  "
             f"out of order {t['out_of_order']}  never logged {t['never_logged']}"]
    if t["duplicate_causes"]:
        lines.append("  duplicate causes: " + ", ".join(f"{c} {n}" for c, n in sorted(t["duplicate_causes"].items())))
    if t["loss_causes"]:
        lines.append("  loss causes: " + ", ".join(f"{c} {n}" for c, n in sorted(t["loss_causes"].items())))
    df = report.per_subscription
    if len(df):
        lines.append("")
        lines.append(f"  {'subscription':<36} {'expected':>8} {'once':>6} {'dup':>5} {'lost':>5} "
                     f"{'pend':>5} {'ooo':>5}  valid")
        for r in df.itertuples(index=False):
            name = f"{r.reactor_name}->{r.workflow_name}@{r.tenant_id}"
            lines.append(f"  {name[:36]:<36} {r.expected:>8} {r.delivered_once:>6} {r.extra_deliveries:>5} "
                         f"{r.lost:>5} {r.pending:>5} {r.out_of_order:>5}  {'yes' if r.valid else 'NO'}")
    return "\n".join(lines)


def explain(sim, firing_id: str, subscription: str | None = None, *, show: bool = True) -> pd.DataFrame:
    """One firing's timeline: its own events, the watermark moves of the
    subscription(s) around it, and crashes. Prints it unless ``show=False``."""
    trace = sim.trace()
    hist = trace.history
    h = hist[hist["firing"] == firing_id]
    if h.empty:
        raise KeyError(f"firing {firing_id!r} is not in this run's history")
    f = h.iloc[0]
    subs = sim.subscriptions()
    if subscription is not None:
        if subscription not in set(subs["id"]):
            raise KeyError(f"subscription {subscription!r} does not exist; "
                           f"known: {', '.join(subs['id'])}")
        sub_ids = {subscription}
    else:
        sub_ids = set(subs[(subs["reactor_name"] == f["reactor_name"])
                           & (subs["tenant_id"] == f["tenant_id"])]["id"])
    mask = (trace["firing"] == firing_id) | (trace["kind"].isin(["crashed", "restarted"]))
    wm = (trace["kind"] == "watermark") & trace["subscription"].isin(sub_ids)
    ex_ids = set(sim.executions().query("reactor_firing_id == @firing_id")["id"])
    mask |= trace["execution"].isin(ex_ids)
    # watermark moves from just before the firing's stamp until it was passed
    start_t = min(int(f["fired_at"]), int(f["logged_at"]) if pd.notna(f["logged_at"]) else int(f["fired_at"]))
    mask |= wm & (trace["t"] >= start_t)
    timeline = trace[mask & (trace["t"] >= start_t - 1)].copy()
    moves = timeline[timeline["kind"] == "watermark"]
    passed = moves[moves["detail"].astype("int64") >= int(f["fired_at"])]
    if len(passed):  # stop a little after the watermarks passed it
        last = passed.groupby("subscription")["t"].min().max()
        keep = (timeline["kind"] != "watermark") | (timeline["t"] <= last)
        timeline = timeline[keep]
    timeline = pd.DataFrame(timeline[["time", "kind", "actor", "subscription", "execution", "attempt", "detail"]])
    if show:
        print(f"firing {firing_id}: {f['reactor_name']}@{f['tenant_id']}, fired_at "
              f"{pd.to_datetime(f['fired_at'], unit='us', utc=True)}, "
              + (f"logged at {pd.to_datetime(f['logged_at'], unit='us', utc=True)}"
                 if pd.notna(f["logged_at"]) else "never logged"))
        print(timeline.to_string(index=False))
    return timeline
