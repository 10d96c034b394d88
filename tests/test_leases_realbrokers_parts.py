"""The parts of issue 39's comparison that need no broker: what a run's record reads,
the checks on records made by hand, the model's side of each case, the handler-time
draws the consumer processes and the model share, the measuring command's file, and
how a missing broker is told. The real runs: ``test_leases_realbrokers.py``."""

from __future__ import annotations

import json
import math
import random
import statistics

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rbtools import unavailable

from fanoutsim.designs.leases.presets import Measured
from fanoutsim.designs.leases.realbrokers import compare, costs, harness, model, results
from fanoutsim.designs.leases.realbrokers.cases import CASES, CostCase, FloorCase, KillCase, PoisonCase, Run
from fanoutsim.designs.leases.realbrokers.client_process import work_seconds
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.designs.leases.realbrokers.servers import BrokerUnavailable, check_broker

COSTS = Measured.of([0.001, 0.0012], [0.0005, 0.0007])


def record(events: list[list], published: list[list] | None = None, **kw) -> BrokerRun:
    """A record made by hand: events ``[kind, consumer, process, n, deliveries, t, t_done]``."""
    return BrokerRun("nats-jetstream", "2.15.1", "hand", {}, published=published or [], events=events, **kw)


# -- the handler times: one draw for both sides --------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 10**4), delivery=st.integers(1, 10))
def test_a_handler_time_is_the_same_on_every_rerun_and_differs_by_delivery(seed, n, delivery):
    work = {"law": "lognormal", "median": 0.8, "sigma": 0.5}
    once = work_seconds(work, seed, "c1", n, delivery)
    assert once == work_seconds(work, seed, "c1", n, delivery) > 0
    assert once != work_seconds(work, seed, "c1", n, delivery + 1)
    assert work_seconds({"law": "fixed", "seconds": 0.25}, seed, "c1", n, delivery) == 0.25


def test_the_handler_laws_have_their_medians_and_means():
    lognormal = [work_seconds({"law": "lognormal", "median": 0.8, "sigma": 0.5}, 0, "c", n, 1) for n in range(4000)]
    exponential = [work_seconds({"law": "exponential", "mean": 0.15}, 0, "c", n, 1) for n in range(4000)]
    assert statistics.median(lognormal) == pytest.approx(0.8, rel=0.05)
    assert statistics.fmean(exponential) == pytest.approx(0.15, rel=0.05)
    # a third of lognormal(0.8, 0.5) handlers overrun a 1 s lease: the case
    assert np.mean(np.asarray(lognormal) > 1.0) == pytest.approx(1 - 0.6723, abs=0.03)
    with pytest.raises(ValueError, match="work law must be fixed, lognormal or exponential"):
        work_seconds({"law": "weibull"}, 0, "c", 1, 1)


def test_the_model_draws_from_the_same_laws():
    rng = random.Random(1)
    for work in ({"law": "lognormal", "median": 0.8, "sigma": 0.5}, {"law": "exponential", "mean": 0.15}):
        draws = [model.law(work)(rng) for _ in range(4000)]
        real = [work_seconds(work, 0, "c", n, 1) for n in range(4000)]
        assert abs(statistics.median(draws) - statistics.median(real)) < 0.05 * statistics.median(real)
    assert model.law({"law": "fixed", "seconds": 0.3})(rng) == 0.3


# -- what a record reads ------------------------------------------------------------------------
def test_a_record_counts_duplicates_latencies_and_redeliveries():
    run = record(
        [
            ["delivered", "c", "w", 1, 1, 0.1, None],
            ["effect", "c", "w", 1, 1, 0.5, None],
            ["delivered", "c", "w", 1, 2, 1.1, None],  # its lease ran out: delivered again
            ["effect", "c", "w", 1, 2, 1.3, None],
            ["acked", "c", "w", 1, 2, 1.3, 1.31],
            ["delivered", "c", "w", 2, 1, 0.2, None],
            ["effect", "c", "w", 2, 1, 0.4, None],
            ["acked", "c", "w", 2, 1, 0.4, 0.41],
        ],
        published=[[1, 0.0, False], [2, 0.15, False]],
    )
    assert run.duplicates() == 1 and run.handled() == 2
    assert run.handled_latencies().tolist() == pytest.approx([0.5, 0.25])
    assert run.redelivery_delays().tolist() == pytest.approx([1.0])
    assert run.deliveries("c", 1) == [(1, 0.1), (2, 1.1)]
    assert run.most_in_flight("c") == 2
    assert BrokerRun.from_dict(json.loads(json.dumps(run.as_dict()))) == run


def test_a_record_reads_what_the_event_loop_added_to_each_handler():
    work = {"law": "fixed", "seconds": 0.2}
    run = record([["delivered", "c", "w", 1, 1, 1.0, None], ["effect", "c", "w", 1, 1, 1.203, None]])
    assert run.handler_lateness(work, 0).tolist() == pytest.approx([0.003])
    assert harness.lateness(type("Case", (), {"work": lambda self: work, "seed": 0})(), run).samples == (
        pytest.approx(0.003),
    )


# -- the kill check -------------------------------------------------------------------------------
def _kill(extra: list[list]) -> BrokerRun:
    taken = [["delivered", "c", "victim", n, 1, 0.0, None] for n in (1, 2, 3)]
    done = [["effect", "c", "victim", 1, 1, 0.1, None], ["acked", "c", "victim", 1, 1, 0.1, 0.11]]
    held = [["effect", "c", "victim", 2, 1, 0.2, None], ["held", "c", "victim", 2, 1, 0.2, None]]
    return record(taken + done + held + extra)


def test_a_kill_is_right_when_the_in_flight_come_back_and_the_applied_ones_twice():
    good = _kill(
        [
            ["delivered", "c", "rescuer", 2, 2, 1.0, None],
            ["effect", "c", "rescuer", 2, 2, 1.1, None],
            ["delivered", "c", "rescuer", 3, 2, 1.0, None],
            ["effect", "c", "rescuer", 3, 2, 1.1, None],
        ]
    )
    o = compare.kill_outcome(good, "c")
    assert o["in_flight"] == {2, 3} and o["twice"] == {2} and o["lost"] == 0 and compare.kill_ok(o)
    assert compare.freeze_to_redelivery(good).tolist() == pytest.approx([0.8])


@pytest.mark.parametrize(
    "extra,why",
    [
        ([["delivered", "c", "rescuer", 2, 2, 1.0, None], ["effect", "c", "rescuer", 2, 2, 1.1, None]], "3 lost"),
        (
            [
                ["delivered", "c", "rescuer", 3, 2, 1.0, None],
                ["effect", "c", "rescuer", 3, 2, 1.1, None],
                ["effect", "c", "other", 1, 1, 1.2, None],
            ],
            "2 (applied) never redelivered, 1 (acked) applied again",
        ),
    ],
)
def test_a_kill_is_wrong_when_something_is_lost_or_comes_back_acked(extra, why):
    assert not compare.kill_ok(compare.kill_outcome(_kill(extra), "c")), why


# -- the model's side of each case --------------------------------------------------------------------
def test_the_jetstream_model_redelivers_a_nakd_poison_message_by_the_backoff_rule():
    run = model.model_run(PoisonCase(), "nats-jetstream", measured=COSTS).record()
    times, limit = compare.poison_schedule(run, PoisonCase())
    # a nak of 0.3 s after delivery n waits 0.3 + backoff[n-1] - backoff[0] (nats-server 2.15.1)
    assert np.diff(times) == pytest.approx([0.3, 0.5, 0.7], abs=0.01)
    assert limit == [(4, pytest.approx(0.7, abs=0.01))]


def test_the_redis_model_claims_an_idle_poison_message_and_dead_letters_it():
    run = model.model_run(PoisonCase(), "redis-streams", measured=COSTS).record()
    times, limit = compare.poison_schedule(run, PoisonCase())
    assert np.diff(times) == pytest.approx([0.3, 0.3, 0.3], abs=0.01)
    assert limit == [(4, pytest.approx(0.3, abs=0.01))]


def test_the_model_of_a_kill_redelivers_after_the_lease_and_applies_the_held_effect_twice():
    case = KillCase()
    brokers = ("nats-jetstream", "redis-streams")
    runs = [model.model_run(case, b, seed=s, measured=COSTS).record() for b in brokers for s in range(3)]
    for run in runs:
        o = compare.kill_outcome(run, "c")
        assert compare.kill_ok(o) and len(o["twice"]) >= 1
        assert run.redelivery_delays() == pytest.approx([case.lease] * len(o["redelivered"]))


@pytest.mark.parametrize("broker", ["nats-jetstream", "redis-streams"])
def test_the_model_floor_after_out_of_order_acks(broker):
    case = FloorCase()
    assert case.order() == [2, 6, 7, 8, 3, 4, 1, 5]
    assert model.model_floors(case, broker) == [0, 0, 0, 0, 0, 0, 0, 4, 8]


def test_the_model_interest_stream_passes_the_acked_messages_it_removed_as_jetstreams_floor_does():
    # nats-server 2.15.1 on an interest stream: the floor as on a limits stream, though
    # every acked message is gone from the stream
    interest = CASES["floor_interest"]
    assert model.model_floors(interest, "nats-jetstream") == [0, 0, 0, 0, 0, 0, 0, 4, 8]


def test_a_model_runs_rules_override_the_preset():
    cfg = model.case_config(CASES["lease"], "nats-jetstream", COSTS, late_ack="refuse")
    assert cfg.late_ack == "refuse" and cfg.retention_policy == "limits" and cfg.deliver_cost is not None
    assert model.case_config(PoisonCase(), "redis-streams", None).at_max_deliver == "dead_letter"
    assert model.case_config(PoisonCase(), "nats-jetstream", None).backoff == (0.2, 0.4, 0.6)


@pytest.mark.parametrize(
    "detail,attempt", [("attempt 3", 3), ("attempt 2: poison", 2), ("4 deliveries: max deliveries", 4), (None, 0)]
)
def test_a_trace_rows_delivery_count_is_read_from_its_detail(detail, attempt):
    assert model._attempt(detail) == attempt


# -- the checks that compare -------------------------------------------------------------------------
def test_a_rate_check_tells_a_half_again_apart():
    case = CASES["lease"]
    real = record([["effect", "c", "w", n, 1, 0.0, None] for n in range(1, 241)])
    real.events += [["effect", "c", "w", n, 2, 1.0, None] for n in range(1, 81)]  # 80 duplicates
    same = record(list(real.events))
    more = record(list(real.events) + [["effect", "c", "w", n, 3, 2.0, None] for n in range(1, 41)])
    assert compare.compare_lease(case, real, [same] * 4)[0].agrees
    assert not compare.compare_lease(case, real, [more] * 4)[0].agrees


def test_every_case_has_its_checks_named():
    assert set(compare.KEYS) == set(CASES) - {"costs"}
    row = compare.Check("kill", "delay", "what", "1", "2", "test", False).row()
    assert row == "| kill | what | 1 | 2 | test | NO |"


# -- the measuring command's file -----------------------------------------------------------------
def test_the_costs_file_keeps_one_list_of_samples_per_line_and_reads_back():
    samples = {"publish_to_delivered_s": [0.001, 0.002], "ack_round_trip_s": [1e-06]}
    data = {"measured": "now", "brokers": {"b": samples}}
    text = costs.dumps(data)
    assert json.loads(text) == data and '"publish_to_delivered_s": [0.001, 0.002]' in text


def test_a_cost_run_reads_publish_to_delivered_and_the_ack_round_trip():
    run = record(
        [
            ["delivered", "c", "w", 1, 1, 0.0012, None],
            ["effect", "c", "w", 1, 1, 0.0013, None],
            ["acked", "c", "w", 1, 1, 0.0013, 0.0018],
        ],
        published=[[1, 0.0, False]],
    )
    got = CostCase.costs(run)
    assert got["publish_to_delivered_s"] == pytest.approx([0.0012])
    assert got["ack_round_trip_s"] == pytest.approx([0.0005])
    entry = costs.entry(run)
    assert entry["version"] == "2.15.1" and entry["client"].startswith("nats-py ") and entry["messages"] == 1
    m = harness.session_costs(run)
    assert m.deliver_cost.samples == (pytest.approx(0.0012),)
    data = {"measured": "t", "machine": {"cpus": 2}, "brokers": {"nats-jetstream": entry}}
    assert "publish_to_delivered_s n=   1  p50   1.200 ms" in costs.summary(data)


def test_the_measuring_command_refuses_a_bad_count():
    with pytest.raises(SystemExit):
        costs.main(["--messages", "0"])


# -- a broker that is missing --------------------------------------------------------------------------
def test_an_unknown_broker_is_refused_by_name():
    with pytest.raises(ValueError, match="broker must be one of 'nats-jetstream', 'redis-streams', got 'kafka'"):
        check_broker("kafka")


def test_a_missing_client_names_the_extra(monkeypatch):
    import importlib

    real_import = importlib.import_module

    def no_nats(name, *args):
        if name == "nats":
            raise ImportError("no module named nats", name="nats")
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_nats)
    with pytest.raises(BrokerUnavailable, match=r"nats is not installed .*pip install 'fanoutsim\[realbrokers\]'"):
        check_broker("nats-jetstream")


def test_a_broker_that_cannot_start_fails_in_ci_and_is_skipped_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot start in CI: it broke"):
        unavailable("it broke")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="real broker unavailable: it broke"):
        unavailable("it broke")


def test_a_redis_job_claims_with_the_consumers_lease_and_its_dead_letter_stream():
    class Admin:
        broker, version, endpoint = "redis-streams", "6.2.14", "redis.sock"

        def create(self, stream, consumers, retention="limits"):
            self.made = (stream, [c.name for c in consumers], retention)

    a = Admin()
    run = Run(a, PoisonCase(), [harness_spec("c", 0.3, 4)])
    job = run.job(["c"], "worker", slots=8, work={"law": "fixed", "seconds": 0.0})
    assert job["claim"] == {"idle": 0.3, "max_deliver": 4, "dead": {"c": f"{run.stream}:c:dead"}}
    assert job["batch"] == 8 and job["consumers"] == ["c"] and a.made[2] == "limits"
    assert math.isclose(job["wait"], 1.0)


def harness_spec(name: str, lease: float, max_deliver: int):
    from fanoutsim.designs.leases.realbrokers.brokers import ConsumerSpec

    return ConsumerSpec(name, lease, 16, max_deliver)


# -- lesson 14's results ------------------------------------------------------------------------------
def test_an_advisorys_stamp_is_the_servers_clock():
    from fanoutsim.designs.leases.realbrokers.brokers import server_time

    assert server_time("2026-12-06T11:36:41.25124231Z") == pytest.approx(1796557001.2512423, abs=1e-6)
    assert server_time("2026-12-06T11:36:41Z") == pytest.approx(1796557001.0)


def test_the_model_chooses_the_smallest_ackwait_under_the_target():
    rates = results.duplicate_rates((1.0, 2.0, 3.0), rules=("honour",), messages=120, measured=COSTS)
    assert list(rates["ack_wait"]) == [1.0, 2.0, 3.0]
    assert rates["per_message"].is_monotonic_decreasing and rates["per_message"].iloc[0] > 0.2
    assert results.choose_ack_wait(rates, target=0.25) == 2.0
    with pytest.raises(ValueError, match="no AckWait of \\[1.0, 2.0, 3.0\\] keeps duplicates at or under 0"):
        results.choose_ack_wait(rates, target=0.0)


def test_the_results_file_holds_what_the_lesson_reads():
    data = results.load()
    assert data["command"] == results.COMMAND and set(data["versions"]) == set(results.BROKERS)
    points = results.real_points(data)
    assert list(points["ack_wait"]) == [1.0, data["ack_wait"]["chosen"]]
    assert (points["low"] <= points["per_message"]).all() and (points["per_message"] <= points["high"]).all()
    assert data["ack_wait"]["confirmed"]["agrees"]
    for broker in results.BROKERS:
        kill = data["kill"][broker]
        assert kill["kills"] == len(kill["freeze_to_redelivery_s"]) and kill["lost"] == 0
        rows = [compare.Check(**row) for row in data["tables"][broker]]
        assert {(c.case, c.key) for c in rows} == {(case, key) for case, keys in compare.KEYS.items() for key in keys}


def test_what_a_kill_costs_reads_real_and_model_alike():
    data = results.load()
    costs_of_kills = results.kill_costs(data, seeds=3, measured={b: COSTS for b in results.BROKERS})
    assert list(costs_of_kills["side"]) == ["real", "model"] * 2
    model_rows = costs_of_kills[costs_of_kills["side"] == "model"]
    assert list(model_rows["waited_p50_s"]) == pytest.approx([1.0, 1.0]) and (model_rows["lost"] == 0).all()


def test_the_ackwait_figure_draws_the_curves_the_points_and_the_target():
    rates = results.duplicate_rates((1.0, 2.0), messages=60, measured=COSTS)
    real = pd.DataFrame(
        [{"ack_wait": 1.0, "messages": 60, "duplicates": 20, "per_message": 1 / 3, "low": 0.2, "high": 0.5}]
    )
    fig = results.ack_wait_figure(rates, real, target=0.5)
    ax = fig.axes[0]
    assert len(ax.lines) >= 4 and ax.get_yscale() == "log"
    assert "the model's choice" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_a_server_started_before_its_block_is_started_once_and_stopped_at_its_end():
    from fanoutsim.designs.leases.realbrokers.servers import RedisServer

    s = RedisServer()
    s.start()
    first = s.process
    with s as same:
        assert same is s and s.process is first and first.poll() is None
    assert first.poll() is not None and not s.folder.exists()
