"""A grid key that cannot change any run is refused before anything runs.

A leases scenario whose every consumer sets its own ``lease_seconds`` reads
``[leases].lease_seconds`` nowhere (it only fills in a consumer that gives
none), so sweeping it ran one setting twice and read it as two lease lengths.
The sweep now refuses such a config field, naming the key, why, and the
per-consumer keys to sweep instead; those still sweep and recommend."""

from __future__ import annotations

import dataclasses
import importlib
import shutil
from pathlib import Path

import pytest
from clitools import cli, one_error_line

import fanoutsim as fs

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"
SW = importlib.import_module("fanoutsim.sweep")  # the module (fanoutsim.sweep is also the function)
WHY = "every [[consumers]] table in mine.toml sets its own lease_seconds"


@pytest.fixture
def mine(tmp_path: Path) -> Path:
    """QA's scenario: `fanoutsim example lease-length --out mine.toml` (one consumer, its own limits)."""
    path = tmp_path / "mine.toml"
    shutil.copyfile(SCENARIOS / "lease-length.toml", path)
    return path


def test_cli_refuses_a_config_lease_every_consumer_overrides(mine: Path):
    out = mine.parent / "out" / "c1"
    done = cli(
        "sweep", str(mine), "--until", "600", "--grid", "lease_seconds=5,40",
        "--grid", "consumers.worker.duration.sigma=1", "--out", str(out), "--no-cache",
    )  # fmt: skip
    one_error_line(done, "grid: 'lease_seconds' cannot change any run", WHY, "sweep consumers.worker.lease_seconds")
    assert not out.exists() and not (mine.parent / "out").exists()


@pytest.mark.parametrize(
    "key, instead",
    [
        ("lease_seconds", "consumers.worker.lease_seconds"),
        ("leases.lease_seconds", "consumers.worker.lease_seconds"),  # the same field by its path
        ("in_flight_limit", "consumers.worker.in_flight_limit"),
        ("batch_limit", "consumers.worker.batch_limit"),
    ],
)
def test_sweep_refuses_each_limit_default_no_consumer_takes(mine: Path, key: str, instead: str):
    field = key.rpartition(".")[2]
    with pytest.raises(ValueError) as info:
        fs.sweep(mine, grid={key: [2, 8] if field != "lease_seconds" else [5, 40]}, until=30, cache=None)
    msg = str(info.value)
    assert msg.startswith(f"grid: {key!r} cannot change any run: ")
    assert f"sets its own {field}" in msg and f"[leases].{field} only fills in" in msg
    assert msg.endswith(f"sweep {instead} instead")


def test_a_grid_that_sets_every_consumers_lease_makes_the_default_dead_too(mine: Path):
    text = mine.read_text().replace("lease_seconds = 5.0\n", "")
    mine.write_text(text)
    SW.grid_runs(mine, {"lease_seconds": [5, 40]})  # the worker takes the default: a real lease length
    with pytest.raises(ValueError, match=r"sets its own lease_seconds \(some by this grid\)"):
        SW.grid_runs(mine, {"lease_seconds": [5, 40], "consumers.worker.lease_seconds": [10]})


def test_every_consumer_is_named_and_one_that_takes_the_default_keeps_the_key():
    with pytest.raises(ValueError) as info:
        SW.grid_runs(SCENARIOS / "leases-crashes.toml", {"lease_seconds": [5, 40]})
    assert str(info.value).endswith(
        "sweep consumers.indexer.lease_seconds, consumers.mailer.lease_seconds, "
        "consumers.ledger.lease_seconds (one key per table) instead"
    )
    SW.grid_runs(SCENARIOS / "leases.toml", {"lease_seconds": [5, 40]})  # its audit consumer sets none


@pytest.mark.parametrize("name", ["sweep.toml", "default.toml", "outbox.toml", "safety-poll.toml"])
def test_no_config_field_of_the_other_designs_is_refused(name: str):
    base = SW._load(SCENARIOS / name)
    for field in dataclasses.fields(base.design.config_type):
        value = getattr(base.scenario.config, field.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            SW.grid_runs(SCENARIOS / name, {field.name: [value, value * 2]})


def test_the_per_consumer_lease_still_sweeps_and_recommends(mine: Path):
    grid = {"consumers.worker.lease_seconds": [5.0, 40.0], "consumers.worker.duration.sigma": [1.0]}
    df = fs.sweep(mine, grid=grid, until=600, cache=None, progress=False)
    short, long = df.iloc[0], df.iloc[1]
    assert short["duplicates"] > 20 and long["duplicates"] < short["duplicates"] / 10
    line = SW.recommend(df, mine)
    assert line.startswith("recommendation (duplicates per event delivered to worker <= 0.01): ")
    assert "consumers.worker.lease_seconds = 40" in line
