"""SIGTERM stops a command as Ctrl-C does: the same clean-up (``run`` removes
the store file it created and stops its private PostgreSQL; ``sweep`` keeps
its finished runs and leaves no worker process behind), one line on stderr,
exit status 143 (128 + SIGTERM). ``serve`` keeps its own graceful stop."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from clitools import ENV
from conftest import wait_for

from fanoutsim import cli

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", *args, "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def _terminate(proc: subprocess.Popen) -> tuple[str, str]:
    """SIGTERM to the command's process alone (as ``kill PID`` or a supervisor
    sends it), then its output once it has exited."""
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def _alive(pid: int) -> bool:
    """The process runs (a zombie, its exit not yet collected by init, does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigterm_during_run_removes_the_store_it_created(tmp_path):
    store = tmp_path / "bench.duckdb"
    proc = _start("run", str(SCENARIOS / "bench-day.toml"), "--store", str(store), "--out", str(tmp_path / "out"))
    assert wait_for(lambda: store.exists() or proc.poll() is not None, timeout=60.0)
    time.sleep(1.0)  # into the run
    _, err = _terminate(proc)
    assert proc.returncode == cli.TERMINATED == 143, (proc.returncode, err)
    assert "Traceback" not in err and err.splitlines() == [
        f"fanoutsim: interrupted; removed {store}, which it had created"
    ]
    assert not store.exists() and not Path(f"{store}.wal").exists()
    assert not (tmp_path / "out").exists()


def test_sigterm_during_a_sweep_keeps_its_finished_runs_and_no_worker(tmp_path):
    import psutil

    out = tmp_path / "pt"
    args = ["sweep", str(SCENARIOS / "sweep.toml"), "--grid", "reactor_poll_interval=0.5,1,2,4", "--seeds", "0-9"]
    proc = _start(*args, "--workers", "2", "--until", "600", "--out", str(out))
    cache = out / "cache.duckdb"
    workers: list = []

    def some_finished() -> bool:  # the cache is written every few runs: the first rows are in
        workers.extend(c for c in psutil.Process(proc.pid).children(recursive=True) if c not in workers)
        return cache.exists() or proc.poll() is not None

    assert wait_for(some_finished, timeout=120.0)
    workers.extend(c for c in psutil.Process(proc.pid).children(recursive=True) if c not in workers)
    assert workers  # the pool, its fork server and its resource tracker
    began = time.monotonic()
    _, err = _terminate(proc)
    assert proc.returncode == 143, (proc.returncode, err)
    assert time.monotonic() - began < 30  # the runs under way are ended, not waited for
    assert "Traceback" not in err and err.splitlines() == [
        f"fanoutsim: interrupted; the finished runs are kept in {cache}"
    ]
    assert wait_for(lambda: not any(_alive(w.pid) for w in workers), timeout=10.0), [
        w.pid for w in workers if _alive(w.pid)
    ]
    with duckdb.connect(str(cache), read_only=True) as con:
        (table,) = con.execute("select table_name from information_schema.tables").fetchone()
        kept = con.execute(f"select count(*) from {table}").fetchone()[0]
    assert 0 < kept < 40


def test_sigterm_during_a_run_over_a_private_postgres_stops_it_and_removes_its_folder(tmp_path):
    pytest.importorskip("pgserver")
    pytest.importorskip("psutil")
    proc = _start("run", str(SCENARIOS / "default.toml"), "--store", "postgres", "--out", str(tmp_path / "out"))
    lines = []
    watchdog = threading.Timer(120.0, proc.kill)  # a child that hangs silent ends the read (EOF), not the suite
    watchdog.start()
    try:
        for line in proc.stderr:  # "starting a private PostgreSQL (pgserver) in FOLDER ...", then "... ready in"
            lines.append(line)
            if "ready in" in line or len(lines) > 5:
                break
    finally:
        watchdog.cancel()
    started = [m for line in lines if (m := re.search(r"private PostgreSQL \(pgserver\) in (\S+) \.\.\.", line))]
    if not started or "ready in" not in lines[-1]:
        proc.kill()
        pytest.fail(f"no private PostgreSQL started: {lines}")
    folder = Path(started[0].group(1))
    postmaster = int((folder / "postmaster.pid").read_text().split()[0])
    time.sleep(1.0)  # into the run
    out, err = _terminate(proc)
    assert proc.returncode == 143, (proc.returncode, lines, err)
    assert "fanoutsim: interrupted" in err and "Traceback" not in err
    assert wait_for(lambda: not _alive(postmaster), timeout=30.0)
    assert not folder.exists()


def _terminated_in_process(args) -> int:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)  # the handler interrupts this
    return 0  # pragma: no cover


def test_in_process_sigterm_is_an_interrupt_with_status_143_and_the_handler_goes_back(monkeypatch, capsys):
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setitem(cli._HELPER_COMMANDS, "schema", _terminated_in_process)
    assert cli.main(["schema", "reactor"]) == 143
    assert capsys.readouterr().err == "fanoutsim: interrupted\n"
    assert signal.getsignal(signal.SIGTERM) is before


def test_serve_keeps_its_own_sigterm_handling(monkeypatch):
    """``serve`` puts in its own stop (a graceful one): main adds nothing around it."""
    seen = []

    def serve(args) -> int:
        seen.append(signal.getsignal(signal.SIGTERM))
        return 0

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli, "_serve", serve)
    assert cli.main(["serve", "--db", "x.duckdb"]) == 0
    assert seen == [before]


def test_an_interrupted_local_pool_ends_its_running_runs_rather_than_wait_for_them():
    """What a sweep does on Ctrl-C or SIGTERM: a run under way in a worker is
    ended (its row would not be kept anyway), and the pool shuts down at once."""
    from concurrent.futures.process import BrokenProcessPool

    import psutil

    sweeps = importlib.import_module("fanoutsim.sweep")
    pool = sweeps._pool(1)
    running = pool.submit(time.sleep, 120)
    queued = pool.submit(time.sleep, 120)
    assert wait_for(lambda: running.running(), timeout=60.0)
    workers = [p.pid for p in pool._processes.values()]
    began = time.monotonic()
    sweeps._end_running(pool, [running, queued])
    pool.shutdown(wait=True)
    assert time.monotonic() - began < 30
    assert isinstance(running.exception(timeout=0), BrokenProcessPool)
    assert workers and not any(_alive(pid) for pid in workers), [psutil.Process(p).status() for p in workers]
