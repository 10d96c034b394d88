"""One firing's story, told from the tables a run leaves (``fanoutsim explain FILE ID``).

:func:`fanoutsim.explain` tells a firing's story from a live run's trace;
this tells it from the tables alone, so it works on a file a server (or a
killed process) left behind: the firing, each subscription of its reactor and
tenant — whether its watermark has passed the firing, what its filter says,
which executions it dispatched — and, for a duplicate or a loss, the cause
the checker named, in the report's words: the verdicts ``fanoutsim run
--store`` kept in the file (:mod:`fanoutsim.verdicts`), else those of the
store-only check (:func:`table_verdicts`), which says what the tables alone
cannot tell.
"""

from __future__ import annotations

import json
from typing import Any

from fanoutsim.kernel.report import verdict_text
from fanoutsim.kernel.store.record import recorded_for
from fanoutsim.kernel.timeutil import from_us

from .causes import CAUSES, reader_label
from .payload import context_firing, decode_sources
from .predicate import InvalidPredicate, activation, compile_predicate, explain_error

__all__ = ["story", "backlog", "table_verdicts"]


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


class _Verdicts:
    """The checker's verdicts of one firing, by subscription (``reactor->workflow@tenant``):
    those a check kept in the store (``fanoutsim run --store``), else, asked
    only when a subscription has a duplicate or a loss to tell, those of the
    store-only check (:func:`table_verdicts`)."""

    def __init__(self, rt, firing_id: str) -> None:
        self.rt, self.firing_id = rt, firing_id
        self.rows = recorded_for(rt.store, firing_id)
        self.from_tables = self.rows is None

    def of(self, sub: dict, kind: str) -> dict | None:
        if self.rows is None:
            self.rows = [r for r in table_verdicts(self.rt) if r["item"] == self.firing_id]
        reader = reader_label(sub["reactor_name"], sub["workflow_name"], sub["tenant_id"])
        return next((r for r in self.rows if r["reader"] == reader and r["kind"] == kind), None)

    def tell(self, row: dict | None, fallback: str) -> str:
        """The verdict in the report's words; from the tables alone, an
        ``unknown`` duplicate is what they cannot tell, not a defect."""
        if row is None:
            return fallback
        if self.from_tables and row["kind"] == "duplicate" and row["cause"] == "unknown":
            return (
                f"a duplicate ({row['deliveries']} deliveries); no crash between the dispatches in runner_log, "
                f"and the tables alone tell no other cause (the checker of `fanoutsim run --store` reads "
                f"the trace and names it: several_pollers, ambiguous_insert, ...)"
            )
        return verdict_text(row, CAUSES)


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


def _unrun(sub: dict, firing: dict, says: str, cfg, verdicts: _Verdicts) -> str:
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
    lost = verdicts.tell(verdicts.of(sub, "lost"), "lost (the checker names no cause for it)")
    return f"{says}; the watermark passed it but nothing was dispatched:\n      {lost}"


def _verdict(sub: dict, firing: dict, sources: Any, runs: list[dict], verdicts: _Verdicts, cfg) -> str:
    says = _filter_says(sub, sources, firing)
    if not runs:
        return _unrun(sub, firing, says, cfg, verdicts)
    made = ", ".join(f"{r['id']} {r['status']} (dispatched {_when(r['dispatched_at'])})" for r in runs)
    line = f"{says}; dispatched {len(runs)} time{'s' if len(runs) != 1 else ''}: {made}"
    if len(runs) > 1:
        fallback = f"a duplicate ({len(runs)} deliveries) the checker did not count (its filter was false then?)"
        line += f"\n      {verdicts.tell(verdicts.of(sub, 'duplicate'), fallback)}"
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
        for row in recorded_for(store, firing_id) or ():
            lines.append(f"  -> {row['reader']}: {verdict_text(row, CAUSES)}")
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
    verdicts, cfg = _Verdicts(rt, firing_id), getattr(rt, "config", None)
    for sub in sorted(subs, key=lambda s: s["workflow_name"]):
        state = "" if sub["enabled"] else " (disabled)"
        rows = runs.get((sub["workflow_name"], sub["tenant_id"]), [])
        lines.append(f"  -> {sub['workflow_name']}{state}: {_verdict(sub, firing, sources, rows, verdicts, cfg)}")
    return "\n".join(lines) + "\n"


def table_verdicts(rt) -> list[dict]:
    """The verdicts of the run in ``rt``'s tables alone (:func:`~.checker.check_store`:
    a duplicate is ``crash`` when the runner log has a crash between its
    dispatches, else ``unknown``; a loss is a retained firing behind the
    watermark never dispatched), for a file no check kept verdicts in."""
    from .causes import verdicts
    from .checker import check_store

    return verdicts(check_store(rt.store, getattr(rt, "config", None)))


BACKLOG_NAME = "pending"  # what :func:`backlog` counts, in one word (fanoutsim status)


def backlog(rt) -> int:
    """Executions dispatched and not yet finished: what grows when the executor falls behind."""
    return sum(1 for r in rt.store.rows("workflow_executions") if r["status"] in ("pending", "running"))
