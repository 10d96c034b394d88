"""Seeded ids and timestamp text: the fast formatting is the library's own, bit for bit."""

from __future__ import annotations

import random
import uuid

from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.kernel.ids import IdSource


class _Fixed(random.Random):
    def __init__(self, bits: int) -> None:
        super().__init__(0)
        self.bits = bits

    def getrandbits(self, k: int) -> int:
        return self.bits


@given(bits=st.one_of(st.integers(0, 2**128 - 1), st.sampled_from([0, 2**128 - 1, 1 << 76, 0xC000 << 48])))
def test_new_is_uuid4_of_the_drawn_bits(bits):
    ids = IdSource(0)
    ids._rng = _Fixed(bits)
    got = ids.new()
    assert got == str(uuid.UUID(int=bits, version=4))
    assert uuid.UUID(got).version == 4


def test_same_seed_same_ids_other_seed_others():
    a, b, c = IdSource(7), IdSource(7), IdSource(8)
    first = [a.new() for _ in range(50)]
    assert first == [b.new() for _ in range(50)]
    assert set(first).isdisjoint(c.new() for _ in range(50))


@given(us=st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999))
def test_rfc3339_is_strftime_of_the_instant(us):
    from fanoutsim.kernel.timeutil import from_us, rfc3339

    assert rfc3339(us) == from_us(us).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
