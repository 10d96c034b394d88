"""The design-free parts of the checkers' phases (fanoutsim.kernel.check), each
against the plain definition it stands for."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.kernel.check import any_between, first_cause, happened_between, highest_before, repeats

positions = st.lists(st.integers(0, 40), max_size=12)


@given(positions, st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=10))
def test_any_between_and_happened_between_ask_for_a_mark_strictly_inside(marks, pairs):
    marks = sorted(marks)
    lo, hi = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
    want = [any(a < m < b for m in marks) for a, b in pairs]
    assert any_between(np.array(marks, dtype=np.int64), lo, hi).tolist() == want
    assert [happened_between(marks, a, b) for a, b in pairs] == want


def test_a_mark_on_either_end_is_not_between():
    assert any_between(np.array([3, 7]), np.array([3, 3, 2]), np.array([7, 8, 3])).tolist() == [False, True, False]
    assert not happened_between([], 0, 10)


def test_first_cause_takes_the_first_explanation_that_holds():
    crash = np.array([True, True, False, False])
    reset = np.array([False, True, False, True])
    own = np.array(["stale", "stale", "expired", None], dtype=object)
    carries = np.array([False, False, True, False])
    got = first_cause(4, [("reset", reset), ("crash", crash), (own, carries)])
    assert got.tolist() == ["crash", "reset", "expired", "reset"]
    assert first_cause(2, [], default="none").tolist() == ["none", "none"]


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1000)), max_size=30, unique_by=lambda p: p[1]))
def test_repeats_are_every_delivery_after_an_items_first(deliveries):
    item = np.array([i for i, _ in deliveries], dtype=np.int64)
    at = np.array([a for _, a in deliveries], dtype=np.int64)
    got = repeats(item, at)
    ordered = sorted(deliveries)
    assert list(zip(got.item.tolist(), got.at.tolist())) == ordered
    assert got.order.tolist() == sorted(range(len(deliveries)), key=lambda k: deliveries[k])
    want_again = [k for k in range(1, len(ordered)) if ordered[k][0] == ordered[k - 1][0]]
    assert got.again.tolist() == want_again
    assert got.previous.tolist() == [ordered[k - 1][1] for k in want_again]
    assert got.delivered == len({i for i, _ in deliveries})


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-5, 5)), max_size=30))
def test_highest_before_is_the_running_maximum_of_the_earlier_rows_of_a_group(rows):
    group = np.array([g for g, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.int64)
    want = [max((v for g2, v in rows[:k] if g2 == g), default=-np.inf) for k, (g, _) in enumerate(rows)]
    assert highest_before(values, group).tolist() == want
    alone = [max((v for _, v in rows[:k]), default=-np.inf) for k in range(len(rows))]
    assert highest_before(values).tolist() == alone
