"""A fourth design, registered from the tests, gets run, check, report, sweep and serve
through the seam alone: nothing under fanoutsim/ names it."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim import designs
from fanoutsim.cli import main
from toy_design.design import DESIGN
from toy_design.engine import ToyConfig, ToyWorkload

ROOT = Path(__file__).resolve().parents[2]
TOML = """design = "toy"
name = "toy-run"
[run]
seed = 0
until = 120.0
[toy]
poll_interval = 1.0
batch_limit = 10
[[workload]]
rate = 2.0
"""


@pytest.fixture
def toy(tmp_path):
    designs.register(DESIGN)
    path = tmp_path / "toy.toml"
    path.write_text(TOML)
    yield path
    designs.unregister("toy")


def test_nothing_in_the_package_names_the_toy():
    hits = [p for p in (ROOT / "fanoutsim").rglob("*.py") if re.search(r"\btoy", p.read_text(), re.IGNORECASE)]
    assert hits == []
    assert "toy" not in designs.names()  # only while a test registers it


def test_fanoutsim_run_writes_the_toys_report_tables_and_figure(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(toy), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "toy toy-run: " in printed and "toy check: 0 lost, 0 duplicates — VALID" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["design"] == "toy" and report["check"]["valid"] is True
    assert report["check"]["appended"] == report["appended"] > 150
    written = {"report.json", "log.parquet", "cursors.parquet", "toy_latency.png", ".fanoutsim-outputs.json"}
    assert {p.name for p in out.iterdir()} == written
    assert len(pd.read_parquet(out / "log.parquet")) == report["appended"]
    # a bad value in the toy's own table is the toy parser's error, through the CLI
    bad = tmp_path / "bad.toml"
    bad.write_text(TOML.replace("batch_limit = 10", "batch_limit = 0"))
    assert main(["run", str(bad)]) == 2
    assert "toy.batch_limit: batch_limit must be an int >= 1" in capsys.readouterr().err


def test_check_and_report_through_the_registry(toy):
    sim = fs.load_scenario(toy).run(until=30.0)
    design = designs.design_of(sim)
    checked = design.check(sim)
    assert design is DESIGN and checked.valid and checked.total["lost"] == 0
    assert design.report(sim, name="x", checked=checked)["check"] == checked.total


def test_fs_sweep_takes_the_toys_config_fields_rate_and_columns(toy):
    df = fs.sweep(toy, grid={"poll_interval": [0.5, 4.0], "rate": [1.0, 6.0]}, until=120.0, cache=None, progress=False)
    assert list(df.columns) == ["poll_interval", "rate", "seed", *DESIGN.sweep_columns, "wall_s"]
    fast, slow = df.groupby("poll_interval")["append_to_handled_mean_s"].mean()
    assert fast < 0.5 < 1.5 < slow  # half a poll interval, on average
    low, high = df.groupby("rate")["appended"].mean()
    assert high > 3 * low
    assert df["valid"].all() and (df["lost"] == 0).all()
    with pytest.raises(ValueError, match=r"grid: unknown key 'poll'; allowed: rate, poll_interval, batch_limit"):
        fs.sweep(toy, grid={"poll": [1.0]}, cache=None, progress=False)
    with pytest.raises(ValueError, match=r"grid\['toy.batch_limit'\] value 0 is not allowed: batch_limit must be"):
        fs.sweep(toy, grid={"toy.batch_limit": [0]}, cache=None, progress=False)
    with pytest.raises(ValueError, match=r"grid: unknown key 'workload.1.rate': workload has no item '1'"):
        fs.sweep(toy, grid={"workload.1.rate": [1.0]}, cache=None, progress=False)


def test_fs_sweep_of_the_toy_in_worker_processes(toy, tmp_path):
    kw = dict(grid={"poll_interval": [0.5, 2.0]}, seeds=range(2), until=60.0, progress=False)
    one = fs.sweep(toy, cache=None, **kw).drop(columns="wall_s")
    pooled = fs.sweep(toy, workers=2, cache=tmp_path / "c.duckdb", **kw)
    pd.testing.assert_frame_equal(one, pooled.drop(columns="wall_s"))
    again = fs.sweep(toy, cache=tmp_path / "c.duckdb", **kw)
    assert again.attrs == {"ran": 0, "from_cache": 4}


def test_serve_write_and_status_of_the_toy(toy, tmp_path, capsys):
    from fanoutsim import serve

    db = str(tmp_path / "toy.duckdb")
    scenario = fs.load_scenario(toy)
    ready, stop = threading.Event(), threading.Event()
    result = {}
    t = threading.Thread(
        target=lambda: result.setdefault(
            "rc", serve.serve(db, scenario, rate=0, ready=lambda port: ready.set(), stop_event=stop)
        )
    )
    t.start()
    try:
        assert ready.wait(30)
        assert main(["write", "--db", db, "body=hello"]) == 0
        assert json.loads(capsys.readouterr().out) == {"seq": 1}
        assert main(["write", "--db", db, "bod=x"]) == 2
        assert "unknown field 'bod' of an append; fields: body" in capsys.readouterr().err
        deadline = threading.Event()
        for _ in range(100):
            assert main(["status", "--db", db]) == 0
            st = json.loads(capsys.readouterr().out)
            if st["cursor"] == 1:
                break
            deadline.wait(0.1)
        assert st == {**st, "design": "toy", "running": True, "rows": 1, "cursor": 1, "lag": 0}
    finally:
        stop.set()
        t.join(30)
    assert result["rc"] == 0 and not Path(f"{db}.serve.json").exists()
    assert main(["status", "--db", db]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["design"] == "toy" and st["running"] is False and st["rows"] == 1


def test_the_toys_loops_are_written_once_and_run_on_both_clocks(tmp_path):
    """The toy's consumer and writer exist once, in ToyRuntime; the kernel's
    drivers give it the virtual clock and the wall clock, and both deliver every
    appended row once, with the poll wait a poll interval bounds."""
    import time

    from toy_design.engine import ToyRealtime, ToyRuntime, ToySimulation, check_toy, latencies

    for name in ("_consumer_loop", "_writer", "_start_loops"):
        assert name in vars(ToyRuntime)
        assert name not in vars(ToySimulation) and name not in vars(ToyRealtime)
    config = ToyConfig(poll_interval=0.1, batch_limit=100)
    sim = ToySimulation(config, seed=3, workloads=[ToyWorkload(40.0)])
    sim.run(20.0)
    rt = ToyRealtime(config, store=str(tmp_path / "toy.duckdb"), rate=40.0, seed=3)
    rt.start()
    # a count of rows, not a time: a loaded machine appends them later, not fewer
    deadline = time.monotonic() + 120.0
    while sum(e["kind"] == "appended" for e in list(rt.events)) <= 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    rt.stop()
    try:
        for run in (sim, rt):
            checked = check_toy(run)
            assert checked.valid and checked.total["appended"] > 40
            assert checked.total["handled"] >= checked.total["appended"] - checked.total["pending"]
            lat = latencies(run)
            assert 0 <= lat.min()
        # a row waits for the next poll: under the poll interval in virtual time; on
        # the wall clock under the longest gap between two polls, however late a
        # loaded machine wakes the consumer
        assert latencies(sim).quantile(0.5) < config.poll_interval
        trace = rt.trace()
        polls = trace.loc[trace["kind"] == "handled", "t"].drop_duplicates().sort_values()
        assert latencies(rt).quantile(0.5) < polls.diff().max() / 1e6
    finally:
        rt.close()
