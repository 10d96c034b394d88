"""A kill -9 campaign against ``fanoutsim serve``, for real.

Start the server as a subprocess over one DuckDB file with a steady workload,
SIGKILL it at random moments, start it again each time; then let one last
server drain the backlog and stop it cleanly, and check the file with
:func:`fanoutsim.check_store`. The promise under test: no firing that was
durably logged is lost; duplicates are allowed, each lies across a crash, and
one crash re-delivers at most one batch per subscription.
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

from ..checker import check_store
from ..scenario import load_scenario
from .serve import sidecar


def _start(db: str, scenario: str, extra=()) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "fanoutsim", "serve", "--db", db, "--scenario", scenario, *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # ready once it has written its address
        try:
            if json.loads(sidecar(db).read_text()).get("pid") == proc.pid:
                return proc
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("serve did not become ready within 60 s")


def start_child(module: str, db: str, side: str, rate: float, drain: bool = False, extra=()) -> subprocess.Popen:
    """``python -m module serve DB SIDE RATE [--drain] [extra...]``, returned once it
    printed "ready" (the outbox and leases campaigns' children)."""
    cmd = [sys.executable, "-m", module, "serve", db, side, str(rate)] + (["--drain"] if drain else []) + list(extra)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "ready" once it runs; EOF if it died first
    if line.strip() != "ready":
        proc.wait(timeout=30)
        raise RuntimeError(f"{module} exited with {proc.returncode}: {proc.stderr.read()}")
    return proc


def run_child(rt, drained, *, drain: bool, drain_timeout: float) -> int:
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


def side_lines(side: str) -> list[str]:
    """The side file's complete, non-empty lines (a kill may cut the last one)."""
    try:
        with open(side) as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n")[:-1] if line.strip()]


def kill_at_random(start, kills: int, seed: int, up: tuple[float, float]) -> None:
    """``kills`` times: ``start()`` a child process, let it run for a seeded
    random time in ``up`` seconds, SIGKILL it (every campaign's first half)."""
    rng = random.Random(seed)
    for _ in range(kills):
        proc = start()
        time.sleep(rng.uniform(*up))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_or_kill(proc: subprocess.Popen, timeout: float) -> None:
    """Wait for a child to finish (a drain); kill it if it takes longer than ``timeout``."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kill9_campaign(db: str, scenario: str, *, kills: int = 10, seed: int = 0, up=(0.3, 1.5),
                   drain: float = 2.0) -> dict:
    """Run the campaign; returns its figures and the check report."""
    kill_at_random(lambda: _start(db, scenario), kills, seed, up)
    proc = _start(db, scenario, ["--rate", "0"])  # no new firings: drain the backlog
    time.sleep(drain)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    config = load_scenario(scenario).config
    report = check_store(db, config)
    dups = report.duplicates
    per_crash = dups.groupby(["crash_at", "subscription"]).size() if len(dups) else None
    return {
        "kills": kills,
        "crashes_seen": report.total["crashes"],
        "firings": report.total["expected"],
        "extra_deliveries": report.total["extra_deliveries"],
        "lost": report.total["lost"],
        "pending": report.total["pending"],
        "duplicate_causes": report.total["duplicate_causes"],
        "max_duplicates_per_crash_and_subscription": int(per_crash.max()) if per_crash is not None else 0,
        "batch_limit": config.reactor_poll_batch_limit,
        "clean_exit": proc.returncode == 0,
        "report": report,
    }


if __name__ == "__main__":  # python -m fanoutsim.runtime.crashtest DB SCENARIO [KILLS]
    db, scenario = sys.argv[1], sys.argv[2]
    out = kill9_campaign(db, scenario, kills=int(sys.argv[3]) if len(sys.argv) > 3 else 10)
    report = out.pop("report")
    print(json.dumps(out, indent=2))
    print(report)
