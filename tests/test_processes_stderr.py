"""A serving process's stderr is read for as long as it runs: a pipe nobody
reads fills at 64 KiB and then blocks the process at its next write (with
whatever lock it holds), so a process that warned often enough stopped
working, and did not stop when told to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fanoutsim.kernel.runtime import processes

# says it serves, then writes far more than a pipe holds, then ends
SERVING = "import sys; print('serving', file=sys.stderr, flush=True); "
LOUD = SERVING + "[print(f'line {n}', file=sys.stderr) for n in range(20000)]"


def test_a_process_that_writes_more_than_a_pipe_holds_runs_on_and_its_last_lines_are_kept():
    proc = subprocess.Popen([sys.executable, "-c", LOUD], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert processes._until_serving(proc) is None
        processes._drain(proc)
        assert proc.wait(timeout=60) == 0  # blocked for ever on a full pipe without the drain
        tail = processes.stderr_tail(proc)
    finally:
        processes.kill_all([proc])
    assert len(tail) == processes.SAID_LINES
    assert tail[-1] == "line 19999" and tail[0] == f"line {20000 - processes.SAID_LINES}"


def test_stop_all_names_a_failed_process_by_its_last_line():
    code = SERVING + "sys.stdin.read(); print('it went wrong', file=sys.stderr); sys.exit(3)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        assert processes._until_serving(proc) is None
        processes._drain(proc)
        assert proc.stdin is not None
        proc.stdin.close()  # its cue to fail; SIGTERM (stop_all's) finds it gone or going
        proc.wait(timeout=60)
        try:
            processes.stop_all([proc])
        except RuntimeError as exc:
            said = str(exc)
        else:
            said = ""
    finally:
        processes.kill_all([proc])
    assert said == f"pid {proc.pid} exited with 3: it went wrong"


STUCK = (
    "import faulthandler, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "faulthandler.register(signal.SIGUSR1, all_threads=True); "
    "print('serving', file=sys.stderr, flush=True); time.sleep(600)"
)


def test_stop_all_shows_where_a_process_that_will_not_stop_is_stuck():
    proc = subprocess.Popen([sys.executable, "-c", STUCK], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert processes._until_serving(proc) is None
        processes._drain(proc)
        with pytest.raises(RuntimeError) as stuck:
            processes.stop_all([proc], timeout=1.0)
    finally:
        processes.kill_all([proc])
    said = str(stuck.value)
    assert said.startswith(f"pid {proc.pid} did not stop within 1 s; its threads:\n"), said
    assert "(most recent call first)" in said and 'File "<string>", line 1' in said, said


def test_serve_prints_each_threads_stack_on_sigusr1_and_serves_on(tmp_path):
    from clitools import ENV, ROOT

    scenario = str(ROOT / "fanoutsim" / "examples" / "realtime.toml")
    cmd = [sys.executable, "-m", "fanoutsim", "serve", "--store", str(tmp_path / "run.duckdb"), "--scenario", scenario]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    try:
        assert processes._until_serving(proc) is None
        processes._drain(proc)
        stacks = processes._stacks(proc)
        processes.stop_all([proc])  # serving went on, and stops cleanly
    finally:
        processes.kill_all([proc])
    assert "(most recent call first)" in stacks and "_run_until_stopped" in stacks, stacks
    assert proc.returncode == 0
