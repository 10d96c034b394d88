"""The fanoutsim command: outputs written, report printed, errors exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.cli import full_report, main
from fanoutsim.designs.reactor.checker import format_check
from fanoutsim.designs.reactor.scenario import load_scenario
from fanoutsim.report import format_report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "fanoutsim" / "examples" / "default.toml"
UNTIL = "120"
FIGURES = {"latency_fire_to_dispatch.png", "latency_fire_to_claim.png", "executions_over_time.png", "watermark_lag.png"}
TABLES = {"firings.parquet", "executions.parquet", "subscriptions.parquet"}


@pytest.fixture(scope="module")
def expected_report():
    scenario = load_scenario(DEFAULT)
    sim = scenario.run(until=float(UNTIL))
    return full_report(sim, "default", scenario.description)[0], sim


def test_run_writes_everything_and_prints_the_report(tmp_path, capsys, expected_report):
    report, sim = expected_report
    out = tmp_path / "out"
    assert main(["run", str(DEFAULT), "--until", UNTIL, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert {p.name for p in out.iterdir()} == {"report.json", ".fanoutsim-outputs.json"} | TABLES | FIGURES
    for name in FIGURES:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "report.json").read_text()) == report
    assert captured.out == (
        format_report(report) + "\n" + format_check(fs.check(sim)) + f"\n\nwrote 8 files to {out}\n"
    )
    assert "delivery check: VALID" in captured.out
    # what the run shows, on top (wrapped under the title)
    assert load_scenario(DEFAULT).description in " ".join(captured.out.splitlines()[2:4])
    assert captured.err == ""


def test_parquet_tables_hold_the_run(tmp_path, capsys, expected_report):
    _, sim = expected_report
    out = tmp_path / "out"
    assert main(["run", str(DEFAULT), "--until", UNTIL, "--out", str(out)]) == 0
    firings = pd.read_parquet(out / "firings.parquet")
    executions = pd.read_parquet(out / "executions.parquet")
    subs = pd.read_parquet(out / "subscriptions.parquet")
    assert firings["id"].tolist() == sim.firings()["id"].tolist()
    assert str(firings["fired_at"].dtype).startswith("datetime64") and firings["fired_at"].dt.tz is not None
    assert len(subs) == 6 and set(subs["workflow_name"]) == {"incident_response", "audit", "eu_pricing"}
    assert executions["id"].tolist() == sim.executions()["id"].tolist()
    contexts = [json.loads(c) for c in executions["context"]]  # a JSON string column
    assert contexts == sim.executions()["context"].tolist()
    assert all(c["reactor_name"] == "pricing_reactor" and "quote" in c for c in contexts)


def test_json_flag_prints_only_the_report_on_stdout(tmp_path, capsys, expected_report):
    report, _ = expected_report
    out = tmp_path / "j"
    assert main(["run", str(DEFAULT), "--until", UNTIL, "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == report
    assert captured.err.strip() == f"wrote 8 files to {out}"


def test_default_output_folder_is_named_after_the_scenario(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(DEFAULT), "--until", "5"]) == 0
    assert (tmp_path / "out" / "default" / "report.json").exists()
    assert capsys.readouterr().out.rstrip().endswith(f"wrote 8 files to {Path('out') / 'default'}")


def test_seed_and_until_override_the_file(tmp_path, capsys):
    assert main(["run", str(DEFAULT), "--until", "30", "--seed", "9", "--out", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seed"] == 9 and report["time_span_s"] == 30.0
    scenario = load_scenario(DEFAULT)
    assert report == full_report(scenario.run(seed=9, until=30.0), "default", scenario.description)[0]


def error_exit(argv, capsys) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fanoutsim: error: ")
    return captured.err


def test_missing_scenario_file(tmp_path, capsys):
    missing = tmp_path / "nope.toml"
    err = error_exit(["run", str(missing)], capsys)
    assert str(missing) in err and "no such scenario file" in err


def test_bad_scenario_names_file_and_key(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\nuntil = 10\n[config]\nprune_policy = "never"\n')
    err = error_exit(["run", str(bad), "--out", str(tmp_path / "o")], capsys)
    assert f"{bad}: config.prune_policy:" in err and "'ttl', 'conservative'" in err
    assert not (tmp_path / "o").exists()  # nothing written


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", str(DEFAULT), "--until", "-5"], "--until"),
        (["run", str(DEFAULT), "--until", "soon"], "'soon' is not a number"),
        (["run", str(DEFAULT), "--seed", "x"], "--seed"),
        (["run", str(DEFAULT), "--bogus"], "--bogus"),
        (["run"], "SCENARIO"),
        ([], "COMMAND"),
        (["walk", str(DEFAULT)], "walk"),
    ],
)
def test_bad_flags_exit_2(argv, fragment, capsys):
    assert fragment in error_exit(argv, capsys)


def test_help_exits_0(capsys):
    assert main(["run", "--help"]) == 0
    assert "--until SECONDS" in capsys.readouterr().out


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    err = error_exit(["run", str(DEFAULT), "--until", "5", "--out", str(blocker / "sub")], capsys)
    assert str(blocker / "sub") in err


def test_python_dash_m_fanoutsim(tmp_path):
    missing = tmp_path / "nope.toml"
    done = subprocess.run(
        [sys.executable, "-m", "fanoutsim", "run", str(missing)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.startswith("fanoutsim: error: ") and "no such scenario file" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "fanoutsim", "--version"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("fanoutsim ")


def test_a_run_into_a_folder_of_another_run_leaves_one_run_there(tmp_path):
    """Another design's run into the same --out folder: the files the last run
    wrote and this one does not (the reactor's tables and figures) go; a file of
    the user's stays; a folder with no list of ours loses nothing."""
    from clitools import cli

    out = tmp_path / "out"
    examples = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples"
    assert cli("run", str(examples / "default.toml"), "--until", "30", "--out", str(out)).returncode == 0
    assert (out / "firings.parquet").exists()
    (out / "notes.txt").write_text("mine")
    assert cli("run", str(examples / "outbox.toml"), "--until", "30", "--out", str(out)).returncode == 0
    names = {p.name for p in out.iterdir()}
    assert {"outbox.parquet", "report.json", "notes.txt"} <= names
    assert not {"firings.parquet", "executions.parquet", "watermark_lag.png"} & names
    listed = json.loads((out / ".fanoutsim-outputs.json").read_text())
    assert listed == sorted(names - {"notes.txt", ".fanoutsim-outputs.json"})
    # a folder an older fanoutsim wrote (no list): nothing of it is removed
    (out / ".fanoutsim-outputs.json").unlink()
    assert cli("run", str(examples / "default.toml"), "--until", "30", "--out", str(out)).returncode == 0
    assert "outbox.parquet" in {p.name for p in out.iterdir()}
