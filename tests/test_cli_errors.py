"""The command's errors: one line naming the file and what is wrong, exit 2.

A damaged DuckDB file, a missing one, a store in a folder that is missing or
read-only, a reader that closes the pipe, a locked file under ``serve``; and
progress on stderr for a run that takes a while.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from clitools import ENV, cli, one_error_line

import fanoutsim as fs
from fanoutsim import progress
from fanoutsim.cli import main
from fanoutsim.kernel.store.duckdb import StoreError

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "fanoutsim" / "examples" / "default.toml"


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory) -> Path:
    """A DuckDB file whose blocks fail their checksum."""
    path = tmp_path_factory.mktemp("corrupt") / "corrupt.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table t as select range as i from range(100000)")
    con.close()
    data = bytearray(path.read_bytes())
    for i in range(5000, 9000):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["fire", "--reactor", "pricing_reactor"],
        ["serve", "--rate", "0"],
    ],
)
def test_a_corrupt_file_is_one_line_naming_it(corrupt, command):
    before = corrupt.read_bytes()
    line = one_error_line(cli(command[0], "--db", str(corrupt), *command[1:]), str(corrupt), "Corrupt")
    assert "Traceback" not in line and "_duckdb" not in line
    assert corrupt.read_bytes() == before


def test_check_store_names_a_corrupt_file(corrupt):
    with pytest.raises(StoreError, match=rf"{corrupt.name}: Corrupt database file"):
        fs.check_store(str(corrupt))


@pytest.mark.parametrize("command", [["status"], ["fire", "--reactor", "pricing_reactor"]])
def test_reading_commands_refuse_a_missing_file(tmp_path, command):
    typo = tmp_path / "typo.duckdb"
    one_error_line(cli(command[0], "--db", str(typo), *command[1:]), str(typo), "no such file")
    assert not typo.exists() and list(tmp_path.iterdir()) == []


def scenario_with_store(folder: Path, store: str) -> Path:
    path = folder / "s.toml"
    path.write_text(f'[run]\nuntil = 10\nstore = "{store}"\n')
    return path


def test_run_with_a_store_in_a_missing_folder(tmp_path):
    store = tmp_path / "no" / "such" / "run.duckdb"
    scenario = scenario_with_store(tmp_path, str(store))
    one_error_line(cli("run", str(scenario), "--out", str(tmp_path / "o")), str(store), "does not exist")


def test_run_with_a_store_in_a_read_only_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    store = locked / "run.duckdb"
    scenario = scenario_with_store(tmp_path, str(store))
    os.chmod(locked, 0o555)
    command = [sys.executable, "-m", "fanoutsim", "run", str(scenario), "--out", str(tmp_path / "o")]
    if os.geteuid() == 0:  # root writes through mode 0555: drop the capability that lets it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
        command = [setpriv, "--bounding-set=-dac_override", "--inh-caps=-dac_override", *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
        one_error_line(done, str(store), "not writable")
        assert not store.exists()
    finally:
        os.chmod(locked, 0o755)


def test_a_reader_that_closes_the_pipe_ends_quietly(tmp_path):
    db = tmp_path / "st.duckdb"
    rt = fs.Realtime(store=str(db))
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    rt.fire("r", {"n": 1})
    rt.close()
    for args in (
        ["run", str(DEFAULT), "--until", "30", "--out", str(tmp_path / "o")],
        ["run", str(DEFAULT), "--until", "30", "--out", str(tmp_path / "j"), "--json"],
        ["status", "--db", str(db), "--design", "reactor"],  # made from Python: records none
        ["fire", "--db", str(db), "--reactor", "r"],
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "fanoutsim", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
        )
        proc.stdout.close()  # `| head -0`: gone before the first write
        _, err = proc.communicate(timeout=120)
        assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
        assert proc.returncode == 141


def test_serve_on_a_locked_file_says_serving_only_once_it_serves(tmp_path):
    db = tmp_path / "held.duckdb"
    con = duckdb.connect(str(db))  # this process holds the file
    try:
        done = cli("serve", "--db", str(db), "--rate", "0")
        line = one_error_line(done, str(db), "held by another process")
        assert "serving" not in done.stderr and str(os.getpid()) in line
    finally:
        con.close()


def test_a_run_over_two_seconds_shows_progress_on_stderr(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.0)  # as if the run had taken a while
    monkeypatch.setattr(progress, "TICK", 0.01)
    assert main(["run", str(DEFAULT), "--until", "600", "--out", str(tmp_path / "o"), "--progress"]) == 0
    captured = capsys.readouterr()
    assert "virtual time" in captured.err and "/600 s" in captured.err
    assert "/600 s" not in captured.out
    # without --progress and not on a terminal: nothing on stderr
    assert main(["run", str(DEFAULT), "--until", "600", "--out", str(tmp_path / "p")]) == 0
    assert capsys.readouterr().err == ""


def test_progress_leaves_the_run_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "TICK", 0.001)
    plain = fs.Simulation(seed=3)
    watched = fs.Simulation(seed=3)
    for sim in (plain, watched):
        sim.runner.subscribe_workflow_to_reactor("r", "wf")
        sim.add_workload("r", 50.0)
    plain.run(300)
    progress.run_virtual(watched, 300)
    assert plain.trace().equals(watched.trace())
    assert plain.executions()["id"].tolist() == watched.executions()["id"].tolist()


def test_wall_clock_ids_differ_between_runs_and_virtual_ids_repeat(tmp_path):
    firsts = []
    for name in ("a", "b"):
        rt = fs.Realtime(store=str(tmp_path / f"{name}.duckdb"), seed=0)
        try:
            rt.runner.subscribe_workflow_to_reactor("r", "wf")
            firsts.append((rt.fire("r", {}), rt.subscriptions()["id"][0]))
        finally:
            rt.close()
    assert firsts[0][0] != firsts[1][0] and firsts[0][1] != firsts[1][1]
    sims = []
    for _ in range(2):
        sim = fs.Simulation(seed=0)
        sim.runner.subscribe_workflow_to_reactor("r", "wf")
        sim.fire("r", {})
        sims.append(sim.firings()["id"].tolist())
    assert sims[0] == sims[1]


def test_progress_is_shown_by_default_when_stderr_is_a_terminal(tmp_path, capsys, monkeypatch):
    from fanoutsim import cli

    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "TICK", 0.01)
    monkeypatch.setattr(cli, "_is_terminal", lambda stream: True)
    assert main(["run", str(DEFAULT), "--until", "600", "--out", str(tmp_path / "o")]) == 0
    assert "virtual time" in capsys.readouterr().err
    assert main(["run", str(DEFAULT), "--until", "600", "--out", str(tmp_path / "p"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("args", "points_at"),
    [
        (["run", str(DEFAULT), "--unknown"], "fanoutsim run --help"),
        (["example", "--bogus"], "fanoutsim example --help"),
    ],
)
def test_an_unknown_option_points_at_the_help_of_the_command_it_was_given_to(tmp_path, args, points_at):
    line = one_error_line(cli(*args, cwd=tmp_path), "unrecognized arguments: --")
    assert line.endswith(f"(see '{points_at}')")
    assert list(tmp_path.iterdir()) == []  # refused before anything ran


def test_explain_refuses_a_design_that_does_not_exist(tmp_path):
    one_error_line(cli("explain", str(tmp_path), "--design", "leses"), "'leses' is not a design", "reactor")
