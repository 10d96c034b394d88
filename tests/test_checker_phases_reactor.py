"""The reactor checker's phases, each fed a small hand-made trace with a known
outcome: what a subscription is owed, why a firing was delivered twice, why
one was lost, and what is still pending."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

import fanoutsim as fs
from fanoutsim.designs.reactor import checker as rc

T0 = 1_767_225_600_000_000  # 2026-01-01, in µs
F1, F2 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"


def at(us: int) -> pd.Timestamp:
    return pd.Timestamp(us, unit="us", tz="UTC")


class HandMade:
    """A reactor run reduced to what the checker reads: one subscription ``s``
    of reactor ``r`` (workflow ``wf``), its trace's columns, the firing
    history and the tables. ``events``: (kind, actor, firing, execution,
    detail); the i-th is at ``T0 + i`` µs unless a sixth member gives its time.
    ``firings``: (id, fired_at, logged_at) in µs after T0."""

    def __init__(self, events, firings, executions=(), watermark=None, retained=(), created=0, **config):
        rows = [e + (None,) * (5 - len(e)) for e in events]
        self.events = {
            "t": [T0 + (e[5] if len(e) > 5 else i) for i, e in enumerate(rows)],
            "kind": [e[0] for e in rows],
            "actor": [e[1] for e in rows],
            "subscription": [None if e[0] in ("crashed", "pruned") else "s" for e in rows],
            "firing": [e[2] for e in rows],
            "execution": [e[3] for e in rows],
            "detail": [e[4] for e in rows],
        }
        self.history = {
            "firing": [f[0] for f in firings],
            "reactor_name": ["r"] * len(firings),
            "tenant_id": ["public"] * len(firings),
            "fired_at": [T0 + f[1] for f in firings],
            "logged_at": [None if f[2] is None else T0 + f[2] for f in firings],
            "payload": [b""] * len(firings),
        }
        tables = {
            "workflow_executions": [
                {
                    "id": eid,
                    "workflow_name": "wf",
                    "tenant_id": "public",
                    "context": json.dumps({"reactor_name": "r", "reactor_firing_id": fid}),
                }
                for eid, fid in executions
            ],
            "reactor_firings": [{"id": fid} for fid in retained],
        }
        self.store = SimpleNamespace(rows=lambda name: tables.get(name, []))
        self.config = fs.SchedulerConfig(**config)
        mark = None if watermark is None else at(T0 + watermark[1])
        self.subs = pd.DataFrame(
            [
                {
                    "id": "s",
                    "reactor_name": "r",
                    "workflow_name": "wf",
                    "tenant_id": "public",
                    "predicate": None,
                    "created_at": at(T0 + created),
                    "last_seen_fired_at": mark,
                    "last_seen_firing_id": watermark and watermark[0],
                }
            ]
        )

    def trace_columns(self):
        return self.events, self.history

    def trace(self):  # what the checker asks is there; it reads trace_columns
        raise AssertionError("the checker reads the recorder's columns, not the frame")

    def subscriptions(self):
        return self.subs


def wm(value, actor="poller"):
    return ("watermark", actor, None, None, str(T0 + value))


def dispatched(eid, actor="poller", firing=F1):
    return ("dispatched", actor, firing, eid)


def duplicate_causes(events, executions=(("x1", F1), ("x2", F1))):
    run = HandMade(events, [(F1, 0, 0)], executions, watermark=(F1, 0))
    return rc.check(run).duplicates["cause"].tolist()


def test_each_duplicate_cause_from_what_lies_between_the_two_dispatches():
    crash = ("crashed", "runtime")
    assert duplicate_causes([dispatched("x1"), crash, dispatched("x2")]) == ["crash"]
    assert duplicate_causes([dispatched("x1"), dispatched("x2", actor="poller-2")]) == ["several_pollers"]
    assert duplicate_causes([("dispatch_failed", "poller", F1, "x1"), dispatched("x2")]) == ["ambiguous_insert"]
    assert duplicate_causes([wm(5), dispatched("x1"), wm(0), dispatched("x2")]) == ["watermark_rewind"]
    assert duplicate_causes([dispatched("x1"), wm(0, actor="poller-2"), dispatched("x2")]) == ["several_pollers"]
    assert duplicate_causes([dispatched("x1"), dispatched("x2")]) == ["unknown"]


def test_an_insert_reported_failed_comes_before_the_other_explanations():
    run = HandMade(
        [("dispatch_failed", "poller", F1, "x1"), ("crashed", "runtime"), dispatched("x2")],
        [(F1, 0, 0)],
        [("x1", F1), ("x2", F1)],
    )
    ev = rc.evidence(run, run.subs)
    story = rc.Story(ev, "s")
    assert rc.duplicate_cause(ev, story, (0, "x1"), (2, "x2")) == "ambiguous_insert"
    assert rc.duplicate_cause(ev, story, (-1, "x2"), (2, "x2")) == "crash"  # dispatched rows either side


def lost(run):
    return [(r["cause"], r["promised"]) for r in rc.check(run).lost.to_dict("records")]


def test_a_sibling_with_the_same_fired_at_moving_the_watermark_is_a_tie():
    run = HandMade(
        [dispatched("x2", firing=F2), ("watermark", "poller", F2, None, str(T0 + 10))],
        [(F1, 10, 0), (F2, 10, 0)],
        [("x2", F2)],
        watermark=(F2, 10),
        retained=(F1, F2),
    )
    assert lost(run) == [("tie", True)]


def test_a_firing_logged_after_the_watermark_passed_it_is_late_visibility():
    run = HandMade(
        [dispatched("x2", firing=F2), ("watermark", "poller", F2, None, str(T0 + 10), 5)],
        [(F1, 3, 2_000_005), (F2, 10, 0)],
        [("x2", F2)],
        watermark=(F2, 10),
        retained=(F1, F2),
    )
    report = rc.check(run)
    assert report.lost[["cause", "detail"]].to_dict("records") == [
        {"cause": "late_visibility", "detail": "visible 2.000 s after the watermark passed it"}
    ]


def test_a_failed_insert_the_watermark_moved_past_is_promised_only_under_hold():
    events = [("dispatch_failed", "poller", F1, "x1"), ("watermark", "poller", F1, None, str(T0))]
    assert lost(HandMade(events, [(F1, 0, 0)], watermark=(F1, 0))) == [("dispatch_failed", True)]
    advance = HandMade(events, [(F1, 0, 0)], watermark=(F1, 0), dispatch_failure_policy="advance")
    assert lost(advance) == [("dispatch_failed", False)] and rc.check(advance).valid
    # per_batch: the move names the batch's last firing, and passes the failed one all the same
    batch = [
        ("dispatch_failed", "poller", F1, "x1"),
        dispatched("x2", firing=F2),
        ("watermark", "poller", F2, None, str(T0 + 3)),
    ]
    run = HandMade(batch, [(F1, 0, 0), (F2, 3, 0)], [("x2", F2)], watermark=(F2, 3))
    assert lost(run) == [("dispatch_failed", True)]


def test_a_firing_pruned_before_any_watermark_move_is_pruned_and_ttl_documents_it():
    events = [("pruned", "pruner", F1), wm(5)]
    assert lost(HandMade(events, [(F1, 0, 0)], watermark=(F1, 5))) == [("pruned", False)]
    conservative = HandMade(events, [(F1, 0, 0)], watermark=(F1, 5), prune_policy="conservative")
    assert lost(conservative) == [("pruned", True)] and not rc.check(conservative).valid
    disabled = HandMade(
        [("subscription", "api", None, None, "disabled"), *events],
        [(F1, 0, 0)],
        watermark=(F1, 5),
        prune_policy="conservative",
    )
    assert lost(disabled) == [("pruned", False)]  # conservative pruning protects enabled subscriptions only


def test_a_retained_firing_ahead_of_the_watermark_is_pending_not_lost():
    run = HandMade([], [(F1, 7, 0)], watermark=(F1, 5), retained=(F1,))
    t = rc.check(run).total
    assert (t["pending"], t["lost"]) == (1, 0)
    assert rc.check(HandMade([], [(F1, 7, 0)], watermark=None, retained=(F1,))).total["pending"] == 1
    assert rc.check(HandMade([], [(F1, 7, 0)], watermark=(F1, 5))).total["lost"] == 1  # gone from the log


def test_a_subscription_is_owed_what_was_logged_after_it_existed():
    run = HandMade(
        [], [(F1, 0, 0), (F2, 20, 20), ("00000000-0000-4000-8000-000000000003", 30, None)], created=10, retained=(F2,)
    )
    ev = rc.evidence(run, run.subs)
    expected, backfilled, never = rc.owed(ev, run.subs.iloc[0])
    assert [f.firing for f in expected] == [F2] and backfilled == 1
    assert [(n["firing"], n["cause"]) for n in never] == [("00000000-0000-4000-8000-000000000003", "never_logged")]
