"""A lease's token is the SHA-256 of ``"{seed}/{consumer}/{event_id}/{attempt}/{grant}"``,
however it is computed (the consumer's prefix is hashed once and copied)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.designs.leases.leasing import lease_token

names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12)


@given(
    seed=st.integers(-(2**63), 2**63),
    consumer=names,
    event_id=names,
    attempt=st.integers(1, 50),
    grant=st.integers(1, 10**9),
)
def test_token_is_the_hash_of_its_parts(seed, consumer, event_id, attempt, grant):
    want = hashlib.sha256(f"{seed}/{consumer}/{event_id}/{attempt}/{grant}".encode()).hexdigest()
    assert lease_token(seed, consumer, event_id, attempt, grant) == want
    assert lease_token(seed, consumer, event_id, attempt, grant) == want  # again: the kept prefix is unchanged


def test_tokens_of_one_consumer_differ_by_grant_and_not_by_call_order():
    a = [lease_token(7, "c", "1:0", 1, g) for g in range(1, 6)]
    lease_token(7, "other", "1:0", 1, 1)
    assert [lease_token(7, "c", "1:0", 1, g) for g in range(1, 6)] == a
    assert len(set(a)) == 5


def test_a_granted_lease_cannot_be_changed_and_reads_by_name():
    """What a pull replies is the broker's record of the grant: a worker cannot
    forge another token or attempt into it (it is a named tuple, not a dict)."""
    import pytest

    from fanoutsim.designs.leases.simulation import LeaseSimulation

    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False)
    sim.publish("e1")
    (lease,) = sim.consume("c")
    with pytest.raises(AttributeError):
        lease.token = "forged"
    assert lease.token == lease_token(0, "c", lease.event_id, 1, 1) and lease.attempt == 1
    assert lease._replace(attempt=2).attempt == 2 and lease.attempt == 1
