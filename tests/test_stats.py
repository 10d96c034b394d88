"""The comparison statistics of :mod:`fanoutsim.kernel.stats`: exact intervals for a
count, checked against published values and against their definitions, and the
two-sample KS statistic."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fanoutsim.kernel.stats import (
    binomial_cdf,
    binomial_interval,
    keep_measurement,
    ks_2samp,
    ks_critical,
    percentiles,
    poisson_cdf,
    poisson_interval,
    rates_agree,
    sample_line,
    samples_json,
)


# -- published values ------------------------------------------------------------------
@pytest.mark.parametrize(
    "k,n,low,high",
    [
        (0, 10, 0.0, 0.308497),  # 1 - 0.025 ** (1 / 10)
        (5, 10, 0.187086, 0.812914),
        (10, 10, 0.691503, 1.0),
        (1, 100, 0.000253, 0.054459),
    ],
)
def test_clopper_pearson_matches_the_tables(k, n, low, high):
    assert binomial_interval(k, n) == pytest.approx((low, high), abs=2e-6)


@pytest.mark.parametrize(
    "k,low,high",
    [(0, 0.0, 3.688879), (1, 0.025318, 5.571643), (10, 4.795389, 18.390356), (100, 81.3640, 121.6268)],
)
def test_garwood_matches_the_tables(k, low, high):
    assert poisson_interval(k) == pytest.approx((low, high), abs=2e-4)


# -- the definitions ---------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), data=st.data(), confidence=st.sampled_from([0.9, 0.95, 0.99]))
def test_each_clopper_pearson_bound_puts_the_count_at_its_tail(n, data, confidence):
    k = data.draw(st.integers(0, n))
    low, high = binomial_interval(k, n, confidence)
    tail = (1 - confidence) / 2
    assert 0.0 <= low <= k / n <= high <= 1.0
    if k > 0:  # P(X >= k | low) is the tail
        assert 1 - binomial_cdf(k - 1, n, low) == pytest.approx(tail, abs=1e-9)
    if k < n:  # P(X <= k | high) is the tail
        assert binomial_cdf(k, n, high) == pytest.approx(tail, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(0, 1000), confidence=st.sampled_from([0.9, 0.95, 0.99]))
def test_each_garwood_bound_puts_the_count_at_its_tail(k, confidence):
    low, high = poisson_interval(k, confidence)
    tail = (1 - confidence) / 2
    assert low <= k <= high
    if k > 0:
        assert 1 - poisson_cdf(k - 1, low) == pytest.approx(tail, abs=1e-9)
    assert poisson_cdf(k, high) == pytest.approx(tail, abs=1e-9)


def test_the_cdfs_sum_the_laws():
    assert binomial_cdf(3, 10, 0.3) == pytest.approx(
        sum(math.comb(10, i) * 0.3**i * 0.7 ** (10 - i) for i in range(4)), rel=1e-12
    )
    assert poisson_cdf(4, 2.5) == pytest.approx(sum(math.exp(-2.5) * 2.5**i / math.factorial(i) for i in range(5)))
    assert (binomial_cdf(-1, 5, 0.5), binomial_cdf(5, 5, 0.5), binomial_cdf(2, 5, 0.0), binomial_cdf(2, 5, 1.0)) == (
        0.0,
        1.0,
        1.0,
        0.0,
    )
    assert (poisson_cdf(-1, 1.0), poisson_cdf(3, 0.0)) == (0.0, 1.0)


def test_the_interval_covers_the_truth_about_as_often_as_it_says():
    # 200 seeded counts out of 200 trials at p = 0.15: Clopper-Pearson is conservative, so >= 95%
    rng = random.Random(5)
    covered = 0
    for _ in range(200):
        low, high = binomial_interval(sum(rng.random() < 0.15 for _ in range(200)), 200)
        covered += low <= 0.15 <= high
    assert covered >= 0.93 * 200


# -- two rates ----------------------------------------------------------------------------
def test_two_rates_agree_when_one_law_made_both():
    same = rates_agree(54, 240, 540, 2400)
    assert same.agree and same.ratio_low < 1 < same.ratio_high
    assert same.rate1 == pytest.approx(0.225) and same.rate2 == pytest.approx(0.225)


def test_two_rates_a_half_apart_are_told_apart():
    # the numbers: duplicates 0.34 per message real against 0.49 modelled, 240 messages
    apart = rates_agree(82, 240, 1176, 2400)
    assert not apart.agree and apart.ratio_high < 1


def test_the_ratio_interval_reads_rates_not_trials():
    a, b = rates_agree(20, 100, 40, 200), rates_agree(20, 1000, 40, 2000)
    assert (a.ratio_low, a.ratio_high) == pytest.approx((b.ratio_low, b.ratio_high))
    assert rates_agree(40, 200, 20, 100).ratio_low == pytest.approx(1 / rates_agree(20, 100, 40, 200).ratio_high)
    assert rates_agree(0, 10, 0, 10).agree
    assert rates_agree(5, 10, 0, 10).ratio_high == math.inf


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: binomial_interval(11, 10), "k must be 0 through n"),
        (lambda: binomial_interval(-1, 10), "k must be a whole number >= 0"),
        (lambda: binomial_interval(1.5, 10), "k must be a whole number >= 0"),
        (lambda: poisson_interval(True), "k must be a whole number >= 0"),
        (lambda: binomial_interval(1, 10, confidence=1.0), "alpha must be in"),
        (lambda: rates_agree(1, 0, 1, 10), "n1 must be a number > 0"),
        (lambda: rates_agree(1, 10, 1, 10, alpha=0), "alpha must be in"),
    ],
)
def test_bad_counts_are_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# -- KS and percentiles ---------------------------------------------------------------------
def test_ks_is_the_largest_cdf_gap():
    assert ks_2samp([1, 2, 3], [1, 2, 3]) == 0.0
    assert ks_2samp([1, 2], [3, 4]) == 1.0
    assert ks_2samp([1, 2, 3, 4], [3, 4, 5, 6]) == pytest.approx(0.5)
    assert ks_2samp((x for x in [1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert ks_critical(100, 100) == pytest.approx(1.3581 * math.sqrt(2 / 100), rel=1e-4)
    with pytest.raises(ValueError, match="two non-empty samples"):
        ks_2samp([], [1.0])
    with pytest.raises(ValueError, match="at least one value"):
        ks_critical(0, 5)


def test_percentiles_interpolate():
    assert percentiles(range(101)) == {50: 50.0, 90: 90.0, 99: 99.0}
    with pytest.raises(ValueError, match="empty"):
        percentiles([])


def test_a_measurement_file_keeps_each_list_of_numbers_on_one_line():
    data = {"when": "now", "samples_s": [0.001, 2.5e-06, 3.0], "nested": {"n": [1, 2]}}
    text = samples_json(data)
    assert json.loads(text) == data
    assert '"samples_s": [0.001, 2.5e-06, 3.0]' in text and '"n": [1, 2]' in text and text.endswith("}\n")


def test_a_summary_line_gives_the_count_and_the_percentiles_in_ms():
    line = sample_line("lib 1.0", "cost_s", [0.001] * 10, width=8)
    assert line == "lib 1.0  cost_s   n=  10  p50   1.000 ms  p90   1.000 ms  p99   1.000 ms"


def test_a_measuring_command_prints_its_summary_and_writes_its_file_when_asked(tmp_path, capsys):
    keep_measurement({"a": [1.0, 2.0]}, "the summary", None)
    assert capsys.readouterr().out == "the summary\n" and not list(tmp_path.iterdir())
    keep_measurement({"a": [1.0, 2.0]}, "the summary", tmp_path / "m.json")
    assert capsys.readouterr().out == "the summary\nwrote m.json\n"
    assert (tmp_path / "m.json").read_text() == '{\n "a": [1.0, 2.0]\n}\n'
