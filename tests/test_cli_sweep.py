"""fanoutsim sweep: the table as Parquet and CSV, the design's figures, the
recommendation; resumable; local processes or a Dask scheduler; one error line
for a bad grid, seeds or flags, with nothing written."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.cli import main, parse_grid, parse_seeds
from fanoutsim.designs.reactor.analysis.sweep import recommendation_line

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "fanoutsim" / "examples" / "sweep.toml"
LEASES = ROOT / "fanoutsim" / "examples" / "leases.toml"
SW = importlib.import_module("fanoutsim.sweep")
ARGS = [
    "--grid",
    "reactor_poll_interval=0.5,2",
    "--grid",
    "reactor_poll_batch_limit=2,50",
    "--seeds",
    "0-1",
    "--until",
    "60",
]
GRID = {"reactor_poll_interval": [0.5, 2.0], "reactor_poll_batch_limit": [2, 50]}
PNG = b"\x89PNG\r\n\x1a\n"


def volatile_free(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"])


@pytest.fixture(scope="module")
def expected():
    return fs.sweep(SWEEP, grid=GRID, seeds=range(2), until=60.0, cache=None, progress=False)


def test_writes_the_table_the_figures_and_prints_the_recommendation(tmp_path, capsys, expected):
    out = tmp_path / "out"
    assert main(["sweep", str(SWEEP), *ARGS, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    names = {p.name for p in out.iterdir()}
    assert names == {
        "sweep.parquet",
        "sweep.csv",
        "cache.duckdb",
        "sweep_latency_vs_interval.png",
        "sweep_polls_vs_interval.png",
        "sweep_recommendation.png",
    }
    for name in names - {"sweep.parquet", "sweep.csv", "cache.duckdb"}:
        assert (out / name).read_bytes()[:8] == PNG
    table = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(volatile_free(table), volatile_free(expected))
    csv = pd.read_csv(out / "sweep.csv")
    pd.testing.assert_frame_equal(volatile_free(csv), volatile_free(expected), check_dtype=False)
    lines = captured.out.splitlines()
    assert (
        lines[0] == "reactor sweep of sweep: 8 runs (8 ran, 0 from the cache), 2 seeds each; every run valid: "
        "True, lost 0"
    )
    assert recommendation_line(expected) in captured.out
    assert "the rule: of the settings within the budget" in captured.out  # it says why it picked that one
    assert recommendation_line(expected).startswith("recommendation (p99 fire -> dispatch <= 1.5 s")
    assert lines[-1] == f"wrote 5 files to {out}"
    # the mean over seeds of each setting is printed
    p99 = expected.groupby(list(GRID))["fire_to_dispatch_p99_s"].mean().round(3)
    assert f"{p99.loc[(2.0, 2)]:.3f}" in captured.out
    # the same command again runs nothing
    assert main(["sweep", str(SWEEP), *ARGS, "--out", str(out)]) == 0
    assert "8 runs (0 ran, 8 from the cache)" in capsys.readouterr().out


def test_a_leases_sweep_by_dotted_path_has_figures_and_says_why_it_recommends_nothing(tmp_path, capsys):
    out = tmp_path / "leases"
    assert (
        main(
            [
                "sweep",
                str(LEASES),
                "--grid",
                "consumers.enricher.duration.mean=0.1,4",
                "--seeds",
                "0",
                "--until",
                "120",
                "--out",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "leases sweep of leases: 2 runs (2 ran, 0 from the cache)" in text
    # the grid varies the handler, not the lease: no recommendation, and a line that says so
    assert "recommendation: none: the sweep varies no lease length" in text
    names = {p.name for p in out.iterdir()}
    assert "cache.duckdb" not in names and {"sweep.parquet", "sweep.csv"} <= names
    assert {"sweep_publish_to_ack_p99_s.png", "sweep_duplicates.png"} <= names
    df = pd.read_parquet(out / "sweep.parquet")
    assert df["consumers.enricher.duration.mean"].tolist() == [0.1, 4.0]
    assert df["duplicates"].iloc[1] > df["duplicates"].iloc[0]  # work near its 5 s lease outlasts it


def test_on_a_dask_scheduler_the_same_table(tmp_path, capsys, expected):
    from distributed import LocalCluster

    out = tmp_path / "dask"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        assert main(["sweep", str(SWEEP), *ARGS, "--scheduler", cluster.scheduler_address, "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(volatile_free(pd.read_parquet(out / "sweep.parquet")), volatile_free(expected))
    assert "8 runs (8 ran, 0 from the cache)" in capsys.readouterr().out


def test_grid_values_are_toml_values_or_text():
    assert parse_grid(["a=1,2.5,true", 'b="x y",ttl', "c.d.e=-3"]) == {
        "a": [1, 2.5, True],
        "b": ["x y", "ttl"],
        "c.d.e": [-3],
    }
    assert parse_seeds("0-3,7") == [0, 1, 2, 3, 7] and parse_seeds("5") == [5] and parse_seeds("2,0") == [2, 0]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--grid", "poll_interval=1,2"], ["grid: unknown key 'poll_interval'; allowed: rate, fetch_latency"]),
        (["--grid", "reactor_poll_batch_limit=10,0"], ["grid['reactor_poll_batch_limit'] value 0 is not allowed"]),
        (["--grid", "prune_policy=ttl,eager"], ["value 'eager' is not allowed", "'ttl', 'conservative'"]),
        (["--grid", "subscriptions.9.tenant=x"], ["unknown key 'subscriptions.9.tenant'", "indexes 0..3"]),
        (["--grid", "reactor_poll_interval"], ["--grid 'reactor_poll_interval' is not KEY=V1,V2"]),
        (["--grid", "reactor_poll_interval=1,,2"], ["an empty value"]),
        (["--grid", "rate=1", "--grid", "rate=2"], ["'rate' is given twice"]),
        (["--seeds", "a-b"], ["--seeds 'a-b': 'a-b' is not a seed or a range of seeds"]),
        (["--seeds", "5-2"], ["the range '5-2' runs backwards"]),
        (["--seeds", "0-2,1"], ["names seed 1 twice"]),
        (["--workers", "0"], ["must be a number of worker processes >= 1"]),
        (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"], ["not allowed with argument"]),
        (["--until", "-1"], ["must be a finite number of seconds > 0"]),
    ],
)
def test_bad_input_is_one_error_line_and_nothing_written(tmp_path, capsys, args, fragments):
    out = tmp_path / "never"
    assert main(["sweep", str(SWEEP), *args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("fanoutsim: error: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not out.exists()


def test_a_failed_run_is_one_error_line_naming_it(tmp_path, capsys, monkeypatch):
    real = SW._run_one

    def failing(run):
        if run.seed == 1:
            raise RuntimeError("disk full")
        return real(run)

    monkeypatch.setattr(SW, "_run_one", failing)
    assert (
        main(
            [
                "sweep",
                str(SWEEP),
                "--grid",
                "reactor_poll_interval=0.5",
                "--seeds",
                "0-1",
                "--until",
                "60",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    [line] = capsys.readouterr().err.splitlines()
    assert "(reactor_poll_interval=0.5, seed=1) failed: RuntimeError: disk full" in line
    assert not (tmp_path / "o" / "sweep.parquet").exists()
