"""fs.sweep over the outbox and leases designs: their keys, their columns, their errors."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim import designs

ROOT = Path(__file__).resolve().parents[1]
OUTBOX = ROOT / "fanoutsim" / "examples" / "outbox.toml"
LEASES = ROOT / "fanoutsim" / "examples" / "leases.toml"
SW = importlib.import_module("fanoutsim.sweep")


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


def test_outbox_a_longer_safety_poll_costs_latency_when_hints_are_dropped():
    # every hint dropped (a dotted path into [[faults]]): rows wait for the safety poll
    df = fs.sweep(
        OUTBOX,
        grid={"safety_poll_interval": [1.0, 10.0], "faults.0.drop": [1.0]},
        until=120.0,
        cache=None,
        progress=False,
    )
    per_consumer = [
        f"commit_to_handled_{s}_s[{c}]" for c in ("analytics", "indexer", "search", "triage") for s in ("p50", "p99")
    ]
    assert list(df.columns) == [
        "safety_poll_interval",
        "faults.0.drop",
        "seed",
        *designs.get("outbox").sweep_columns,
        *per_consumer,
        "wall_s",
    ]
    assert list(df.columns[3:8]) == [
        "commit_to_handled_p50_s",
        "commit_to_handled_p99_s",
        "commit_to_handled_mean_s",
        "commit_to_handled_max_s",
        "hinted_share",
    ]
    short, long = df.iloc[0], df.iloc[1]
    # a dropped hint waits for the next poll: about half an interval on average
    assert short["commit_to_handled_mean_s"] < 1.0
    assert long["commit_to_handled_mean_s"] > 3.0
    assert long["commit_to_handled_p99_s"] > short["commit_to_handled_p99_s"] + 5.0
    # no hint arrived, so the worst row waited (almost) a whole interval (plus any queue behind it)
    assert (df["hinted_share"] == 0.0).all()
    assert long["commit_to_handled_max_s"] > 0.8 * 10.0
    assert (df["commit_to_handled_max_s"] >= df["commit_to_handled_p99_s"]).all()
    assert (df["committed"] > 400).all() and (df["lost"] == 0).all() and df["valid"].all()
    assert df["lost"].dtype == "int64" and df["valid"].dtype == bool
    # with hints delivered, the poll hardly matters: the drop is what made the difference
    hinted = fs.sweep(
        OUTBOX, grid={"safety_poll_interval": [10.0], "faults.0.drop": [0.0]}, until=120.0, cache=None, progress=False
    )
    assert hinted.loc[0, "commit_to_handled_mean_s"] < 1.0


def test_outbox_max_and_hinted_share_are_the_analysis_figures_of_the_same_run():
    from experiments import outbox as ox  # notebooks/experiments: lesson 8's experiments

    from fanoutsim.analysis import outbox as oa

    df = fs.sweep(
        ox.latency_scenario(minutes=5.0, max_poll=3.0),
        grid={"safety_poll_interval": [3.0], "faults.0.drop": [0.0, 0.4, 1.0]},
        seeds=[0, 7],
        cache=None,
        progress=False,
    )
    for _, row in df.iterrows():
        sim = ox.latency_run(row["faults.0.drop"], 3.0, minutes=5.0, seed=int(row["seed"]))
        lat = oa.latency_frame(sim)
        assert row["commit_to_handled_max_s"] == lat["latency_s"].max()
        assert row["hinted_share"] == lat["hinted"].mean()
        assert row["commit_to_handled_p99_s"] == pytest.approx(lat["latency_s"].quantile(0.99), abs=1e-12)
    assert (df.loc[df["faults.0.drop"] == 0.0, "hinted_share"] == 1.0).all() and (
        df.loc[df["faults.0.drop"] == 1.0, "hinted_share"] == 0
    ).all()
    partial = df.loc[df["faults.0.drop"] == 0.4, "hinted_share"]
    assert ((partial > 0.3) & (partial < 0.9)).all()
    # latency_table gives latency_sweep's summary, row for row
    summary, _ = ox.latency_sweep(drops=(0.0, 0.4, 1.0), polls=(3.0,), minutes=5.0)
    table = oa.latency_table(df[df["seed"] == 0].reset_index(drop=True))
    pd.testing.assert_frame_equal(table[summary.columns], summary, check_dtype=False)


def test_outbox_latency_table_names_what_is_missing():
    from experiments import outbox as ox  # notebooks/experiments: lesson 8's experiments

    from fanoutsim.analysis import outbox as oa

    with pytest.raises(KeyError, match="faults.0.drop"):
        oa.latency_table(pd.DataFrame({"safety_poll_interval": [1.0]}))
    with pytest.raises(ValueError, match="minutes must be a number > 0, got 0"):
        ox.latency_scenario(minutes=0)


def test_leases_a_shorter_lease_makes_duplicates_when_work_outlasts_it():
    # the enricher's work, exponential with a 4 s mean (a dotted path into its inline duration table),
    # often outlasts a 5 s lease and hardly ever a 60 s one
    grid = {"consumers.enricher.lease_seconds": [5.0, 60.0], "consumers.enricher.duration.mean": [4.0]}
    df = fs.sweep(LEASES, grid=grid, until=300.0, cache=None, progress=False)
    fixed = len(grid) + 1 + len(designs.get("leases").sweep_columns)
    assert list(df.columns[:fixed]) == [*grid, "seed", *designs.get("leases").sweep_columns]
    assert df.columns[-1] == "wall_s" and "publish_to_ack_p99_s[enricher]" in df.columns[fixed:-1]
    assert {
        "publish_to_ack_p50_s",
        "publish_to_ack_p99_s",
        "publish_to_ack_mean_s",
        "duplicates",
        "lost",
        "valid",
    } <= set(df.columns)
    short, long = df.iloc[0], df.iloc[1]
    assert short["duplicates"] > 20
    assert long["duplicates"] < short["duplicates"] / 10
    assert (df["published"] > 400).all() and df["valid"].all()


def test_rate_scales_every_outbox_workload():
    df = fs.sweep(OUTBOX, grid={"rate": [1.0, 8.0]}, until=100.0, cache=None, progress=False)
    low, high = df["committed"]
    assert abs(low - 100) < 40 and abs(high - 800) < 120  # Poisson counts around rate x until
    assert fs.sweep.__module__ == "fanoutsim.sweep"
    sc = fs.load_scenario(LEASES)
    scaled = SW.scale_rate(sc, 6.0)
    assert sum(w.rate for w in scaled.workloads) == pytest.approx(6.0)
    assert scaled.consumers == sc.consumers


def test_the_cache_keys_the_design_and_the_effective_scenario(tmp_path, counted):
    cache = tmp_path / "c.duckdb"
    grid = {"consumers.indexer.lease_seconds": [10.0]}
    first = fs.sweep(LEASES, grid=grid, until=60.0, cache=cache, progress=False)
    assert len(counted) == 1 and first.attrs == {"ran": 1, "from_cache": 0}
    again = fs.sweep(LEASES, grid=grid, until=60.0, cache=cache, progress=False)
    assert len(counted) == 1 and again.attrs == {"ran": 0, "from_cache": 1}
    pd.testing.assert_frame_equal(first, again)
    # the same value named by the grid or written in the file is one run
    copy = tmp_path / "leases-10.toml"
    copy.write_text(
        LEASES.read_text().replace(
            'name = "indexer"\nduration = { dist = "exponential", mean = 0.02 }\nlease_seconds = 5.0',
            'name = "indexer"\nduration = { dist = "exponential", mean = 0.02 }\nlease_seconds = 10.0',
        )
    )
    assert fs.load_scenario(copy).consumers[0].lease_seconds == 10.0
    df = fs.sweep(copy, until=60.0, cache=cache, progress=False)
    assert len(counted) == 1 and df.attrs["from_cache"] == 1
    # another value, another design in the same file: new runs, their own columns
    fs.sweep(LEASES, grid={"consumers.indexer.lease_seconds": [20.0]}, until=60.0, cache=cache, progress=False)
    out = fs.sweep(OUTBOX, until=30.0, cache=cache, progress=False)
    assert len(counted) == 3 and "commit_to_handled_mean_s" in out.columns


def test_pooled_runs_equal_in_process_runs():
    kw = dict(grid={"safety_poll_interval": [1.0, 5.0]}, seeds=range(2), until=60.0, cache=None, progress=False)
    one = fs.sweep(OUTBOX, workers=1, **kw).drop(columns="wall_s")
    pooled = fs.sweep(OUTBOX, workers=2, **kw).drop(columns="wall_s")
    pd.testing.assert_frame_equal(one, pooled)


@pytest.mark.parametrize(
    "scenario, grid, message",
    [
        (
            OUTBOX,
            {"safety_poll": [1.0]},
            r"grid: unknown key 'safety_poll'; allowed: rate, safety_poll_interval, batch_limit.*or a dotted path.*"
            r"'outbox', 'consumers', 'workload', 'faults'",
        ),
        (
            OUTBOX,
            {"safety_poll_interval": [1.0, -2.0]},
            r"grid\['safety_poll_interval'\] value -2.0 is not allowed: "
            r"(safety_poll_interval )?must be .*>= 1e-06 \(1 µs",
        ),
        (
            OUTBOX,
            {"faults.3.drop": [0.5]},
            r"grid: unknown key 'faults.3.drop': faults has no item '3'; "
            r"it has indexes 0..0",
        ),
        (OUTBOX, {"faults.0.drop": [1.5]}, r"grid\['faults.0.drop'\] value 1.5 is not allowed"),
        (
            OUTBOX,
            {"outbox.batch_limit": [0]},
            r"grid\['outbox.batch_limit'\] value 0 is not allowed: (batch_limit )?must be an int >= 1",
        ),
        (OUTBOX, {"rate": [0]}, r"grid\['rate'\] value 0 is not allowed: .*> 0"),
        (
            LEASES,
            {"consumers.nobody.lease_seconds": [5.0]},
            r"grid: unknown key 'consumers.nobody.lease_seconds': consumers has no item 'nobody'; it has indexes 0..3, "
            r"or by name: 'indexer', 'enricher', 'archiver', 'audit'",
        ),
        (
            LEASES,
            {"consumers.enricher.lease_seconds": [1.0]},
            r"grid\['consumers.enricher.lease_seconds'\] value 1.0 is not allowed: must be 5 through 900 seconds",
        ),
        (
            LEASES,
            {"consumers.enricher.lease_secondz": [10.0]},
            r"grid\['consumers.enricher.lease_secondz'\] value 10.0 is not allowed: .*lease_seconds",
        ),
        (
            LEASES,
            {"leases.nope.x": [1]},
            r"grid: unknown key 'leases.nope.x': leases has no 'nope'; it has: "
            r"'retention', 'retention_interval', 'recovery_interval'",
        ),
        (LEASES, {"run.until.x": [1]}, r"grid: unknown key 'run.until.x': run.until is a float, not a table"),
        (LEASES, {"recovery_interval": [0]}, r"grid\['recovery_interval'\] value 0 is not allowed"),
    ],
)
def test_a_bad_grid_fails_before_any_run(scenario, grid, message, counted, tmp_path):
    cache = tmp_path / "c.duckdb"
    with pytest.raises(ValueError, match=message):
        fs.sweep(scenario, grid=grid, until=10.0, cache=cache, progress=False)
    assert counted == [] and not cache.exists()


def test_dotted_paths_need_the_file_and_config_fields_work_on_an_object(counted):
    sc = fs.load_scenario(LEASES)
    with pytest.raises(
        ValueError,
        match=r"the dotted path 'consumers.enricher.lease_seconds' needs the "
        r"scenario's TOML",
    ):
        fs.sweep(sc, grid={"consumers.enricher.lease_seconds": [5.0]}, cache=None, progress=False)
    with pytest.raises(ValueError, match=r"grid\['retention'\] value -1 is not allowed"):
        fs.sweep(sc, grid={"retention": [-1]}, cache=None, progress=False)
    assert counted == []
    df = fs.sweep(sc, grid={"retention_interval": [10.0]}, until=20.0, cache=None, progress=False)
    assert df.loc[0, "retention_interval"] == 10.0 and counted != []
