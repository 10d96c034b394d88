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


class _OneTable(HashedStrs):
    """Every hash in table 0 (its top byte cleared): growth after a few adds."""

    __slots__ = ()

    @staticmethod
    def _hash(s: str) -> int:
        h = HashedStrs._hash(s) & ((1 << 56) - 1)
        return h + 2 if h < 2 else h


class _FourHashes(HashedStrs):
    """Four hashes in all, in table 0: most strs share one with another."""

    __slots__ = ()

    @staticmethod
    def _hash(s: str) -> int:
        return 2 + len(s) % 4


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["add", "remove"]), words), max_size=200),
    kind=st.sampled_from([HashedStrs, _OneTable, _FourHashes]),
)
def test_hashed_strs_hold_what_was_added_as_many_times_as_it_was(ops, kind):
    """Against a multiset of hashes: a str added twice and removed once is
    still held; one whose hash was never added (or removed as often as added)
    is not; a table grows, and drops removed slots, as it fills."""
    held, model = kind(size=2), {}
    for op, w in ops:
        h = held._hash(w)
        if op == "add":
            held.add(w)
            model[h] = model.get(h, 0) + 1
        elif model.get(h):
            held.remove(w)
            model[h] -= 1
        else:
            with pytest.raises(KeyError):
                held.remove(w)
        assert len(held) == sum(model.values())
        assert all(held.might_hold(x) == bool(model.get(held._hash(x))) for x in ("", "a", "ab", "abc", w))
        assert all(2 * f <= len(t) for f, t in zip(held.filled, held.tables))


def test_a_big_set_grows_table_by_table_and_stays_small():
    held = HashedStrs()
    strs = [f"{k:08x}-id" for k in range(60_000)]
    held.update(strs)
    assert len(held) == 60_000 and all(held.might_hold(s) for s in strs)
    slots = sum(len(t) for t in held.tables)
    assert slots * 8 / len(held) <= 40  # bytes a str: the tables a quarter to a half full
    for s in strs[::2]:
        held.remove(s)
    assert sum(held.might_hold(s) for s in strs) <= 30_000 + 5  # (a removed one may share a hash)
    assert all(held.might_hold(s) for s in strs[1::2])
