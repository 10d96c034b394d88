"""Command-line refusals that leave nothing behind: a failed or interrupted
``run`` removes the store file it created; ``sweep`` refuses a bad ``--cache``
and the ``[run]`` grid keys before anything is made; ``status`` / ``fire`` /
``write`` refuse a DuckDB file fanoutsim did not make, untouched; ``serve``
range-checks its port and names a port in use; ``write`` refuses a ``due_in``
no clock can hold. Each is one line, exit 2 (130 for Ctrl-C), no traceback."""

from __future__ import annotations

import importlib
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from clitools import ENV, cli, one_error_line
from conftest import wait_for

import fanoutsim as fs

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"
SW = importlib.import_module("fanoutsim.sweep")


# -- 1. a failed run removes the store file it created -------------------------------
def _bad_reactor(folder: Path) -> Path:  # refused at build, after the store is opened
    path = folder / "bad.toml"
    path.write_text(
        (SCENARIOS / "default.toml").read_text()
        + '\n[[faults]]\nkind = "slow_workflow"\nworkflow = "nosuch"\nduration = 2.0\n'
    )
    return path


def _bad_outbox(folder: Path) -> Path:  # refused mid-run
    path = folder / "bad.toml"
    path.write_text(
        (SCENARIOS / "outbox.toml").read_text()
        + '\n[[consumers]]\nname = "late"\nduration = 0.01\nstart = 99999\njoin_at = 5.0\n'
    )
    return path


def _bad_leases(folder: Path) -> Path:  # refused mid-run
    path = folder / "bad.toml"
    path.write_text(
        (SCENARIOS / "leases.toml").read_text()
        + '\n[[actions]]\nkind = "seek"\nat = 5.0\nconsumer = "indexer"\nposition = 999999\n'
    )
    return path


@pytest.mark.parametrize(
    "make, fragment",
    [(_bad_reactor, "nosuch"), (_bad_outbox, "consumers[4].start"), (_bad_leases, "actions[0].position")],
)
def test_a_failed_run_removes_the_store_it_created(tmp_path, make, fragment):
    scenario = make(tmp_path)
    store = tmp_path / "half.duckdb"
    args = ["run", str(scenario), "--until", "20", "--store", str(store), "--out", str(tmp_path / "out")]
    one_error_line(cli(*args), "bad.toml", fragment)
    assert not store.exists() and not Path(f"{store}.wal").exists()
    assert not (tmp_path / "out").exists()
    # the same command is refused for the scenario again, not for a file left behind
    assert "already exists" not in cli(*args).stderr


def test_a_failed_run_keeps_a_store_that_was_there(tmp_path):
    store = tmp_path / "mine.duckdb"
    con = duckdb.connect(str(store))
    con.execute("create table t(a int)")
    con.close()
    before = store.read_bytes()
    one_error_line(cli("run", str(_bad_reactor(tmp_path)), "--until", "20", "--store", str(store)), "already exists")
    assert store.read_bytes() == before


def test_ctrl_c_during_run_is_one_line_and_removes_its_store(tmp_path):
    store = tmp_path / "bench.duckdb"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fanoutsim",
            "run",
            str(SCENARIOS / "bench-day.toml"),
            "--store",
            str(store),
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        # as a terminal's foreground job gets it: a suite started in the background (`make test &`)
        # hands its children SIGINT ignored, and Python then installs no KeyboardInterrupt for it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert wait_for(lambda: store.exists() or proc.poll() is not None, timeout=60.0)
        time.sleep(1.0)  # into the run
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and err.splitlines() == [
        f"fanoutsim: interrupted; removed {store}, which it had created"
    ]
    assert not store.exists() and not Path(f"{store}.wal").exists()


# -- 3. sweep --cache that is not a DuckDB file --------------------------------------
@pytest.mark.parametrize(
    "cache, fragment", [(SCENARIOS / "default.toml", "is not a DuckDB database file"), (SCENARIOS, "is a directory")]
)
def test_sweep_refuses_a_cache_that_is_not_a_duckdb_file(tmp_path, cache, fragment):
    out = tmp_path / "sw" / "z"
    before = cache.read_bytes() if cache.is_file() else None
    one_error_line(
        cli(
            "sweep",
            str(SCENARIOS / "sweep.toml"),
            "--grid",
            "reactor_poll_interval=1",
            "--until",
            "10",
            "--out",
            str(out),
            "--cache",
            str(cache),
        ),
        f"--cache {cache}",
        fragment,
    )
    assert not (tmp_path / "sw").exists()
    if before is not None:
        assert cache.read_bytes() == before


def test_sweep_function_refuses_a_cache_that_is_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        fs.sweep(
            SCENARIOS / "sweep.toml", grid={"reactor_poll_interval": [1.0]}, until=10.0, cache=tmp_path, progress=False
        )


# -- 4. the [run] keys are not grid keys -----------------------------------------------
@pytest.mark.parametrize(
    "item, fragment",
    [("run.seed=1,2", "--seeds"), ("run.until=5,10", "--until"), ("run.store=a.duckdb,b.duckdb", "not sweepable")],
)
def test_sweep_refuses_the_run_keys_as_grid_keys(tmp_path, item, fragment):
    out = tmp_path / "sw"
    key = item.partition("=")[0]
    one_error_line(
        cli("sweep", str(SCENARIOS / "sweep.toml"), "--grid", item, "--until", "10", "--out", str(out)),
        f"grid: {key!r}",
        fragment,
    )
    assert not out.exists()


@pytest.mark.parametrize("key", ["run.seed", "run.until", "run.store"])
def test_sweep_function_refuses_the_run_keys(key):
    with pytest.raises(ValueError, match=rf"grid: '{key}' cannot be swept"):
        fs.sweep(SCENARIOS / "sweep.toml", grid={key: [1, 2]}, until=10.0, cache=None, progress=False)


# -- 5. status / fire / write on a file fanoutsim did not make -------------------------
@pytest.fixture
def foreign(tmp_path) -> Path:
    path = tmp_path / "f.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table t(a int)")
    con.close()
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["status", "--design", "reactor"],
        ["status"],
        ["fire", "--reactor", "pricing_reactor"],
        ["write", "--design", "outbox", "page=p", "body=b"],
    ],
)
def test_a_file_fanoutsim_did_not_make_is_refused_untouched(foreign, command):
    before = foreign.read_bytes()
    one_error_line(cli(command[0], "--db", str(foreign), *command[1:]), str(foreign), "not made by fanoutsim")
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in foreign.parent.iterdir()) == ["f.duckdb"]


@pytest.mark.parametrize(
    "command", [["status"], ["status", "--design", "reactor"], ["fire", "--reactor", "pricing_reactor"]]
)
@pytest.mark.parametrize("what, fragment", [("dir", "is a directory"), ("toml", "is not a DuckDB database file")])
def test_status_names_a_directory_or_another_kind_of_file(tmp_path, command, what, fragment):
    path = tmp_path / "data.duckdb"  # named as a store is (a name that is not one is refused by name)
    if what == "dir":
        path.mkdir()
    else:
        path.write_text("[run]\n")
    one_error_line(cli(command[0], "--db", str(path), *command[1:]), str(path), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.duckdb"]


# -- 6. serve's port -------------------------------------------------------------------------
@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_refuses_a_port_out_of_range(tmp_path, port):
    db = tmp_path / "p.duckdb"
    one_error_line(cli("serve", "--db", str(db), "--port", port), "--port", repr(port))
    assert list(tmp_path.iterdir()) == []


def test_serve_function_refuses_a_port_out_of_range(tmp_path):
    from fanoutsim.serve import serve

    with pytest.raises(ValueError, match="not a TCP port"):
        serve(tmp_path / "p.duckdb", port=70000)
    assert list(tmp_path.iterdir()) == []


def test_serve_on_a_port_in_use_names_the_port_and_leaves_no_file(tmp_path):
    db = tmp_path / "q.duckdb"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error_line(
            cli("serve", "--db", str(db), "--port", str(port), "--rate", "0"), f"port {port}", "Address already in use"
        )
    assert not line.startswith(f"fanoutsim: error: {db}")
    assert list(tmp_path.iterdir()) == []


# -- 7. write's due_in -------------------------------------------------------------------------
@pytest.fixture
def outbox_file(tmp_path) -> Path:
    db = tmp_path / "ob.duckdb"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fanoutsim",
            "serve",
            "--db",
            str(db),
            "--scenario",
            str(SCENARIOS / "outbox.toml"),
            "--rate",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )

    def ready() -> bool:
        assert proc.poll() is None, proc.stderr.read()
        try:
            return json.loads(Path(f"{db}.serve.json").read_text())["pid"] == proc.pid
        except (OSError, ValueError):
            return False

    try:
        assert wait_for(ready, timeout=60.0)
        yield db, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


@pytest.mark.parametrize("value", ["1e308", "1e12", "Infinity", "NaN"])
def test_write_refuses_a_due_in_no_clock_can_hold(outbox_file, value):
    db, proc = outbox_file
    one_error_line(cli("write", "--db", str(db), "page=p", "body=b", f"due_in:={value}"), "due_in", "at most")
    proc.send_signal(signal.SIGTERM)  # and with no server: the same
    assert proc.wait(timeout=30) == 0
    one_error_line(cli("write", "--db", str(db), "page=p", "body=b", f"due_in:={value}"), "due_in", "at most")
    done = cli("write", "--db", str(db), "page=p", "body=b", "due_in:=3600")
    assert done.returncode == 0 and json.loads(done.stdout) == {"seq": 1}, done.stderr


def test_the_server_refuses_a_large_due_in_sent_to_it(outbox_file):
    from fanoutsim.kernel.runtime.control import server_info, server_request

    db, _ = outbox_file
    with pytest.raises(Exception, match="due_in"):
        server_request(server_info(str(db)), "/write", {"page": "p", "due_in": 1e308})


# -- 8. run's output folder: checked before the run, filled whole or not at all ------------
def test_run_refuses_an_out_under_a_file_before_running(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    line = one_error_line(cli("run", str(SCENARIOS / "bench-day.toml"), "--out", str(blocker / "x")))
    assert line.endswith(
        f"cannot write to {blocker / 'x'}: {blocker} is a file, not a folder"
    )  # bench-day would take a while to run first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_failed_write_leaves_the_out_folder_as_it_was(tmp_path):
    out = tmp_path / "part"
    (out / "firings.parquet").mkdir(parents=True)  # a name an output file needs
    one_error_line(
        cli("run", str(SCENARIOS / "default.toml"), "--until", "20", "--out", str(out)),
        f"cannot write to {out}",
        "firings.parquet",
    )
    assert [p.name for p in out.iterdir()] == ["firings.parquet"]  # no report.json, no tables
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part"]  # and no staging folder beside it
    (out / "firings.parquet").rmdir()
    done = cli("run", str(SCENARIOS / "default.toml"), "--until", "20", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert {"report.json", "firings.parquet", "executions.parquet"} <= {p.name for p in out.iterdir()}


def test_an_unreachable_scheduler_makes_no_output_folder(tmp_path):
    out = tmp_path / "sw"
    one_error_line(
        cli(
            "sweep",
            str(SCENARIOS / "sweep.toml"),
            "--grid",
            "reactor_poll_interval=1",
            "--until",
            "10",
            "--scheduler",
            "tcp://127.0.0.1:1",
            "--out",
            str(out),
        ),
        "scheduler",
    )
    assert not out.exists()


def test_run_refuses_an_out_folder_holding_a_report_it_did_not_write(tmp_path):
    """A folder fanoutsim did not fill (no list of its outputs) that holds a
    report.json: refused before the run, the file untouched; a folder a run
    filled is written over as before."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.json").write_text("my own notes")
    line = one_error_line(cli("run", str(SCENARIOS / "bench-day.toml"), "--out", str(out)))
    assert line.endswith(
        f"cannot write to {out}: it holds a report.json fanoutsim did not write there "
        "(no .fanoutsim-outputs.json); give another --out, or move that file away"
    )
    assert (out / "report.json").read_text() == "my own notes" and sorted(p.name for p in out.iterdir()) == [
        "report.json"
    ]
    (out / "report.json").unlink()
    ran = cli("run", str(SCENARIOS / "default.toml"), "--until", "5", "--out", str(out))
    assert ran.returncode == 0, ran.stderr
    again = cli("run", str(SCENARIOS / "default.toml"), "--until", "5", "--out", str(out))  # its own files: replaced
    assert again.returncode == 0, again.stderr


def test_writing_a_runs_files_refuses_to_replace_a_file_no_run_wrote(tmp_path):
    """Any output's name, not only report.json: a file of that name that no run
    listed as its own is refused at the write, naming it, and nothing moves in."""
    from fanoutsim.cli import full_report, write_outputs

    sim = fs.Simulation(seed=0)
    sim.runner.register_workflow("w")
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.fire("r", {})
    sim.run(until=5)
    report, checked = full_report(sim, "tiny", None)
    out = tmp_path / "theirs"
    out.mkdir()
    names = [p.name for p in write_outputs(sim, report, tmp_path / "probe", checked=checked)]
    table = next(n for n in names if n.endswith(".parquet"))
    (out / table).write_bytes(b"their data")
    with pytest.raises(FileExistsError, match="fanoutsim did not write there") as raised:
        write_outputs(sim, report, out, checked=checked)
    assert raised.value.filename == str(out / table)
    assert sorted(p.name for p in out.iterdir()) == [table] and (out / table).read_bytes() == b"their data"
