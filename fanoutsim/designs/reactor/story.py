"""One firing's story, told from the tables a run leaves (``fanoutsim explain FILE ID``).

:func:`fanoutsim.explain` tells a firing's story from a live run's trace;
this tells it from the tables alone, so it works on a file a server (or a
killed process) left behind: the firing, each subscription of its reactor and
tenant — whether its watermark has passed the firing, what its filter says,
which executions it dispatched — and the crashes ``runner_log`` records.
"""

from __future__ import annotations

import json
from typing import Any

from fanoutsim.kernel.timeutil import from_us

from .payload import context_firing, decode_sources
from .predicate import InvalidPredicate, activation, compile_predicate, explain_error

__all__ = ["story", "backlog"]


def _when(us: int | None) -> str:
    return "never" if us is None else from_us(int(us)).isoformat().replace("+00:00", "Z")


def _executions_of(store, firing_id: str) -> dict[tuple[str, str], list[dict]]:
    """The executions dispatched for ``firing_id``, by (workflow, tenant)."""
    out: dict[tuple[str, str], list[dict]] = {}
    for row in store.rows("workflow_executions"):
        fid, _, _ = context_firing(row["context"])
        if fid == firing_id:
            out.setdefault((row["workflow_name"], row["tenant_id"]), []).append(row)
    return out


def _crashes(store) -> list[int]:
    """When the runner started again without a clean stop before (a crash or a kill)."""
    out, stopped = [], True
    for row in store.rows("runner_log"):
        if row["event"] == "start" and not stopped:
            out.append(row["happened_at"])
        stopped = row["event"] == "stop"
    return out


def _filter_says(sub: dict, sources: Any, firing: dict) -> str:
    if not sub["predicate"]:
        return "no filter"
    try:
        predicate = compile_predicate(sub["predicate"])
    except InvalidPredicate as exc:
        return f"a filter that does not compile ({exc})"
    value, error = predicate.evaluate(activation(sources, firing["reactor_name"], firing["tenant_id"]))
    if error is not None:
        return f"filter {sub['predicate']!r} fails: {explain_error(sub['predicate'], sources, error)}"
    return f"filter {sub['predicate']!r} is {'true' if value else 'false'}"


def _passed(sub: dict, firing: dict, compound: bool) -> bool:
    """Whether the subscription's watermark is past the firing: it will not read it again."""
    at = sub["last_seen_fired_at"]
    if at is None:
        return False
    if at != firing["fired_at"]:
        return at > firing["fired_at"]
    # the same stamp: the strict ``fired_at >`` never reads it again; the compound cursor orders by id
    return not compound or (sub.get("last_seen_firing_id") or "") >= firing["id"]


def _unrun(sub: dict, firing: dict, says: str, cfg) -> str:
    """Why a firing that was not dispatched was not (its filter, its policy, the watermark)."""
    compound = getattr(cfg, "watermark", "fired_at") != "fired_at"
    if not _passed(sub, firing, compound):
        if sub.get("predicate_error_firing_id") == firing["id"]:
            return (
                f"{says}\n      held: the watermark waits on it while the filter fails "
                f"({sub['predicate_error_count']} error(s) in a row so far, predicate_error_policy hold)"
            )
        return f"{says}; not polled yet: the watermark ({_when(sub['last_seen_fired_at'])}) is before it"
    if says.endswith("is false"):
        return f"{says}: not dispatched, and the watermark moved past it (as it should)"
    if "fails:" in says:
        limit = getattr(cfg, "predicate_error_limit", 5)
        # a count of 0 on this firing is a dead letter's reset, not a hold
        if sub.get("predicate_error_firing_id") == firing["id"] and 0 < sub["predicate_error_count"] < limit:
            return (
                f"{says}\n      held by its error, then passed by the watermark without a retry: a "
                f"firing with the same fired_at as the last one read (a tie under watermark = fired_at)"
            )
        if getattr(cfg, "predicate_error_policy", "skip") == "hold":
            return (
                f"{says}\n      dead-lettered: after {getattr(cfg, 'predicate_error_limit', 5)} errors in a "
                f"row the watermark moved past it (predicate_error_policy hold)"
            )
        return (
            f"{says}\n      not dispatched: predicate_error_policy skip counts the error as false and "
            f"moves the watermark past it"
        )
    return (
        f"{says}; the watermark passed it but nothing was dispatched: lost (pruned before the poll, a "
        f"tie split by a batch, or a commit that became visible behind the watermark)"
    )


def _verdict(sub: dict, firing: dict, sources: Any, runs: list[dict], crashes: list[int], cfg) -> str:
    says = _filter_says(sub, sources, firing)
    if not runs:
        return _unrun(sub, firing, says, cfg)
    made = ", ".join(f"{r['id']} {r['status']} (dispatched {_when(r['dispatched_at'])})" for r in runs)
    line = f"{says}; dispatched {len(runs)} time{'s' if len(runs) != 1 else ''}: {made}"
    if len(runs) > 1:
        first, last = min(r["dispatched_at"] for r in runs), max(r["dispatched_at"] for r in runs)
        between = [c for c in crashes if first <= c <= last]
        why = (
            f"the runner restarted without a clean stop at {_when(between[0])} between the dispatches "
            f"(at-least-once: a dispatch committed, its watermark move did not)"
            if between
            else "no crash between them in runner_log: several pollers, or an ambiguous insert"
        )
        line += f"\n      a duplicate: {why}"
    return line


def story(rt, firing_id: str) -> str:
    """The story of firing ``firing_id`` in the tables of ``rt`` (a runtime or
    simulation with a ``store``): raises KeyError when nothing names it."""
    store = rt.store
    firing = next((f for f in store.rows("reactor_firings") if f["id"] == firing_id), None)
    runs = _executions_of(store, firing_id)
    if firing is None:
        if not runs:
            raise KeyError(
                f"no firing {firing_id!r} in this run (neither in reactor_firings nor in an execution's context)"
            )
        lines = [f"firing {firing_id}: no longer in reactor_firings (pruned); its executions:"]
        for (workflow, tenant), rows in sorted(runs.items()):
            lines.append(f"  {workflow}@{tenant}: " + ", ".join(f"{r['id']} {r['status']}" for r in rows))
        return "\n".join(lines) + "\n"
    sources = decode_sources(firing["payload"])
    lines = [
        f"firing {firing_id}: {firing['reactor_name']}@{firing['tenant_id']}, fired at "
        f"{_when(firing['fired_at'])}, logged at {_when(firing['created_at'])}",
        f"  payload {json.dumps(sources, default=str)}",
    ]
    subs = [
        s
        for s in store.rows("reactor_subscriptions")
        if s["reactor_name"] == firing["reactor_name"] and s["tenant_id"] == firing["tenant_id"]
    ]
    if not subs:
        lines.append("  no subscription of this reactor and tenant: nothing was to be dispatched")
    crashes, cfg = _crashes(store), getattr(rt, "config", None)
    for sub in sorted(subs, key=lambda s: s["workflow_name"]):
        state = "" if sub["enabled"] else " (disabled)"
        rows = runs.get((sub["workflow_name"], sub["tenant_id"]), [])
        lines.append(f"  -> {sub['workflow_name']}{state}: {_verdict(sub, firing, sources, rows, crashes, cfg)}")
    return "\n".join(lines) + "\n"


BACKLOG_NAME = "pending"  # what :func:`backlog` counts, in one word (fanoutsim status)


def backlog(rt) -> int:
    """Executions dispatched and not yet finished: what grows when the executor falls behind."""
    return sum(1 for r in rt.store.rows("workflow_executions") if r["status"] in ("pending", "running"))
