"""The kill -9 harness every design's campaign runs on, for real.

A campaign starts a child process that runs a design's wall-clock runtime over
one DuckDB file with a steady workload, SIGKILLs it at seeded random moments
and starts it again each time (:func:`kill_at_random`); then one last child,
with no new writes, drains the backlog and stops cleanly (:func:`campaign`).
The design then checks the file — and, where its consumer's effect lives
outside the database, a side file its child appended to — against its promise.

A child is either ``python -m fanoutsim serve`` (ready once the control
sidecar names it: :func:`serving`; over PostgreSQL once it says so:
:func:`says_serving`) or a design's own module (ready once it printed
"ready": :func:`start_child`, :func:`run_child`, :func:`main`).
The campaigns themselves live with their designs:
``python -m fanoutsim.designs.<design>.crashtest``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from fanoutsim.kernel.runtime.control import server_info

READY_TIMEOUT = 60.0  # seconds a child may take to start


def start_child(
    cmd: list[str], ready: Callable[[subprocess.Popen[bytes]], bool] | None = None, timeout: float = READY_TIMEOUT
) -> subprocess.Popen[Any]:
    """Start ``cmd`` and return it once it is ready: ``ready(proc)`` true (asked
    every 50 ms), or, without ``ready``, once it printed the line "ready"."""
    if ready is None:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = child.stdout, child.stderr
        assert out is not None and err is not None, "both piped"
        line = out.readline()  # "ready" once it runs; EOF if it died first
        if line.strip() != "ready":
            child.wait(timeout=30)
            raise RuntimeError(f"{' '.join(cmd[2:4])} exited with {child.returncode}: {err.read()}")
        return child
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None, "piped"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(proc):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(cmd[2:4])} exited with {proc.returncode}: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{' '.join(cmd[2:4])} did not become ready within {timeout:g} s")


def serving(db: str) -> Callable[[subprocess.Popen[bytes]], bool]:
    """Readiness of a ``fanoutsim serve`` child over ``db``: its sidecar names it."""

    def ready(proc: subprocess.Popen[bytes]) -> bool:
        info = server_info(db)
        return info is not None and info.get("pid") == proc.pid

    return ready


def says_serving(proc: subprocess.Popen[bytes]) -> bool:
    """Readiness of a ``fanoutsim serve`` child over PostgreSQL (no sidecar: the
    database is shared): its stderr's line "serving ..." (read as it comes)."""
    assert proc.stderr is not None, "started with stderr=PIPE"
    line = proc.stderr.readline()
    return line.startswith(b"serving")


def module_child(
    module: str, db: str, side: str, rate: float, drain: bool = False, extra: Sequence[str] = ()
) -> subprocess.Popen[Any]:
    """``python -m module serve DB SIDE RATE [--drain] [EXTRA...]``, returned once it
    printed "ready" (a child whose effect is a side file: see :func:`main`)."""
    cmd = [sys.executable, "-m", module, "serve", db, side, str(rate)] + (["--drain"] if drain else []) + list(extra)
    return start_child(cmd)


def run_child(rt: Any, drained: Callable[[], bool], *, drain: bool, drain_timeout: float) -> int:
    """The child's life: start ``rt``, say "ready", run until SIGTERM/SIGINT (or,
    with ``drain``, until ``drained()``); the exit status (1: not drained in time).
    The caller closes ``rt``."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    rt.start()
    print("ready", flush=True)
    deadline = time.monotonic() + drain_timeout
    while not stop.wait(0.1):
        if drain and (drained() or time.monotonic() > deadline):
            break
    return 0 if not drain or drained() else 1


def serve_sink(
    rt: Any,
    side: str,
    sink: Callable[[IO[str]], object],
    drained: Callable[[], bool],
    *,
    rate: float,
    drain: bool,
    drain_timeout: float,
    workload: Mapping[str, Any],
) -> int:
    """The child of a campaign whose effect is a side file: ``sink(fh)`` gives
    ``rt`` the reader whose effect appends to the open side file, then a
    workload of ``rate`` (none at 0: the last child only drains), then
    :func:`run_child`. ``rt`` and the side file are closed however it ends;
    the exit status."""
    fh = open(side, "a")
    try:
        sink(fh)
        if rate > 0:
            rt.add_workload(rate, **workload)
        return run_child(rt, drained, drain=drain, drain_timeout=drain_timeout)
    finally:
        rt.close()
        fh.close()


def side_lines(side: str) -> list[str]:
    """The side file's complete, non-empty lines (a kill may cut the last one)."""
    try:
        with open(side) as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n")[:-1] if line.strip()]


def kill_at_random(start: Callable[[], subprocess.Popen[Any]], kills: int, seed: int, up: tuple[float, float]) -> None:
    """``kills`` times: ``start()`` a child process, let it run for a seeded
    random time in ``up`` seconds, SIGKILL it."""
    rng = random.Random(seed)
    for _ in range(kills):
        proc = start()
        time.sleep(rng.uniform(*up))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Wait for a child to finish (a drain); kill it if it takes longer than ``timeout``."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_after(proc: subprocess.Popen[Any], seconds: float, timeout: float = 30.0) -> None:
    """Let a child run ``seconds`` more (a drain), then stop it cleanly (SIGTERM)."""
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    wait_or_kill(proc, timeout)


def campaign(
    start: Callable[[], subprocess.Popen[Any]],
    drain: Callable[[], subprocess.Popen[Any]],
    finish: Callable[[subprocess.Popen[Any]], None],
    *,
    kills: int,
    seed: int,
    up: tuple[float, float],
) -> subprocess.Popen[Any]:
    """Every kill -9 campaign: :func:`kill_at_random` over ``start``, then one
    last child from ``drain`` (no new writes), which ``finish`` waits out or
    stops; returns that child (its ``returncode`` says whether it stopped cleanly)."""
    kill_at_random(start, kills, seed, up)
    proc = drain()
    finish(proc)
    return proc


@dataclass
class Ending:
    """How a side-file campaign ended (:func:`sink_campaign`): its last child
    and the rows of the tables read from the file afterwards."""

    kills: int
    proc: subprocess.Popen[Any]
    rows: dict[str, list[dict[str, Any]]]

    def figures(self, **design: Any) -> dict[str, Any]:
        """The figures every campaign reports — kills, starts and clean stops (the
        ``runner_log``), whether the last child stopped cleanly — around the design's own."""
        log = [r["event"] for r in self.rows["runner_log"]]
        return {
            "kills": self.kills,
            "starts": log.count("start"),
            "clean_stops": log.count("stop"),
            **design,
            "clean_exit": self.proc.returncode == 0,
        }


def sink_campaign(
    start: Callable[[float, bool], subprocess.Popen[Any]],
    opener: Callable[[str], Any],
    db: str,
    tables: Sequence[str],
    *,
    rate: float,
    kills: int,
    seed: int,
    up: tuple[float, float],
    drain_timeout: float,
) -> Ending:
    """A campaign whose children are a design's own module (:func:`serve_sink`):
    ``start(rate, drain)`` each, the killed ones at ``rate``, the last with no
    new writes, waited out until it drains (killed past ``drain_timeout`` + 30
    s). Then the rows of ``tables`` and ``runner_log``, from ``opener(db)``."""
    proc = campaign(
        lambda: start(rate, False),
        lambda: start(0.0, True),
        lambda p: wait_or_kill(p, drain_timeout + 30),
        kills=kills,
        seed=seed,
        up=up,
    )
    store = opener(db)
    try:
        rows = {table: store.rows(table) for table in (*tables, "runner_log")}
    finally:
        store.close()
    return Ending(kills, proc, rows)


def main(
    argv: list[str], module: str, serve: Callable[..., int], kill9_campaign: Callable[..., dict[str, Any]]
) -> int | str:
    """The command line of a campaign whose child is its own module::

    python -m MODULE serve DB SIDE RATE [--drain]   (the child)
    python -m MODULE campaign DB [KILLS]            (prints the figures as JSON)
    """
    if len(argv) >= 4 and argv[0] == "serve":
        return serve(argv[1], argv[2], float(argv[3]), drain="--drain" in argv[4:])
    if len(argv) >= 2 and argv[0] == "campaign":
        print(json.dumps(kill9_campaign(argv[1], kills=int(argv[2]) if len(argv) > 2 else 10), indent=2))
        return 0
    return f"usage: python -m {module} (serve DB SIDE RATE [--drain] | campaign DB [KILLS])"


if __name__ == "__main__":
    sys.exit(
        "the kill -9 campaigns are each design's: python -m fanoutsim.designs.reactor.crashtest "
        "DB SCENARIO [KILLS], or python -m fanoutsim.designs.outbox.crashtest (or leases) campaign DB [KILLS]"
    )
