"""Packing (:mod:`fanoutsim.kernel.packing`): columns read back as packed, or
kept as they are where pickle refuses a value; a set of str kept as hashes
says *maybe* for every str it holds."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fanoutsim.kernel.packing import HashedStrs, Kept, Packed, pack


@settings(max_examples=60, deadline=None)
@given(
    cols=st.integers(1, 4).flatmap(
        lambda n: st.lists(
            st.tuples(*[st.one_of(st.none(), st.text(max_size=5), st.integers(), st.binary(max_size=4))] * n),
            max_size=60,
        )
    )
)
def test_packed_columns_read_back_as_they_were(cols):
    columns = tuple(map(list, zip(*cols))) if cols else ([],)
    packed = pack(columns)
    assert isinstance(packed, Packed) and packed.rows == len(columns[0])
    assert packed.columns() == columns and packed.columns() == columns  # a read leaves it as it was


def test_columns_with_a_value_pickle_cannot_take_are_kept_as_they_are():
    lock = threading.Lock()
    kept = pack(([1, lock], ["a", "b"]))
    assert isinstance(kept, Kept) and kept.rows == 2 and kept.columns() == ([1, lock], ["a", "b"])


words = st.text(alphabet="abc", max_size=3)  # "" among them: its hash is 0, a slot's free mark


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "remove"]), words), max_size=200))
def test_hashed_strs_hold_what_was_added_as_many_times_as_it_was(ops):
    """Against a multiset: a str added twice and removed once is still held;
    one never added (or removed as often as added) is not; the array grows and
    drops removed slots as it does."""
    held, model = HashedStrs(size=4), {}
    for op, w in ops:
        if op == "add":
            held.add(w)
            model[w] = model.get(w, 0) + 1
        elif model.get(w):
            held.remove(w)
            model[w] -= 1
        else:
            with pytest.raises(KeyError):
                held.remove(w)
        assert len(held) == sum(model.values())
        assert all(held.might_hold(x) == bool(n) for x, n in model.items())
        assert 2 * held.filled <= len(held.slots)
    assert not held.might_hold("never added")
