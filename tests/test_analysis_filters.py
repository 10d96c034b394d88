"""fanoutsim.designs.reactor.analysis.filters and lesson 4's experiments
(notebooks/experiments/reactor.py): selectivity against dispatch and lag, error policies
over the recorded quotes day, subscribe-time verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from experiments.reactor import error_policy_table, filter_run, selectivity_sweep

import fanoutsim as fs
from fanoutsim.analysis import poll_lag, predicate_verdicts, quote_rates, subscriber_lag

DAY = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "quotes-day.parquet"
WINDOW = dict(start=15 * 3600.0, stop=15 * 3600.0 + 1200.0, speed=10.0)


@pytest.fixture(scope="module")
def day():
    return fs.load_recording(DAY)


def test_quote_rates_bin_the_recording(day):
    rates = quote_rates(day, 3600)
    assert list(rates.columns) == ["ap-south", "eu-central", "us-east", "us-west"]
    assert len(rates) == 24 and rates.index[1] == 1.0
    assert (rates.sum(axis=1) * 3600).sum() == pytest.approx(len(day))
    with pytest.raises(ValueError, match="bin_s must be > 0"):
        quote_rates(day, 0)


@pytest.fixture(scope="module")
def sweep(day):
    filters = {
        "none": "payload.quote.price > 1000",
        "HOOLI": "payload.quote.symbol == 'HOOLI'",
        "us-east": "payload.quote.region == 'us-east'",
        "all": None,
    }
    return selectivity_sweep(day, filters, batch_limit=8, workers=2, duration=0.25, **WINDOW)


def test_selectivity_scales_dispatch_and_executor_lag_but_not_the_poll(sweep):
    assert list(sweep["filter"]) == ["none", "HOOLI", "us-east", "all"]  # sorted by selectivity
    assert sweep["firings"].nunique() == 1 and sweep["selectivity"].iloc[-1] == 1.0
    assert sweep["selectivity"].iloc[0] == 0.0 and sweep["dispatched"].iloc[0] == 0
    assert sweep["dispatch_per_s"].is_monotonic_increasing
    assert sweep["poll_lag_p95_s"].nunique() == 1  # the poller reads every firing whatever passes
    claims = sweep["claim_p95_s"].dropna()
    assert claims.is_monotonic_increasing and claims.iloc[-1] > 3 * claims.iloc[0]


def test_poll_lag_is_visible_to_passed_for_every_firing(day):
    sim = filter_run(day, "payload.quote.region == 'us-east'", batch_limit=100, **WINDOW)
    lag = poll_lag(sim)
    assert len(lag) == (sim.firings()["tenant_id"] == "acme").sum() and lag.notna().all()
    assert lag.between(0, 1.0).all()  # a poll a second, nothing held back
    one = subscriber_lag(sim)
    assert one["unpassed"] == 0 and 0 < one["selectivity"] < 1


def test_error_policies_skip_hold_and_dead_letter(day):
    df = error_policy_table(
        day,
        {"price": "payload.quote.price > 100", "typo": "payload.quote.prcie > 100"},
        start=18 * 3600.0,
        stop=18 * 3600.0 + 1200.0,
        speed=10.0,
    ).set_index(["filter", "policy"])
    skip, hold = df.loc[("price", "skip")], df.loc[("price", "hold")]
    assert skip["predicate_errors"] > 0 and skip["dead_letters"] == 0  # halted quotes: null price
    assert hold["dead_letters"] == skip["predicate_errors"]  # each held, then dead-lettered
    assert hold["predicate_errors"] == 5 * hold["dead_letters"]  # predicate_error_limit polls each
    assert hold["dispatched"] == skip["dispatched"] and hold["poll_lag_max_s"] > skip["poll_lag_max_s"]
    typo_skip, typo_hold = df.loc[("typo", "skip")], df.loc[("typo", "hold")]
    assert typo_skip["dispatched"] == 0 and typo_skip["predicate_errors"] == typo_skip["firings"]  # fail-closed
    assert typo_hold["degraded"] and typo_hold["unpassed"] > 0  # crawls: 5 polls a firing
    assert "no such member in mapping: 'prcie'" in typo_hold["last_error"]


def test_subscribe_time_verdicts_quote_invalid_predicate():
    df = predicate_verdicts(
        [
            "payload.quote.price > 100",
            "paylod.quote.price > 100",
            "payload.quote.price >> 100",
            "payload.quote.prcie > 100",
        ]
    )
    assert list(df["accepted"]) == [True, False, False, True]
    assert "unknown variable(s) 'paylod'; allowed variables: payload, reactor, tenant" in df["message"][1]
    assert "is not valid CEL" in df["message"][2]
    with pytest.raises(fs.InvalidPredicate):
        fs.Simulation().runner.subscribe_workflow_to_reactor("r", "wf", when="paylod.x > 1")


@pytest.mark.parametrize("pruned", [False, True], ids=["retained", "pruned"])
def test_a_filter_error_is_told_in_plain_words_even_once_its_firing_is_pruned(pruned):
    """The report's predicate error reads what the filter read: from the firings
    table while the firing is kept, from the trace's firing history once a prune
    deleted it (the run's report comes at its end, after the last prune)."""
    from fanoutsim.designs.reactor.analysis.delivery import predicate_error_examples

    cfg = fs.SchedulerConfig(prune_policy="ttl", reactor_firings_retention=10.0, reactor_firings_prune_interval=5.0)
    sim = fs.Simulation(config=cfg, seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf", when="payload.quote.price > 100")
    fid = sim.fire("r", {"quote": {"price": None}})
    sim.run(until=60.0 if pruned else 2.0)
    firings = sim.firings()
    assert (fid in set(firings["id"])) is not pruned
    [example] = predicate_error_examples(sim, sim.subscriptions(), firings)
    assert example["firing"] == fid
    assert example["error"] == "payload.quote.price is null; '>' needs a number"
