"""The outbox checker's phases, each fed a small hand-made trace with a known
outcome: what a consumer is owed, which deliveries are duplicates and why,
what was lost and why, and the bus apart."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from fanoutsim.designs.outbox import checker as oc


class HandMade:
    """An outbox run reduced to what the checker reads: a trace and tables.
    ``rows``: (kind, consumer, seq[, detail]); each row is one microsecond."""

    def __init__(self, rows, cursor=0, **tables):
        rows = [r + (None,) * (4 - len(r)) for r in rows]
        self.frame = pd.DataFrame(
            [(k, c, s, d, t) for t, (k, c, s, d) in enumerate(rows)], columns=["kind", "consumer", "seq", "detail", "t"]
        )
        tables = {"cursors": [{"consumer": "c", "seq": cursor}], **tables}
        self.store = SimpleNamespace(rows=lambda name: tables.get(name, []))

    def trace(self):
        return self.frame.copy()


def commit(seq):
    return ("committed", None, seq)


def handled_twice(*between):
    """Row 1 committed, delivered and handled, ``between``, then delivered and handled again."""
    return [
        ("cursor_start", "c", 0),
        commit(1),
        ("fetched", "c", 1),
        ("delivered", "c", 1),
        ("handled", "c", 1),
        *between,
        ("delivered", "c", 1),
        ("handled", "c", 1),
        ("cursor", "c", 1),
    ]


def causes_of_duplicates(run):
    ev = oc.evidence(run)
    due = oc.owed(ev, "c")
    got = oc.delivered(ev, "c", due)
    return oc.duplicate_causes(ev, "c", got).tolist()


def test_a_crash_between_two_deliveries_is_the_duplicates_cause_and_a_reset_wins_over_it():
    assert causes_of_duplicates(HandMade(handled_twice(("crashed", None, None)), cursor=1)) == ["crash"]
    both = HandMade(handled_twice(("crashed", None, None), ("reset", "c", 0)), cursor=1)
    assert causes_of_duplicates(both) == ["reset"]
    report = oc.check_outbox(HandMade(handled_twice(), cursor=1))
    assert report.duplicates.to_dict("records") == [{"consumer": "c", "seq": 1, "cause": "unknown"}]
    assert report.total["delivered"] == 1 and not report.valid


def test_a_consumer_is_owed_the_rows_committed_past_its_first_cursor_in_commit_order():
    run = HandMade([commit(1), ("cursor_start", "c", 1), commit(3), commit(2)])
    assert oc.owed(oc.evidence(run), "c")["seq"].tolist() == [3, 2]


def lost(run):
    return [(r["seq"], r["cause"]) for r in oc.check_outbox(run).lost.to_dict("records")]


def test_a_row_committed_under_a_fetch_that_read_past_it_is_a_late_commit():
    rows = [
        ("cursor_start", "c", 0),
        commit(2),
        ("fetched", "c", 2),
        ("delivered", "c", 2),
        commit(1),
        ("cursor", "c", 2),
    ]
    assert lost(HandMade(rows, cursor=2, outbox=[{"seq": 1, "topic": "t"}])) == [(1, "late_commit")]


def test_a_row_passed_by_hand_is_a_seek_and_one_retention_took_is_pruned():
    seek = [("cursor_start", "c", 0), commit(1), ("reset", "c", 1)]
    assert lost(HandMade(seek, cursor=1)) == [(1, "seek")]
    pruned = [("cursor_start", "c", 0), commit(1), ("pruned", None, 1)]
    assert lost(HandMade(pruned, cursor=1)) == [(1, "pruned")]
    assert lost(HandMade([("cursor_start", "c", 0), commit(1)], cursor=1)) == [(1, "unknown")]


def test_a_gap_given_up_before_the_row_committed_is_a_gap_timeout_not_a_late_commit():
    rows = [
        ("cursor_start", "c", 0),
        commit(1),
        ("gap_skipped", "c", 2, "seqs 2..3 missing after 5.0 s"),
        commit(4),
        ("fetched", "c", 4),
        commit(3),
        ("cursor", "c", 4),
    ]
    assert lost(HandMade(rows, cursor=4)) == [(1, "unknown"), (4, "unknown"), (3, "gap_timeout")]


def test_an_unhandled_row_ahead_of_the_cursor_is_pending_and_a_parked_one_parked():
    rows = [("cursor_start", "c", 0), commit(1), commit(2)]
    run = HandMade(rows, cursor=1, outbox=[{"seq": 2, "topic": "t"}], parked=[{"consumer": "c", "seq": 1}])
    ev = oc.evidence(run)
    due = oc.owed(ev, "c")
    assert oc.undelivered(ev, "c", due, oc.delivered(ev, "c", due)) == (1, 1, [])


def test_latency_runs_from_the_commit_to_the_first_handling_step():
    rows = [("cursor_start", "c", 0), commit(1), ("delivered", "c", 1), ("handled", "c", 1), ("handled", "c", 1)]
    ev = oc.evidence(HandMade(rows, cursor=1))
    lat = oc.latency(ev, "c", oc.owed(ev, "c"))
    assert lat["latency_max_s"] == 2e-6 and lat["latency_mean_s"] == 2e-6


def test_the_bus_reports_unpublished_rows_apart_from_delivery():
    rows = [
        ("cursor_start", "c", 0),
        commit(1),
        ("published", "page:a", 1, "3"),
        commit(2),
        ("delivered", "c", 1),
        ("delivered", "c", 2),
        ("cursor", "c", 2),
    ]
    report = oc.check_outbox(HandMade(rows, cursor=2, outbox=[{"seq": 2, "topic": "page:b"}]))
    assert report.bus.to_dict("records") == [
        {"seq": 1, "topic": "page:a", "published": True, "receivers": 3},
        {"seq": 2, "topic": "page:b", "published": False, "receivers": 0},
    ]
    assert report.valid and report.total["lost"] == 0
