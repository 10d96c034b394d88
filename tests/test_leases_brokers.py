"""Issue 39: the brokers' rules as leases options (NATS JetStream, Redis Streams).

Each rule where a broker differs from RiffDB is a :class:`LeaseConfig` option
whose default is RiffDB's; each test here runs the model under RiffDB's rule
and under the broker's and shows the difference — the sources are cited in
``fanoutsim/designs/leases/config.py``. Engine-level tests call the sans-IO
:class:`LeaseEngine` at explicit instants (seconds past ``T0``), as
``test_leases_riffdb.py`` does; the run-level ones use :class:`LeaseSimulation`.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fanoutsim.designs.leases import MAX_ATTEMPTS, LeaseConfig, LeaseEngine, Unauthorized
from fanoutsim.designs.leases.authority import Credential
from fanoutsim.designs.leases.checker import check
from fanoutsim.designs.leases.config import (
    AT_MAX_DELIVER,
    CHOICES,
    OPEN_IN_FLIGHT_RANGE,
    OPEN_LEASE_RANGE,
)
from fanoutsim.designs.leases.engine import TRACE
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.trace import Trace

T0 = 1_767_225_600_000_000
JETSTREAM = "nats-jetstream-2.15"
REDIS = "redis-streams-6.2"


def t(seconds: float) -> int:
    return T0 + round(seconds * 1_000_000)


def engine(config: LeaseConfig | None = None, store: str = "memory") -> LeaseEngine:
    return LeaseEngine(open_store(store), config or LeaseConfig(), Metrics(), Trace(TRACE), seed=0)


def kinds(e: LeaseEngine, *wanted: str) -> list[tuple[float, str, str | None]]:
    """(seconds past T0, kind, event_id) of the trace rows of these kinds."""
    f = e.trace.frame()
    f = f[f["kind"].isin(wanted)]
    return [(round((r.t - T0) / 1e6, 6), r.kind, r.event_id) for r in f.itertuples()]


def times(sim: LeaseSimulation, kind: str) -> list[float]:
    f = sim.trace()
    return [round((x - sim.start_us) / 1e6, 6) for x in f[f["kind"] == kind]["t"]]


# -- defaults and validation --------------------------------------------------------------
def test_the_defaults_are_riffdbs_rules():
    c = LeaseConfig()
    assert (c.limits, c.max_deliver, c.max_deliver_rule, c.at_max_deliver) == (
        "riffdb",
        MAX_ATTEMPTS,
        "failures",
        "dead_letter",
    )
    assert (c.backoff, c.nack_delay_rule, c.late_ack, c.lease_expiry) == ((), "as_asked", "refuse", "recovery")
    assert (c.expiry_timer, c.retention_policy, c.deliver_cost, c.ack_cost) == ("interval", "fence", None, None)
    assert c.defaults() == {"batch_limit": 4, "in_flight_limit": 4, "lease_seconds": 60.0} and c.window == 65


@pytest.mark.parametrize(
    "limits,message",
    [
        ({"lease_seconds": 1}, "lease_seconds must be 5 through 900 seconds, got 1"),
        ({"in_flight_limit": 9}, "in_flight_limit must be an integer from 1 through 8, got 9"),
        ({"batch_limit": 0}, "batch_limit must be an integer from 1 through 8, got 0"),
    ],
)
def test_riffdbs_bounds_stay_its_defaults_and_open_limits_allow_the_brokers(limits, message):
    sim = LeaseSimulation(seed=0)
    with pytest.raises(ValueError, match=message):
        sim.register_consumer("c", client=False, **limits)
    with pytest.raises(ValueError, match=message):
        LeaseConfig(**limits)
    open_sim = LeaseSimulation(LeaseConfig(limits="open"), seed=0)
    if "batch_limit" not in limits:
        row = open_sim.register_consumer("c", client=False, **limits)
        assert all(row[k] == v for k, v in limits.items())


@pytest.mark.parametrize(
    "limits,allowed",
    [
        ({"lease_seconds": 2}, "0.001 through 604800 seconds"),
        ({"in_flight_limit": 9}, "1 through 100000"),
        ({"batch_limit": 0}, "1 through 10000"),
    ],
)
def test_a_limit_out_of_riffdbs_range_says_what_open_limits_allow(limits, allowed):
    said = f"(RiffDB's range; limits = 'open' allows {allowed})"
    with pytest.raises(ValueError) as exc:
        LeaseConfig(**limits)
    assert str(exc.value).endswith(said)
    with pytest.raises(ValueError) as exc:
        LeaseSimulation(seed=0).register_consumer("c", client=False, **limits)
    assert str(exc.value).endswith(said)


def test_open_limits_have_sane_caps_named_in_the_error():
    with pytest.raises(
        ValueError, match=r"in_flight_limit must be an integer from 1 through 100000, got 100001 \(limits = 'open'\)"
    ):
        LeaseConfig(limits="open", in_flight_limit=OPEN_IN_FLIGHT_RANGE[1] + 1)
    with pytest.raises(ValueError, match=r"lease_seconds must be 0.001 through 604800 seconds, got 0.0001"):
        LeaseConfig(limits="open", lease_seconds=OPEN_LEASE_RANGE[0] / 10)
    sim = LeaseSimulation(LeaseConfig(limits="open"), seed=0)
    with pytest.raises(
        ValueError, match=r"lease_seconds must be 0.001 through 604800 seconds, got 0 \(limits = 'open'\)"
    ):
        sim.register_consumer("c", client=False, lease_seconds=0)


@pytest.mark.parametrize("field", sorted(CHOICES))
def test_every_rule_refuses_an_unknown_value_naming_the_field_and_the_choices(field):
    with pytest.raises(
        ValueError, match=rf"{field} must be one of {', '.join(map(repr, CHOICES[field]))}, got 'bogus'"
    ):
        LeaseConfig(**{field: "bogus"})


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"max_deliver": 0}, r"max_deliver must be an integer >= 1, or -1 \(no limit\), got 0"),
        ({"max_deliver": 2.5}, "max_deliver must be an integer"),
        ({"backoff": "0.2"}, "backoff must be a list of seconds"),
        ({"backoff": [10, 0.2]}, r"backoff\[1\] must be 5 through 900 seconds \(RiffDB's lease range"),
        (
            {"limits": "open", "backoff": [0.2, -1]},
            r"backoff\[1\] must be 0.001 through 604800 seconds \(limits = 'open'\)",
        ),
        (
            {"limits": "open", "max_deliver": 2, "backoff": [0.2, 0.4, 0.8]},
            "backoff must have at most max_deliver \\(2\\) entries, got 3 .*NewJSConsumerMaxDeliverBackoffError",
        ),
        ({"deliver_cost": -1}, "deliver_cost must be >= 0 seconds"),
        ({"ack_cost": {"dist": "nope"}}, "ack_cost.dist must be one of"),
        ({"max_retry_delay": 7200}, "at most 3600 seconds"),
    ],
)
def test_bad_broker_options_are_refused_with_what_is_allowed(fields, message):
    with pytest.raises(ValueError, match=message):
        LeaseConfig(**fields)


def test_client_options_are_checked_when_the_consumer_is_registered():
    sim = LeaseSimulation(seed=0)
    for kwargs, message in (
        ({"pull_mode": "push"}, "pull_mode must be one of"),
        ({"poison_action": "drop"}, "poison_action must be one of"),
        ({"in_progress_every": 0}, "in_progress_every must be"),
    ):
        with pytest.raises(ValueError, match=message):
            sim.register_consumer("c", **kwargs)
    assert sim.consumers().empty  # nothing half-written


# -- late ack: refused (RiffDB) or honoured (JetStream, Redis) --------------------------------
@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_a_late_ack_fails_closed_under_riffdb_and_resolves_the_event_under_honour(store):
    out = {}
    for rule in ("refuse", "honour"):
        e = engine(LeaseConfig(late_ack=rule), store)
        e.add_consumer(t(0), "c", lease_seconds=5)
        (eid,) = e.publish(t(0), [("p", "k", 1)])
        (first,) = e.consume(t(0), "c")
        assert e.ack(t(5), "c", eid, first.token, 1) == ("expired" if rule == "refuse" else "acked")
        out[rule] = e.status(t(5), "c")
    assert out["refuse"]["checkpoints"] == {} and out["refuse"]["live_leases"] == 1
    assert out["honour"]["checkpoints"] == {"p": 1} and out["honour"]["live_leases"] == 0


def test_an_earlier_deliverys_ack_resolves_the_redelivered_event_under_honour():
    for rule, after in (("refuse", ("wrong_token", "acked")), ("honour", ("acked", "no_lease"))):
        e = engine(LeaseConfig(late_ack=rule))
        e.add_consumer(t(0), "c", lease_seconds=5)
        (eid,) = e.publish(t(0), [("p", "k", 1)])
        (first,) = e.consume(t(0), "c")
        (second,) = e.consume(t(6), "c")  # the expired lease recovered, then leased again
        assert second.attempt == 2
        got = (e.ack(t(7), "c", eid, first.token, 1), e.ack(t(8), "c", eid, second.token, 1))
        assert got == after, rule
        if rule == "honour":
            acks = e.trace.frame().query("kind == 'acked'")
            assert acks["event_id"].tolist() == [eid] and acks["detail"].tolist() == ["attempt 2 (late)"]


def test_a_late_ack_of_an_event_waiting_for_its_retry_resolves_it_under_honour():
    e = engine(LeaseConfig(late_ack="honour"))
    e.add_consumer(t(0), "c", lease_seconds=5)
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    (first,) = e.consume(t(0), "c")
    assert e.recover(t(5)) == 1 and e.status(t(5), "c")["retries"] == 1
    assert e.ack(t(6), "c", eid, first.token, 1) == "acked"
    st = e.status(t(6), "c")
    assert st["retries"] == 0 and st["checkpoints"] == {"p": 1} and list(e.consume(t(7), "c")) == []


def _lognormal_run(late_ack: str):
    """The issue's comparison: handlers lognormal with median 0.8 x AckWait (1 s)."""
    cfg = LeaseConfig.preset(JETSTREAM, lease_seconds=1.0, late_ack=late_ack)
    sim = LeaseSimulation(cfg, seed=3)
    sim.register_consumer(
        "c", duration=lambda rng: rng.lognormvariate(math.log(0.8), 0.5), pull_mode="wait", batch_limit=50
    )
    sim.add_workload(5.0, partitions=1, stop=60)
    sim.run(until=120)
    return sim, check(sim)


def test_honouring_late_acks_makes_fewer_duplicates_per_message_and_the_checker_names_them():
    (_, refused), (_, honoured) = _lognormal_run("refuse"), _lognormal_run("honour")
    for r in (refused, honoured):
        assert r.valid and r.total["lost"] == 0 and r.total["pending"] == 0
    assert honoured.total["duplicates"] < 0.8 * refused.total["duplicates"]
    assert set(refused.total["duplicates_by_cause"]) == {"lease_expired"}
    assert honoured.total["duplicates_by_cause"].get("late_ack", 0) > honoured.total["duplicates"] / 2


# -- MaxDeliver, BackOff and what happens at the limit ---------------------------------------------
def test_max_deliver_5_with_backoff_leases_on_schedule_then_sends_the_advisory_and_keeps_the_message():
    """The issue's run on nats-server 2.15.1: max_deliver=5, BackOff [0.2, 0.4, 0.8, 1.6] s."""
    cfg = LeaseConfig.preset(JETSTREAM, max_deliver=5, backoff=(0.2, 0.4, 0.8, 1.6), retention_policy="interest")
    sim = LeaseSimulation(cfg, seed=0)
    sim.register_consumer("c", duration=100.0, pull_mode="wait", batch_limit=10)
    sim.publish("p0")
    sim.run(until=10)
    assert times(sim, "leased") == [0.0, 0.2, 0.6, 1.4, 3.0]
    assert times(sim, "max_deliveries") == [4.6]
    assert len(sim.events()) == 1  # kept in the stream (needAck: rdc)
    (dead,) = sim.dead_letters().to_dict("records")
    assert dead["attempts"] == 5 and dead["payload"] is None
    assert sim.status("c")["checkpoints"] == {}  # the ack floor waits for a later ack (UpdateAcks)
    r = check(sim)
    assert r.valid and r.total["dead_lettered"] == 1 and r.total["lost"] == 0


@settings(max_examples=30, deadline=None)
@given(
    backoff=st.lists(st.integers(1, 40).map(lambda x: x / 10), min_size=1, max_size=6),
    extra=st.integers(0, 3),
)
def test_backoff_leases_are_the_lists_entries_in_turn_the_last_repeated(backoff, extra):
    max_deliver = len(backoff) + extra
    cfg = LeaseConfig(limits="open", max_deliver=max_deliver, max_deliver_rule="deliveries", backoff=tuple(backoff))
    e = engine(cfg)
    e.add_consumer(t(0), "c")
    e.publish(t(0), [("p", "k", 1)])
    at = 0.0
    for n in range(1, max_deliver + 1):
        (lease,) = e.consume(t(at), "c")
        assert lease.attempt == n and lease.expires_at == t(at) + round(backoff[min(n, len(backoff)) - 1] * 1e6)
        at = (lease.expires_at - T0) / 1e6
    assert e.recover(t(at)) == 1
    assert [k for _, k, _ in kinds(e, "dead_lettered", "max_deliveries")] == ["dead_lettered"]


def test_at_the_limit_failures_end_at_the_nack_and_deliveries_when_the_retry_comes_due():
    ends = {}
    for rule in ("failures", "deliveries"):
        e = engine(LeaseConfig(max_deliver=2, max_deliver_rule=rule))
        e.add_consumer(t(0), "c", lease_seconds=5)
        (eid,) = e.publish(t(0), [("p", "k", 1)])
        for n in (1, 2):
            (lease,) = e.consume(t(10 * n), "c")
            assert e.nack(t(10 * n), "c", eid, lease.token, 1, delay=3.0) == (
                "dead_lettered" if (n, rule) == (2, "failures") else "retry_scheduled"
            )
        assert list(e.consume(t(22), "c")) == []  # not yet due
        assert list(e.consume(t(23), "c")) == []  # due: the third delivery is not made
        ends[rule] = kinds(e, "dead_lettered")
    assert ends == {"failures": [(20.0, "dead_lettered", "1:0")], "deliveries": [(23.0, "dead_lettered", "1:0")]}


@pytest.mark.parametrize("at", AT_MAX_DELIVER)
def test_what_happens_at_the_limit_dead_letter_advisory_or_drop(at):
    sim = LeaseSimulation(LeaseConfig(max_deliver=1, at_max_deliver=at), seed=0)
    sim.register_consumer("c", client=False)
    sim.publish("p0", payload={"x": 1})
    (lease,) = sim.consume("c")
    assert (
        sim.nack("c", lease.event_id, lease.token, 1)
        == {
            "dead_letter": "dead_lettered",
            "advisory": "max_deliveries",
            "drop": "dropped",
        }[at]
    )
    dead = sim.dead_letters().to_dict("records")
    r = check(sim)
    # JetStream's ack floor passes a message past MaxDeliver only at a later ack: none comes here
    assert sim.status("c")["checkpoints"] == ({} if at == "advisory" else {"p0": 1}) and r.valid
    if at == "drop":
        assert dead == [] and r.total["lost_by_cause"] == {"max_deliver": 1}
    else:
        assert [d["payload"] for d in dead] == (['{"x":1}'] if at == "dead_letter" else [None])
        assert r.total["dead_lettered"] == 1 and r.total["lost"] == 0


def test_riffdbs_tenth_failure_stays_the_default():
    e = engine()
    e.add_consumer(t(0), "c", lease_seconds=5)
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    results = []
    for n in range(1, MAX_ATTEMPTS + 1):
        (lease,) = e.consume(t(n), "c")
        results.append(e.nack(t(n), "c", eid, lease.token, 1))
    assert results == ["retry_scheduled"] * (MAX_ATTEMPTS - 1) + ["dead_lettered"]


def test_unlimited_deliveries_never_end():
    e = engine(LeaseConfig(max_deliver=-1))
    e.add_consumer(t(0), "c", lease_seconds=5)
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    for n in range(1, 3 * MAX_ATTEMPTS):
        (lease,) = e.consume(t(n), "c")
        assert lease.attempt == n and e.nack(t(n), "c", eid, lease.token, 1) == "retry_scheduled"


# -- a nak's delay with a BackOff list -----------------------------------------------------------
@pytest.mark.parametrize("rule,due", [("as_asked", 1.0), ("plus_backoff", 1.0 + 0.8 - 0.2)])
def test_a_naks_delay_with_a_backoff_list_adds_the_deliverys_entry_less_the_first(rule, due):
    """nats-server 2.15.1: a nak'd message comes back after its delay plus the
    list's entry for that delivery minus its first entry."""
    cfg = LeaseConfig(limits="open", backoff=(0.2, 0.4, 0.8), max_deliver=-1, nack_delay_rule=rule)
    e = engine(cfg)
    e.add_consumer(t(0), "c")
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    now = 0.0
    for _ in range(2):  # deliveries 1 and 2 expire
        (lease,) = e.consume(t(now), "c")
        now = (lease.expires_at - T0) / 1e6
    (third,) = e.consume(t(now), "c")
    assert third.attempt == 3
    assert e.nack(t(now), "c", eid, third.token, 1, delay=1.0) == "retry_scheduled"
    (retry,) = e.store.rows("retries")
    assert retry["not_before"] == t(now + due)


# -- InProgress and Term ----------------------------------------------------------------------------
def test_in_progress_runs_the_lease_again_from_now_without_a_new_delivery():
    e = engine()
    e.add_consumer(t(0), "c", lease_seconds=5)
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    (lease,) = e.consume(t(0), "c")
    assert e.in_progress(t(4), "c", eid, lease.token, 1) == "extended"
    (row,) = e.store.rows("leases")
    assert (row["expires_at"], row["attempt"]) == (t(9), 1)
    assert e.recover(t(8)) == 0 and e.ack(t(8.5), "c", eid, lease.token, 1) == "acked"
    assert e.in_progress(t(9), "c", eid, lease.token, 1) == "no_lease"


def test_a_worker_that_says_in_progress_is_not_redelivered():
    got = {}
    for every in (None, 2.0):
        sim = LeaseSimulation(seed=0)
        sim.register_consumer("c", duration=12.0, lease_seconds=5, in_progress_every=every)
        sim.publish("p0")
        sim.run(until=60)
        got[every] = check(sim).total
    assert set(got[None]["duplicates_by_cause"]) == {"lease_expired"} and got[None]["duplicates"] >= 2
    assert got[2.0]["duplicates"] == 0 and got[2.0]["delivered"] == 1


def test_term_stops_redelivery_now_and_the_checkpoint_passes_it():
    e = engine()
    e.add_consumer(t(0), "c", lease_seconds=5)
    first, second = e.publish(t(0), [("p", "k", 1), ("p", "k", 2)])
    a, b = e.consume(t(0), "c")
    assert e.term(t(1), "c", first, a.token, 1, reason="bad input") == "terminated"
    assert e.ack(t(1), "c", second, b.token, 1) == "acked"
    assert e.status(t(1), "c")["checkpoints"] == {"p": 2} and list(e.consume(t(20), "c")) == []
    assert e.term(t(2), "c", first, a.token, 1) == "no_lease"


def test_poison_terminated_or_nacked_to_its_dead_letter():
    out = {}
    for action in ("nack", "term"):
        sim = LeaseSimulation(seed=0)
        sim.register_consumer("c", poison=lambda lease: lease.seq == 1, poison_action=action, nack_delay=0.0)
        sim.publish("p0")
        sim.run(until=30)
        out[action] = (check(sim), len(sim.trace().query("kind == 'leased'")))
    (nacked, leases_n), (termed, leases_t) = out["nack"], out["term"]
    assert leases_n == MAX_ATTEMPTS and nacked.total["dead_lettered"] == 1
    assert leases_t == 1 and termed.total["lost_by_cause"] == {"term": 1} and termed.valid


def test_in_progress_and_term_need_the_consumers_own_credential():
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False)
    sim.register_consumer("d", client=False)
    sim.publish("p0")
    (lease,) = sim.consume("c")
    for op in (sim.in_progress, sim.term):
        for caller in (Credential.consumer("d"), Credential.admin_grant()):
            with pytest.raises(Unauthorized, match="own credential"):
                op("c", lease.event_id, lease.token, 1, caller=caller)
    assert sim.leases()["expires_at"].tolist() == [sim.leases()["expires_at"].iloc[0]] and not len(sim.resolutions())
    assert sim.term("c", lease.event_id, lease.token, 1, caller=Credential.consumer("c")) == "terminated"


# -- MaxAckPending: more than 8 in flight ---------------------------------------------------------
def test_max_ack_pending_bounds_what_is_in_flight_beyond_riffdbs_eight():
    e = engine(LeaseConfig.preset(JETSTREAM))
    e.add_consumer(t(0), "c", batch_limit=10_000)
    assert e.status(t(0), "c")["in_flight_limit"] == 1000  # JsDefaultMaxAckPending
    e.publish(t(0), [("p", "k", i) for i in range(1200)])
    assert len(e.consume(t(1), "c")) == 1000 and len(e.consume(t(2), "c")) == 0
    row = e.store.rows("leases")[0]
    assert e.ack(t(3), "c", row["event_id"], row["token"], 1) == "acked"
    assert len(e.consume(t(4), "c")) == 1


# -- retention: the fence, interest, limits --------------------------------------------------------
def _two_consumers_ack_first_and_third(policy: str, store: str = "memory"):
    e = engine(LeaseConfig(retention_policy=policy), store)
    for c in "ab":
        e.add_consumer(t(0), c)
    e.publish(t(0), [("p", "k", i) for i in range(3)])
    for c in "ab":
        pulled = e.consume(t(1), c)
        for lease in (pulled[0], pulled[2]):
            assert e.ack(t(2), c, lease.event_id, lease.token, 1) == "acked"
    return e


@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_interest_retention_removes_what_every_consumer_acked_and_the_fence_keeps_it(store):
    fenced, interest = (
        _two_consumers_ack_first_and_third("fence", store),
        _two_consumers_ack_first_and_third("interest", store),
    )
    assert [r["event_id"] for r in fenced.store.rows("events")] == ["1:0", "1:1", "1:2"]
    assert [r["event_id"] for r in interest.store.rows("events")] == ["1:1"]
    # the sparse acks of 1:2 outlive it: the checkpoint passes it once 1:1 is acked
    assert [(r["consumer"], r["event_id"]) for r in interest.store.rows("resolutions")] == [("a", "1:2"), ("b", "1:2")]
    pulled = interest.consume(t(10), "a")  # the leases of 1:1 are still live: nothing new
    assert list(pulled) == []
    for c in "ab":
        (lease,) = [r for r in interest.store.rows("leases") if r["consumer"] == c]
        assert interest.ack(t(11), c, lease["event_id"], lease["token"], 1) == "acked"
        assert interest.status(t(11), c)["checkpoints"] == {"p": 3}
    assert interest.store.rows("events") == [] and interest.store.rows("resolutions") == []


def test_interest_retention_waits_for_every_consumer_and_keeps_an_advisory():
    e = engine(LeaseConfig(retention_policy="interest", max_deliver=1, at_max_deliver="advisory"))
    for c in "ab":
        e.add_consumer(t(0), c)
    (eid,) = e.publish(t(0), [("p", "k", 1)])
    (a,) = e.consume(t(1), "a")
    (b,) = e.consume(t(1), "b")
    assert e.ack(t(2), "a", eid, a.token, 1) == "acked" and len(e.store.rows("events")) == 1
    assert e.nack(t(2), "b", eid, b.token, 1) == "max_deliveries"
    assert e.prune_once(t(3)) == 0 and len(e.store.rows("events")) == 1  # kept: b's advisory
    assert e.prune_once(t(8 * 86400)) == 1  # MaxAge holds for no consumer


# -- JetStream's ack floor, as nats-server 2.15.1 reported it (consumer_info) --------------------------
def ack_floor(e: LeaseEngine, at: float) -> int:
    """The consumer ``c``'s checkpoint in partition ``p`` (0: none), as a seq."""
    return e.status(t(at), "c")["checkpoints"].get("p", 0)


def publish_each(e: LeaseEngine, n: int) -> None:
    for i in range(n):
        e.publish(t(0), [("p", "k", i)])  # one commit each: message n is seq n


@pytest.mark.parametrize("retention", ["limits", "interest"])
def test_jetstreams_ack_floor_stays_below_a_message_past_max_deliver_until_a_later_ack(retention):
    """The poison case on nats-server 2.15.1 (MaxDeliver 4, BackOff [0.2, 0.4, 0.6] s, every
    delivery of message 2 nak'd with 0.3 s): the floor after each step is 1 through the
    MAX_DELIVERIES advisory, on a limits and an interest stream alike, and 5 once message 5
    is acked (what ``consumerFileStore.UpdateAcks`` reports; the issue's model said 2)."""
    cfg = LeaseConfig.preset(JETSTREAM, max_deliver=4, backoff=(0.2, 0.4, 0.6), retention_policy=retention)
    e = engine(cfg)
    e.add_consumer(t(0), "c", batch_limit=8, in_flight_limit=16)
    publish_each(e, 4)
    held = {lease.seq: lease for lease in e.consume(t(0), "c")}
    floors = []

    def answer(at: float, lease, ok: bool) -> None:
        if ok:
            assert e.ack(t(at), "c", lease.event_id, lease.token, 1) == "acked"
        else:
            assert e.nack(t(at), "c", lease.event_id, lease.token, 1, delay=0.3) == "retry_scheduled"
        floors.append(ack_floor(e, at))

    for n in (1, 2, 3, 4):
        answer(0.01, held[n], ok=n != 2)
    while retries := e.store.rows("retries"):
        at = (retries[0]["not_before"] - T0) / 1e6
        pulled = e.consume(t(at), "c")
        if pulled:
            answer(at, pulled[0], ok=False)
        else:  # the limit: the advisory instead of a fifth delivery
            floors.append(ack_floor(e, at))
    assert [k for _, k, _ in kinds(e, "max_deliveries")] == ["max_deliveries"]
    publish_each(e, 1)
    (last,) = e.consume(t(5), "c")
    answer(5, last, ok=True)
    # ack 1, nak 2, ack 3, ack 4, nak (deliveries 2, 3, 4), the advisory, ack 5
    assert floors == [1, 1, 1, 1, 1, 1, 1, 1, 5]
    assert len(e.store.rows("events")) == (1 if retention == "interest" else 5)  # the stream keeps 2


@pytest.mark.parametrize("retention", ["limits", "interest"])
@pytest.mark.parametrize(
    "messages,steps,floors",
    [
        # the first past the floor went past MaxDeliver: no ack moves the floor while 3 is pending
        (3, [("nak", 1), ("pull", 0), ("ack", 2), ("ack", 3)], [0, 0, 0, 3]),
        # one in the middle: an ack of 3 is not of the first past the floor, 4's leaves none pending
        (4, [("ack", 1), ("nak", 2), ("pull", 0), ("ack", 3), ("ack", 4)], [1, 1, 1, 1, 4]),
        # an ack of the first past the floor passes the one past MaxDeliver behind it
        (3, [("nak", 2), ("pull", 0), ("ack", 1), ("ack", 3)], [0, 0, 2, 3]),
    ],
)
def test_jetstreams_ack_floor_moves_at_an_ack_of_the_first_past_it_or_of_the_last_pending(
    retention, messages, steps, floors
):
    """nats-server 2.15.1 with MaxDeliver 1: a nak'd message goes past the limit at the
    next pull; the floor after each step (measured on limits and interest streams)."""
    e = engine(LeaseConfig.preset(JETSTREAM, max_deliver=1, retention_policy=retention))
    e.add_consumer(t(0), "c", batch_limit=messages)
    publish_each(e, messages)
    held = {lease.seq: lease for lease in e.consume(t(0), "c")}
    got = []
    for k, (what, n) in enumerate(steps, 1):
        if what == "pull":
            assert list(e.consume(t(k), "c")) == []
        else:
            answer = e.ack if what == "ack" else e.nack
            lease = held[n]
            assert answer(t(k), "c", lease.event_id, lease.token, 1) in ("acked", "retry_scheduled")
        got.append(ack_floor(e, k))
    assert got == floors


class StoredAckFloor:
    """The ack floor nats-server reports, as its consumer store keeps it
    (``server/filestore.go``, ``consumerFileStore``: ``UpdateDelivered`` and
    ``UpdateAcks`` under AckExplicit), transcribed: the pending messages with
    their first delivery's sequence, the last delivered pair, the floor pair."""

    def __init__(self, max_deliver: int) -> None:
        self.maxdc, self.dseq = max_deliver, 0
        self.pending: dict[int, int] = {}  # stream seq -> its first delivery's sequence
        self.delivered, self.floor = (0, 0), (0, 0)  # (consumer seq, stream seq)

    def deliver(self, sseq: int, dc: int) -> None:
        self.dseq += 1
        self.update_delivered(self.dseq, sseq, dc)

    def past_limit(self, sseq: int, dc: int) -> None:  # getNextMsg: updateDelivered(p.Sequence, seq, dc)
        self.update_delivered(self.pending[sseq], sseq, dc)

    def update_delivered(self, dseq: int, sseq: int, dc: int) -> None:
        if dseq <= self.floor[0]:
            return
        if sseq > self.delivered[1]:
            self.pending[sseq] = dseq
        self.delivered = (max(self.delivered[0], dseq), max(self.delivered[1], sseq))
        if dc > 1 and dc > self.maxdc:
            self.pending.pop(sseq, None)

    def ack(self, sseq: int) -> None:
        dseq = self.pending.get(sseq)  # processAckMsg passes the first delivery's sequence
        if dseq is None or dseq <= self.floor[0]:
            return
        del self.pending[sseq]
        if not self.pending:
            self.floor = self.delivered
        elif dseq == self.floor[0] + 1:
            self.floor = (dseq, sseq)
            for ss in range(sseq + 1, self.delivered[1] + 1):
                if ss in self.pending:
                    self.floor = (self.pending[ss] - 1, ss - 1)
                    break


STEPS = st.lists(st.tuples(st.sampled_from(["ack", "ack", "nak", "pull", "publish"]), st.integers(0, 30)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    retention=st.sampled_from(["limits", "interest"]),
    max_deliver=st.integers(1, 3),
    first=st.integers(1, 6),
    batch=st.integers(1, 6),
    steps=STEPS,
)
def test_under_the_advisory_rule_the_checkpoint_is_the_ack_floor_nats_servers_store_keeps(
    retention, max_deliver, first, batch, steps
):
    """Any acks, naks (redelivered at the next pull, until MaxDeliver) and publishes:
    the model's checkpoint is, after every step, the floor of :class:`StoredAckFloor`."""
    e = engine(LeaseConfig.preset(JETSTREAM, max_deliver=max_deliver, retention_policy=retention))
    e.add_consumer(t(0), "c", batch_limit=batch)
    publish_each(e, first)
    store, held, ended = StoredAckFloor(max_deliver), {}, 0
    for k, (what, pick) in enumerate([("pull", 0), *steps], 1):
        if what == "publish":
            publish_each(e, 1)
        elif what == "pull":
            pulled = e.consume(t(k), "c")
            past = kinds(e, "max_deliveries")[ended:]
            ended += len(past)
            for _, _, event_id in past:  # its last delivery failed: past the limit at this pull
                seq = int(event_id.split(":")[0])
                store.past_limit(seq, max_deliver + 1)
            for lease in pulled:
                store.deliver(lease.seq, lease.attempt)
                held[lease.seq] = lease
        elif held:
            lease = held.pop(sorted(held)[pick % len(held)])
            if what == "ack":
                assert e.ack(t(k), "c", lease.event_id, lease.token, 1) == "acked"
                store.ack(lease.seq)
            else:
                assert e.nack(t(k), "c", lease.event_id, lease.token, 1) == "retry_scheduled"
        assert ack_floor(e, k) == store.floor[1], (what, pick)


@pytest.mark.parametrize("retention", ["limits", "interest"])
def test_jetstreams_ack_floor_after_out_of_order_acks_passes_what_an_interest_stream_removed(retention):
    """nats-server 2.15.1, 8 messages acked in the order 2, 6, 7, 8, 3, 4, 1, 5: the floor
    is the same on an interest stream, which removed each message at its ack, as on a
    limits stream (the issue's model stopped at the last retained one: 1, then 5)."""
    e = engine(LeaseConfig.preset(JETSTREAM, retention_policy=retention))
    e.add_consumer(t(0), "c", batch_limit=8)
    publish_each(e, 8)
    held = {lease.seq: lease for lease in e.consume(t(1), "c")}
    floors = [ack_floor(e, 1)]
    for n in (2, 6, 7, 8, 3, 4, 1, 5):
        assert e.ack(t(2), "c", held[n].event_id, held[n].token, 1) == "acked"
        floors.append(ack_floor(e, 2))
    assert floors == [0, 0, 0, 0, 0, 0, 0, 4, 8]
    assert len(e.store.rows("events")) == (0 if retention == "interest" else 8)
    assert e.store.rows("resolutions") == []


def test_without_a_fence_age_prunes_what_a_consumer_still_needs_and_the_checker_says_so():
    out = {}
    for policy in ("fence", "limits"):
        sim = LeaseSimulation(LeaseConfig(retention_policy=policy, retention=10.0, retention_interval=5.0), seed=0)
        sim.register_consumer("slow", client=False)
        sim.publish("p0")
        sim.run(until=30)
        out[policy] = (len(sim.events()), check(sim))
    (kept, fenced), (gone, limited) = out["fence"], out["limits"]
    assert kept == 1 and fenced.total["pending"] == 1 and fenced.valid
    assert gone == 0 and limited.total["lost_by_cause"] == {"not_retained": 1} and limited.valid


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), data=st.data())
def test_the_checkpoint_over_sparse_acks_is_the_contiguous_acked_prefix(n, data):
    """JetStream's ack floor over any ack order (open limits: no window of 65);
    under interest retention what is left is what is not acked."""
    order = data.draw(st.permutations(range(n)))
    acked_n = data.draw(st.integers(0, n))
    nodes = {}
    for policy in ("fence", "interest"):
        e = nodes[policy] = engine(LeaseConfig(limits="open", retention_policy=policy))
        e.add_consumer(t(0), "c", batch_limit=n, in_flight_limit=n)
        e.publish(t(0), [("p", "k", i) for i in range(n)])
        nodes[policy, "leases"] = e.consume(t(1), "c")
    acked = set()
    for i in order[:acked_n]:
        for policy in ("fence", "interest"):
            lease = nodes[policy, "leases"][i]
            assert nodes[policy].ack(t(2), "c", lease.event_id, lease.token, 1) == "acked"
        acked.add(i)
        floor = next((k for k in range(n) if k not in acked), n)  # the reference: the first unacked
        for policy in ("fence", "interest"):  # interest: past the acked events it removed too
            assert nodes[policy].status(t(2), "c")["checkpoints"].get("p", 0) == floor
        retained = sorted(r["seq"] for r in nodes["interest"].store.rows("events"))
        assert retained == [k + 1 for k in range(n) if k not in acked]
        first = nodes["interest"].status(t(2), "c")["first_required"]
        assert first == (None if floor == n else f"1:{floor}")


# -- Redis: claim by idle time -----------------------------------------------------------------------
@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_a_claim_takes_idle_entries_as_the_next_delivery_and_the_holders_ack_still_counts(store):
    """The issue's run on Redis 6.2.14: three entries read, the second acked; after
    1.1 s XAUTOCLAIM with min-idle 1,000 ms moves the other two, delivery count 2."""
    e = engine(LeaseConfig.preset(REDIS, lease_seconds=1.0), store)
    e.add_consumer(t(0), "g")
    ids = [e.publish(t(0), [("p", "k", i)])[0] for i in range(3)]
    first = e.consume(t(0), "g", 3)
    assert e.ack(t(0.5), "g", ids[1], first[1].token, 1) == "acked"
    assert e.recover(t(1.1)) == 0 and len(e.store.rows("leases")) == 2  # nothing expires by itself
    claimed = e.consume(t(1.1), "g", 10)
    assert [(x.event_id, x.attempt) for x in claimed] == [(ids[0], 2), (ids[2], 2)]
    assert [k for _, k, _ in kinds(e, "claimed")] == ["claimed", "claimed"]
    assert e.ack(t(1.2), "g", ids[0], first[0].token, 1) == "acked"  # XACK: whoever holds it


def test_under_claims_an_idle_lease_stays_the_holders_until_a_pull_claims_it():
    for rule in ("recovery", "claim"):
        e = engine(LeaseConfig(lease_expiry=rule))  # late_ack stays "refuse": the rule alone
        e.add_consumer(t(0), "c", lease_seconds=5)
        first, second = e.publish(t(0), [("p", "k", 1), ("p", "k", 2)])
        a, b = e.consume(t(0), "c")
        e.recover(t(50))
        assert e.ack(t(50), "c", first, a.token, 1) == ("acked" if rule == "claim" else "no_lease")
        again = {x.event_id: x.attempt for x in e.consume(t(51), "c")}  # recovered into a retry, or claimed
        assert again == ({second: 2} if rule == "claim" else {first: 2, second: 2})
        assert e.ack(t(52), "c", second, b.token, 1) == "wrong_token"  # the claim's (or retry's) new token


def test_claimed_duplicates_are_named_as_claims():
    sim = LeaseSimulation(LeaseConfig.preset(REDIS, lease_seconds=1.0), seed=2)
    sim.register_consumer(
        "c", duration=lambda rng: rng.lognormvariate(math.log(0.8), 0.5), pull_mode="wait", batch_limit=50
    )
    sim.add_workload(5.0, partitions=1, stop=30)
    sim.run(until=60)
    r = check(sim)
    assert r.valid and r.total["duplicates"] > 0 and set(r.total["duplicates_by_cause"]) == {"claimed"}


# -- measured costs in the loops ---------------------------------------------------------------
def test_the_hand_off_and_the_acks_round_trip_take_their_measured_time():
    cfg = LeaseConfig(deliver_cost=Dist.empirical([0.003]), ack_cost=Dist.empirical([0.002]))
    sim = LeaseSimulation(cfg, seed=0)
    sim.register_consumer("c", duration=0.5, pull_mode="wait")
    sim.publish("p0")
    sim.run(until=5)
    assert times(sim, "leased") == [0.0]
    assert times(sim, "delivered") == [0.503] and times(sim, "acked") == [0.505]


def test_without_costs_no_cost_stream_is_drawn_and_a_run_is_as_before():
    plain, costed = (LeaseSimulation(c, seed=0) for c in (LeaseConfig(), LeaseConfig(ack_cost=0.0)))
    for sim in (plain, costed):
        sim.register_consumer("c", duration=lambda rng: rng.uniform(0, 2))
        sim.add_workload(3.0, stop=20)
        sim.run(until=40)
    a, b = plain.trace(), costed.trace()
    assert a[["t", "kind", "event_id"]].equals(b[["t", "kind", "event_id"]])


def test_a_waiting_pull_hands_off_as_soon_as_a_worker_ends():
    sim = LeaseSimulation(LeaseConfig(limits="open"), seed=0)
    sim.register_consumer("c", duration=0.25, batch_limit=1, pull_mode="wait", poll_interval=5.0)
    for _ in range(4):
        sim.publish("p0")
    sim.run(until=10)
    assert times(sim, "leased") == [0.0, 0.25, 0.5, 0.75]
    poll = LeaseSimulation(LeaseConfig(limits="open"), seed=0)
    poll.register_consumer("c", duration=0.25, batch_limit=1, poll_interval=0.5)
    for _ in range(4):
        poll.publish("p0")
    poll.run(until=10)
    assert times(poll, "leased") == [0.0, 0.5, 1.0, 1.5]


def test_a_deadline_timer_expires_leases_at_their_time_not_on_the_recovery_grid():
    got = {}
    for timer in ("interval", "deadline"):
        sim = LeaseSimulation(LeaseConfig(expiry_timer=timer), seed=0)
        sim.register_consumer("c", client=False, lease_seconds=5)
        sim.run(until=0.25)
        sim.publish("p0")
        sim.consume("c")
        sim.run(until=10)
        got[timer] = times(sim, "expired")
    assert got == {"interval": [6.0], "deadline": [5.25]}


# -- scenario files --------------------------------------------------------------------------------
def _scenario(leases: str = "", consumer: str = "") -> dict:
    import tomllib

    text = f'design = "leases"\n[run]\nuntil = 10.0\n[leases]\n{leases}\n[[consumers]]\nname = "c"\n{consumer}\n'
    return tomllib.loads(text)


@pytest.mark.parametrize(
    "leases,consumer,key,fragment",
    [
        ('late_ack = "sometimes"', "", "leases.late_ack", "must be one of 'refuse', 'honour', got 'sometimes'"),
        ("backoff = [1.0]", "", "leases.backoff", "backoff[0] must be 5 through 900 seconds"),
        ("max_deliver = 0", "", "leases.max_deliver", "an integer >= 1, or -1 (no limit)"),
        ("", 'pull_mode = "push"', "consumers[0].pull_mode", "one of 'poll', 'wait'"),
        ("", 'poison_action = "drop"', "consumers[0].poison_action", "one of 'nack', 'term'"),
        ("", "in_progress_every = 0", "consumers[0].in_progress_every", "seconds >= 1e-06"),
        (
            "",
            "lease_seconds = 1.0",
            "consumers[0].lease_seconds",
            "5 through 900 seconds, got 1.0 (RiffDB's range; limits = 'open' allows 0.001 through 604800 seconds)",
        ),
        (
            'limits = "open"',
            "in_flight_limit = 200000",
            "consumers[0].in_flight_limit",
            "from 1 through 100000, got 200000 (leases.limits = 'open')",
        ),
    ],
)
def test_a_scenario_file_names_the_key_of_a_bad_brokers_option(leases, consumer, key, fragment):
    from fanoutsim.kernel.scenario import ScenarioError
    from fanoutsim.scenario import parse_scenario

    with pytest.raises(ScenarioError) as err:
        parse_scenario(_scenario(leases, consumer))
    assert key in [p for p, _ in err.value.problems] and fragment in str(err.value), str(err.value)


def test_a_scenario_file_sets_every_brokers_option_and_the_consumers_take_the_leases_defaults():
    from fanoutsim.scenario import parse_scenario

    sc = parse_scenario(
        _scenario(
            'limits = "open"\nlease_seconds = 1.5\nin_flight_limit = 500\nbackoff = [0.5, 1.0]\nmax_deliver = 3\n'
            'late_ack = "honour"\nretention_policy = "interest"\ndeliver_cost = 0.001',
            'pull_mode = "wait"\nin_progress_every = 0.25\npoison_action = "term"',
        )
    )
    assert sc.config.backoff == (0.5, 1.0) and sc.config.deliver_cost == Dist("fixed", 0.001)
    (c,) = sc.consumers
    assert (c.lease_seconds, c.in_flight_limit, c.batch_limit) == (1.5, 500, 4)
    sim = sc.build()
    row = sim.status("c")
    assert (row["lease_seconds"], row["in_flight_limit"]) == (0.5, 500)  # BackOff's first entry is the lease
    client = sim.clients["c"]
    assert (client.pull_mode, client.in_progress_every, client.poison_action) == ("wait", 0.25, "term")


# -- the wall clock: the same loops --------------------------------------------------------------
def test_on_the_wall_clock_a_waiting_pull_delivers_and_in_progress_and_term_answer(tmp_path):
    from conftest import wait_for

    from fanoutsim.designs.leases.realtime import LeaseRealtime

    cfg = LeaseConfig.preset(JETSTREAM, recovery_interval=0.2, ack_cost=0.001, deliver_cost=0.001)
    rt = LeaseRealtime(cfg, store=str(tmp_path / "wall.duckdb"))
    try:
        rt.register_consumer("w", duration=0.01, pull_mode="wait", batch_limit=4, poll_interval=1.0)
        rt.register_consumer("h", client=False)
        rt.start()
        for _ in range(5):
            rt.publish("p0")
        assert wait_for(lambda: rt.status("w")["checkpoints"].get("p0") == 5)
        (lease,) = rt.consume("h", 1)
        assert rt.in_progress("h", lease.event_id, lease.token, lease.incarnation) == "extended"
        assert rt.term("h", lease.event_id, lease.token, lease.incarnation, reason="no") == "terminated"
        rt.stop()
        r = check(rt)
        assert (
            r.valid
            and r.total["delivered"] == 5
            and r.total["pending"] == 4
            and r.total["lost_by_cause"] == {"term": 1}
        )
    finally:
        rt.close()
