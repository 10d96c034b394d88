"""fs.sweep: a tidy table, deterministic, cached, resumable, checked up front."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.designs.reactor.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fanoutsim" / "examples" / "sweep.toml"
SW = importlib.import_module("fanoutsim.sweep")  # the module (fs.sweep is the function)
GRID = {"reactor_poll_interval": [0.5, 2.0], "reactor_poll_batch_limit": [2, 50]}
UNTIL = 60.0


def volatile_free(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"])


@pytest.fixture
def counted(monkeypatch):
    """Count the runs made in this process (workers=1)."""
    calls = []
    real = SW._run_one

    def run_one(run):
        calls.append((run.values, run.seed))
        return real(run)

    monkeypatch.setattr(SW, "_run_one", run_one)
    return calls


def test_tidy_shape_one_row_per_setting_and_seed():
    df = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=None, progress=False)
    assert list(df.columns[:3]) == ["reactor_poll_interval", "reactor_poll_batch_limit", "seed"]
    assert tuple(df.columns[3:]) == SW.RESULT_COLUMNS
    assert len(df) == 2 * 2 * 2
    expected = [(p, b, s) for p, b in itertools.product(*GRID.values()) for s in range(2)]
    assert (
        list(df[["reactor_poll_interval", "reactor_poll_batch_limit", "seed"]].itertuples(index=False, name=None))
        == expected
    )
    assert df["reactor_poll_batch_limit"].dtype == "int64"
    assert df["valid"].dtype == bool and df["valid"].all()
    assert (df["firings"] > 0).all() and (df["executions"] > 0).all()
    # 4 subscriptions, one query each per pass: 4 / P poll queries per virtual second
    for p, grp in df.groupby("reactor_poll_interval"):
        assert grp["polls_per_s"].to_numpy() == pytest.approx(4 / p, rel=0.05)
    # percentiles are ordered and the claim comes after the dispatch
    assert (df["fire_to_dispatch_p50_s"] <= df["fire_to_dispatch_p99_s"]).all()
    assert (df["fire_to_claim_p50_s"] >= df["fire_to_dispatch_p50_s"]).all()
    assert df.attrs == {"ran": 8, "from_cache": 0}


def test_empty_grid_runs_the_scenario_as_is():
    df = fs.sweep(load_scenario(SCENARIO), seeds=[3], until=UNTIL, cache=None, progress=False)
    assert list(df.columns[:1]) == ["seed"] and len(df) == 1 and df["seed"].iloc[0] == 3


def test_deterministic_across_calls_and_worker_counts():
    kw = dict(grid={"reactor_poll_interval": [0.5, 1.0]}, seeds=range(2), until=UNTIL, cache=None, progress=False)
    one = fs.sweep(SCENARIO, workers=1, **kw)
    again = fs.sweep(SCENARIO, workers=1, **kw)
    pooled = fs.sweep(SCENARIO, workers=2, **kw)
    pd.testing.assert_frame_equal(volatile_free(one), volatile_free(again))
    pd.testing.assert_frame_equal(volatile_free(one), volatile_free(pooled))
    assert one.loc[0, "firings"] != one.loc[1, "firings"]  # the seeds do differ


def test_a_cached_sweep_runs_nothing(tmp_path, counted):
    cache = tmp_path / "sweeps.duckdb"
    first = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False)
    assert len(counted) == 8 and first.attrs == {"ran": 8, "from_cache": 0}
    assert cache.exists()
    counted.clear()
    second = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False)
    assert counted == []
    assert second.attrs == {"ran": 0, "from_cache": 8}
    pd.testing.assert_frame_equal(first, second)  # wall_s too: the stored row comes back


def test_cache_key_is_the_content_not_the_path(tmp_path, counted):
    cache = tmp_path / "c.duckdb"
    copy = tmp_path / "renamed.toml"
    copy.write_text(SCENARIO.read_text().replace('name = "sweep"', 'name = "renamed"'))
    fs.sweep(SCENARIO, grid={"reactor_poll_interval": [1.0]}, until=UNTIL, cache=cache, progress=False)
    counted.clear()
    df = fs.sweep(copy, grid={"reactor_poll_interval": [1.0]}, until=UNTIL, cache=cache, progress=False)
    assert counted == [] and df.attrs["from_cache"] == 1
    # the same setting named by the grid or by the scenario's own config is one run
    df = fs.sweep(copy, until=UNTIL, cache=cache, progress=False)
    assert counted == [] and df.attrs["from_cache"] == 1
    # another until, another workload rate, another version: new runs
    fs.sweep(copy, until=UNTIL + 1, cache=cache, progress=False)
    fs.sweep(copy, grid={"rate": [3.0]}, until=UNTIL, cache=cache, progress=False)
    assert len(counted) == 2


def test_a_new_version_does_not_reuse_old_rows(tmp_path, counted, monkeypatch):
    cache = tmp_path / "c.duckdb"
    fs.sweep(SCENARIO, until=UNTIL, cache=cache, progress=False)
    monkeypatch.setattr(fs, "__version__", "999.0")
    df = fs.sweep(SCENARIO, until=UNTIL, cache=cache, progress=False)
    assert len(counted) == 2 and df.attrs["ran"] == 1


def test_resumes_after_a_partial_sweep(tmp_path, counted):
    cache = tmp_path / "c.duckdb"
    fs.sweep(
        SCENARIO,
        grid={"reactor_poll_interval": [0.5], "reactor_poll_batch_limit": [2, 50]},
        seeds=range(2),
        until=UNTIL,
        cache=cache,
        progress=False,
    )
    counted.clear()
    df = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False)
    assert df.attrs == {"ran": 4, "from_cache": 4}
    assert {v[0] for v, _ in counted} == {2.0}


def test_resumes_after_an_interrupted_sweep(tmp_path, monkeypatch):
    cache = tmp_path / "c.duckdb"
    real, calls = SW._run_one, []

    def interrupted(run):
        calls.append(run.index)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(run)

    monkeypatch.setattr(SW, "_run_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False)
    monkeypatch.setattr(SW, "_run_one", real)
    df = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False)
    assert df.attrs == {"ran": 5, "from_cache": 3}  # the three finished before the interrupt were kept
    fresh = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=None, progress=False)
    pd.testing.assert_frame_equal(volatile_free(df), volatile_free(fresh))


@pytest.mark.parametrize(
    "grid, message",
    [
        ({"poll_interval": [1.0]}, r"unknown key 'poll_interval'; allowed: rate, fetch_latency, reactor_poll_interval"),
        (
            {"reactor_poll_batch_limit": [10, 0]},
            r"grid\['reactor_poll_batch_limit'\] value 0 is not allowed: "
            r"(reactor_poll_batch_limit )?must be an integer >= 1",
        ),
        (
            {"prune_policy": ["ttl", "eager"]},
            r"grid\['prune_policy'\] value 'eager' is not allowed: (prune_policy )?"
            r"must be one of 'ttl', 'conservative'",
        ),
        ({"reactor_poll_interval": [1.0, -1.0]}, r"value -1.0 is not allowed: .*>= 1e-06 \(1 µs"),
        ({"rate": [0]}, r"grid\['rate'\] value 0 is not allowed: .*> 0"),
        ({"fetch_latency": [-0.1]}, r"grid\['fetch_latency'\] value -0.1 is not allowed: .*>= 0"),
        ({"reactor_poll_interval": 1.0}, r"grid\['reactor_poll_interval'\] must be a list of values"),
        ({"reactor_poll_interval": []}, r"grid\['reactor_poll_interval'\] is empty"),
    ],
)
def test_a_bad_grid_fails_before_any_run(grid, message, counted, tmp_path):
    cache = tmp_path / "c.duckdb"
    with pytest.raises(ValueError, match=message):
        fs.sweep(SCENARIO, grid=grid, until=UNTIL, cache=cache, progress=False)
    assert counted == [] and not cache.exists()


def test_other_bad_arguments(counted):
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        fs.sweep(SCENARIO, workers=0, cache=None, progress=False)
    with pytest.raises(ValueError, match="until must be"):
        fs.sweep(SCENARIO, until=-5, cache=None, progress=False)
    with pytest.raises(ValueError, match="seeds is empty"):
        fs.sweep(SCENARIO, seeds=[], cache=None, progress=False)
    with pytest.raises(TypeError, match="Scenario or the path"):
        fs.sweep(42, cache=None, progress=False)
    no_workload = dataclasses.replace(load_scenario(SCENARIO), workloads=())
    with pytest.raises(ValueError, match="no \\[\\[workload\\]\\] to scale"):
        fs.sweep(no_workload, grid={"rate": [1.0]}, cache=None, progress=False)
    recorded = dataclasses.replace(load_scenario(SCENARIO), replays=(object(),))
    with pytest.raises(ValueError, match="replays a recorded"):
        fs.sweep(recorded, grid={"rate": [1.0]}, cache=None, progress=False)
    assert counted == []


def test_rate_scales_every_workload_keeping_the_split():
    sc = load_scenario(SCENARIO)
    scaled = SW.scale_rate(sc, 8.0)
    assert sum(w.rate for w in scaled.workloads) == pytest.approx(8.0)
    for old, new in zip(sc.workloads, scaled.workloads):
        assert new.rate / old.rate == pytest.approx(4.0)
        assert (new.reactor, new.tenant) == (old.reactor, old.tenant)
    df = fs.sweep(sc, grid={"rate": [1.0, 8.0]}, seeds=range(2), until=120.0, cache=None, progress=False)
    for rate, grp in df.groupby("rate"):
        # Poisson: the count over 120 s is within 4 standard deviations of rate * 120
        mean = rate * 120.0
        assert abs(grp["firings"].mean() - mean) < 4 * (mean / 2) ** 0.5


def test_fetch_latency_adds_round_trips_to_the_dispatch():
    df = fs.sweep(SCENARIO, grid={"fetch_latency": [0.0, 0.2]}, until=UNTIL, cache=None, progress=False)
    gap = df.loc[1, "fire_to_dispatch_mean_s"] - df.loc[0, "fire_to_dispatch_mean_s"]
    # each batch is drained one round trip after its fetch; the passes keep their
    # grid (every P), so a subscription's fetches stay P apart and the rest of the
    # wait is the same as without a round trip
    assert gap == pytest.approx(0.2, abs=0.08)


def test_backlog_grows_past_the_knee():
    # acme fires 1.5/s; batch 1 every 2 s drains 0.5/s per subscription
    df = fs.sweep(
        SCENARIO,
        grid={"reactor_poll_interval": [2.0], "reactor_poll_batch_limit": [1, 100]},
        until=120.0,
        cache=None,
        progress=False,
    )
    slow, fast = df["backlog"]
    assert fast < 20
    assert slow > 100  # ~ (1.5 - 0.5) * 120 * 2 acme subscriptions, plus globex's share


# -- where the runs go: one path over an executor --------------------------------------
def test_the_in_caller_executor_runs_each_call_here_as_it_is_submitted():
    ex, seen = SW._InCaller(), []
    done = ex.submit(seen.append, 1)
    assert done.done() and seen == [1] and done.result() is None
    assert isinstance(ex.submit(int, "x").exception(), ValueError)  # a call's exception is its future's

    def ctrl_c():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # an interrupt stops the caller, as a plain loop would
        ex.submit(ctrl_c)


def test_one_worker_or_one_run_stays_here_and_more_go_to_a_pool():
    _, runs = SW.grid_runs(SCENARIO, GRID, range(1), UNTIL)
    here = SW._where(1, None, runs)
    assert isinstance(here.executor, SW._InCaller) and here.window == 1
    assert isinstance(SW._where(4, None, runs[:1]).executor, SW._InCaller)
    pool = SW._where(2, None, runs)
    try:
        assert isinstance(pool.executor, SW.ProcessPoolExecutor) and pool.executor._max_workers == 2
        assert pool.window == len(runs) and pool.wait
    finally:
        pool.executor.shutdown()


def test_runs_that_cannot_be_pickled_are_refused_before_any_leaves(monkeypatch, counted):
    keys, runs = SW.grid_runs(SCENARIO, GRID, range(1), UNTIL)
    unpicklable = [dataclasses.replace(r, scenario=lambda: None) for r in runs]
    monkeypatch.setattr(SW, "grid_runs", lambda *a, **k: (keys, unpicklable))
    with pytest.raises(
        ValueError,
        match=r"this sweep's runs cannot be sent to worker processes \(.+\); "
        r"use workers=1",
    ):
        fs.sweep(SCENARIO, grid=GRID, workers=2, cache=None, progress=False)
    assert counted == []
