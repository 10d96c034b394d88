"""``fanoutsim status --store postgresql://...`` tells which role processes
serve the database — each one's role, pid and last heartbeat — and, once they
stopped, the last one's pid and when it stopped (it said ``"running": false``,
its own pid and ``"db": null`` while roles worked)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from clitools import ENV, cli
from conftest import wait_for

SCENARIO = """
name = "roles"
[run]
until = 30.0
[config]
reactor_poll_interval = 0.05
executor_poll_interval = 0.05
watermark = "fired_at_id"

[[workflows]]
name = "audit"
duration = 0.001

[[subscriptions]]
reactor = "pricing_reactor"
workflow = "audit"
"""


def _serve(url: str, scenario: str, role: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--store", url, "--scenario", scenario, "--role", role],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    line = proc.stderr.readline()
    if not line.startswith("serving"):
        proc.wait(30)
        pytest.fail(f"serve --role {role} did not start: {line}{proc.stderr.read()}")
    return proc


def _status(url: str) -> tuple[dict, str]:
    done = cli("status", "--store", url)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_status_lists_the_role_processes_with_their_pids_and_heartbeats(pg_url, tmp_path):
    url = pg_url()
    scenario = tmp_path / "roles.toml"
    scenario.write_text(SCENARIO)
    procs = {role: _serve(url, str(scenario), role) for role in ("poller", "executor")}
    try:

        def both_up() -> bool:
            status, _ = _status(url)
            return {(s["role"], s["pid"]) for s in status["servers"] if s["up"]} == {
                (role, p.pid) for role, p in procs.items()
            }

        assert wait_for(both_up, timeout=60)
        status, _ = _status(url)
        assert status["running"] is True and status["pid"] in {p.pid for p in procs.values()}
        assert status["db"] is not None and "password" not in status["db"]
        assert all(s["heartbeat_at"] and s["stopped_at"] is None for s in status["servers"])
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            assert proc.wait(60) == 0
    status, err = _status(url)
    assert status["running"] is False and not any(s["up"] for s in status["servers"])
    assert status["pid"] in {p.pid for p in procs.values()} and status["stopped_at"]
    assert f"stopped at {status['stopped_at']}" in err
