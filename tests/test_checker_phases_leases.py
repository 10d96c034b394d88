"""The leases checker's phases, each fed a small hand-made trace with a known
outcome: whose life a row belongs to, what a life is owed, which deliveries
are duplicates and why, what was lost and why, what is out of order."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from fanoutsim.designs.leases import checker as lc


class HandMade:
    """A leases run reduced to what the checker reads: a trace and tables."""

    def __init__(self, rows, order="riffdb", **tables):
        self.frame = pd.DataFrame(
            [r + (None,) * (5 - len(r)) for r in rows], columns=["kind", "consumer", "event_id", "partition", "detail"]
        )
        self.tables = {"lease_consumers": [{"consumer": "c", "start_seq": 0}], **tables}
        self.config = SimpleNamespace(partition_order=order)

    def trace(self):
        return self.frame.copy()

    def table_rows(self, name):
        return self.tables.get(name, [])


def start(seq=0):
    return ("consumer_start", "c", None, None, str(seq))


def pub(event, seq, partition="p0"):
    return ("published", None, event, partition, str(seq))


def attempt(kind, event, n, partition="p0"):
    return (kind, "c", event, partition, f"attempt {n}")


def twice(*between):
    """e1 leased and delivered, ``between``, then leased, delivered and acked again."""
    return [
        start(),
        pub("e1", 1),
        attempt("leased", "e1", 1),
        attempt("delivered", "e1", 1),
        *between,
        attempt("leased", "e1", 2),
        attempt("delivered", "e1", 2),
        attempt("acked", "e1", 2),
    ]


def duplicate_causes(run):
    ev = lc.evidence(run)
    life = ev.lives["c"]
    got = lc.delivered(ev, life, lc.owed(life, ev.published))
    return lc.duplicate_causes(ev, life, got).tolist()


# -- duplicates -------------------------------------------------------------------------
def test_a_crash_between_two_deliveries_is_the_duplicates_cause():
    run = HandMade(twice(("crashed",)))
    assert duplicate_causes(run) == ["crash"]
    report = lc.check_leases(run)
    assert report.duplicates.to_dict("records") == [{"consumer": "c", "event_id": "e1", "cause": "crash"}]
    assert report.total["delivered"] == 1 and report.valid


def test_a_seek_between_wins_over_a_crash():
    assert duplicate_causes(HandMade(twice(("crashed",), ("seek", "c", None, None, "0")))) == ["seek"]


def test_a_lease_that_expired_between_names_lease_expired_and_nothing_is_unknown():
    expired = ("expired", "c", "e1", "p0", "attempt 1: lease expired")
    assert duplicate_causes(HandMade(twice(expired))) == ["lease_expired"]
    assert duplicate_causes(HandMade(twice())) == ["unknown"]
    assert not lc.check_leases(HandMade(twice())).valid


def test_a_refused_ack_makes_the_delivery_stale_with_the_invalidations_reason():
    refused = ("ack_refused", "c", "e1", None, "wrong_token")
    voided = ("lease_voided", "c", "e1", "p0", "restore")
    assert duplicate_causes(HandMade(twice(refused))) == ["lease_expired"]
    assert duplicate_causes(HandMade(twice(voided, refused))) == ["restore"]


# -- who is owed what, and losses ---------------------------------------------------------
def lost(run):
    return [(r["event_id"], r["cause"]) for r in lc.check_leases(run).lost.to_dict("records")]


def test_an_undelivered_event_behind_the_checkpoint_is_lost_ahead_of_it_pending():
    rows = [start(), pub("e1", 1)]
    retained = [{"event_id": "e1"}]
    ahead = HandMade(rows, events=retained, checkpoints=[{"consumer": "c", "partition": "p0", "seq": 0}])
    assert lost(ahead) == [] and lc.check_leases(ahead).total["pending"] == 1
    behind = HandMade(rows, events=retained, checkpoints=[{"consumer": "c", "partition": "p0", "seq": 1}])
    assert lost(behind) == [("e1", "unknown")]
    assert lost(HandMade([*rows, ("pruned", None, "e1")])) == [("e1", "pruned")]
    assert lost(HandMade([*rows, ("seek", "c", None, None, "1")])) == [("e1", "seek")]


def test_a_consumer_is_owed_what_was_published_past_its_start_and_before_it_retired():
    rows = [pub("e0", 1), start(1), pub("e1", 2), ("retired", "c"), pub("e2", 3)]
    run = HandMade(rows, lease_consumers=[])
    ev = lc.evidence(run)
    life = ev.lives["c"]
    assert ev.published.event_id[lc.owed(life, ev.published)].tolist() == ["e1"]
    assert lost(run) == [("e1", "retired")]


def test_a_dead_letter_is_not_a_loss_unless_a_seek_back_asked_for_it_again():
    rows = [start(), pub("e1", 1), ("dead_lettered", "c", "e1", "p0", "10 attempts: poison")]
    assert lost(HandMade(rows)) == [] and lc.check_leases(HandMade(rows)).total["dead_lettered"] == 1
    again = HandMade([*rows, ("seek", "c", None, None, "0")])
    assert lost(again) == [("e1", "unknown")]


# -- lives ------------------------------------------------------------------------------
def test_a_consumer_started_again_after_a_retire_is_a_second_life_with_its_own_rows():
    rows = [
        start(),
        pub("e1", 1),
        ("retired", "c"),
        start(1),
        pub("e2", 2),
        attempt("leased", "e2", 1),
        attempt("delivered", "e2", 1),
    ]
    ev = lc.evidence(HandMade(rows))
    first, second = ev.lives["c"], ev.lives["c#2"]
    assert (first.retired, first.row, first.latest) == (2, None, False)
    assert (second.begun, second.start, second.retired, second.row) == (3, 1, None, {"consumer": "c", "start_seq": 0})
    who = ["-" if pd.isna(w) else w for w in ev.trace.who.tolist()]
    assert who == ["c", "-", "c", "c#2", "-", "c#2", "c#2"]  # the second life's rows renamed, the first's kept
    per = lc.check_leases(HandMade(rows)).per_consumer.set_index("consumer")
    assert per.loc["c", "lost"] == 1 and per.loc["c#2", "delivered"] == 1 and per.loc["c#2", "lost"] == 0


def test_a_restore_of_a_backup_taken_before_a_consumer_began_takes_it_away():
    rows = [
        ("backup", None, None, None, "b1"),
        start(),
        pub("e1", 1),
        ("backup_restored", None, None, None, "b1"),
        pub("e2", 2),
    ]
    ev = lc.evidence(HandMade(rows, lease_consumers=[]))
    assert ev.lives["c"].taken == 3 and ev.lives["c"].ended == 3
    assert lost(HandMade(rows, lease_consumers=[])) == [("e1", "restore")]  # e2 came after: not owed


def test_a_consumer_only_in_the_table_is_a_life_from_an_earlier_process():
    ev = lc.evidence(HandMade([pub("e1", 1)], lease_consumers=[{"consumer": "old", "start_seq": 5}]))
    life = ev.lives["old"]
    assert (life.begun, life.start, life.latest) == (-1, 5, True)


# -- order ------------------------------------------------------------------------------
def test_a_first_lease_below_one_already_leased_in_its_partition_is_out_of_order():
    rows = [start(), pub("e1", 1), pub("e2", 2), attempt("leased", "e2", 1), attempt("leased", "e1", 1)]
    ev = lc.evidence(HandMade(rows))
    assert lc.out_of_order(ev, ev.lives["c"]) == [("c", "e1", "p0", 2, "unknown")]
    other = [start(), pub("e1", 1, "p1"), pub("e2", 2), attempt("leased", "e2", 1), attempt("leased", "e1", 1, "p1")]
    ev = lc.evidence(HandMade(other))
    assert lc.out_of_order(ev, ev.lives["c"]) == []  # another partition: no order between them
    seeked = [*rows[:4], ("seek", "c", None, None, "0"), rows[4]]
    ev = lc.evidence(HandMade(seeked))
    assert lc.out_of_order(ev, ev.lives["c"]) == [("c", "e1", "p0", 2, "seek")]


def test_head_of_line_orders_deliveries_and_names_a_late_stale_effect():
    rows = [
        start(),
        pub("e1", 1),
        pub("e2", 2),
        attempt("leased", "e1", 1),
        ("expired", "c", "e1", "p0", "attempt 1: lease expired"),
        attempt("leased", "e2", 1),
        attempt("delivered", "e2", 1),
        attempt("delivered", "e1", 1),
    ]
    ev = lc.evidence(HandMade(rows, order="head_of_line"))
    assert lc.out_of_order(ev, ev.lives["c"]) == [("c", "e1", "p0", 2, "stale_lease")]
    ev = lc.evidence(HandMade(rows[:4] + rows[5:], order="head_of_line"))
    assert lc.out_of_order(ev, ev.lives["c"]) == [("c", "e1", "p0", 2, "unknown")]
