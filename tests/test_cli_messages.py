"""Command-line messages that name the right thing: ``serve --trace`` is
checked before serving and named when it cannot be written at the stop (not
the database); ``explain`` of one item in a ``run --out`` folder says what the
folder answers and where an item's story is; ``example --out DIR/`` is a
folder, refused as an existing one is, with nothing written."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import ENV, cli, one_error_line
from conftest import wait_for

from fanoutsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"


# -- serve --trace -----------------------------------------------------------------------
@pytest.mark.parametrize("where, fragment", [("nowhere/t.parquet", "no folder"), (".", "it is a folder")])
def test_serve_refuses_a_trace_it_could_not_write_before_serving(tmp_path, where, fragment):
    db, trace = tmp_path / "new.duckdb", tmp_path / where
    done = cli("serve", "--db", str(db), "--scenario", str(SCENARIOS / "realtime.toml"), "--trace", str(trace))
    one_error_line(done, f"--trace {trace}:", fragment)
    assert not db.exists() and not Path(f"{db}.serve.json").exists()  # nothing served, nothing made


def test_a_trace_that_cannot_be_written_at_the_stop_is_named_not_the_database(tmp_path):
    db, folder = tmp_path / "new.duckdb", tmp_path / "traces"
    folder.mkdir()
    trace = folder / "t.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--db", str(db), "--rate", "0", "--trace", str(trace)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    side = Path(f"{db}.serve.json")
    try:
        assert wait_for(lambda: side.exists() and json.loads(side.read_text())["pid"] == proc.pid, timeout=60)
        shutil.rmtree(folder)  # gone while serving
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    last = err.splitlines()[-1]
    assert last.startswith(f"fanoutsim: error: --trace {trace}: could not write the trace"), err
    assert f"{db}:" not in last and "Traceback" not in err
    assert not folder.exists()  # nothing half-written made it


# -- explain ID on a run's folder -----------------------------------------------------------
def test_explain_of_one_item_in_a_run_folder_says_what_the_folder_answers(tmp_path, capsys):
    out = tmp_path / "crashes"
    assert main(["run", str(SCENARIOS / "crashes.toml"), "--until", "30", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["explain", str(out), "SOME-ID"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    for fragment in ("--duplicates / --lost", "--store FILE.duckdb", "fanoutsim explain FILE.duckdb ID"):
        assert fragment in captured.err, fragment
    assert "not a DuckDB database file" not in captured.err
    assert main(["explain", str(out), "--lost"]) == 0  # what it says the folder answers, it does


# -- example --out DIR/ -------------------------------------------------------------------
def test_example_out_ending_in_a_slash_is_a_folder_and_writes_nothing(tmp_path):
    target = tmp_path / "newdir"
    done = cli("example", "default", "--out", f"{target}/")
    one_error_line(done, f"{target}/ names a folder", f"mkdir {target}, then --out {target}/default.toml")
    assert not target.exists() and not Path(f"{target}.toml").exists()
    target.mkdir()  # what it says to do works
    assert cli("example", "default", "--out", str(target / "default.toml")).returncode == 0
    assert (target / "default.toml").read_text() == (SCENARIOS / "default.toml").read_text()
