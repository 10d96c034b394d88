"""fanoutsim serve / write / status for the outbox and leases designs, in a subprocess, for real."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fanoutsim as fs

ROOT = Path(__file__).resolve().parents[1]
OUTBOX = str(ROOT / "fanoutsim" / "examples" / "outbox.toml")
LEASES = str(ROOT / "fanoutsim" / "examples" / "leases.toml")
REALTIME = str(ROOT / "fanoutsim" / "examples" / "realtime.toml")


def wait_for(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def serve(db, *args) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--db", str(db), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}: {proc.stderr.read()}")
        try:
            return json.loads(Path(f"{db}.serve.json").read_text())["pid"] == proc.pid
        except (OSError, ValueError):
            return False

    assert wait_for(ready, timeout=60)
    return proc


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fanoutsim", *args], capture_output=True, text=True, timeout=60)


def status(db) -> dict:
    out = cli("status", "--db", str(db))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, proc.stderr.read()


def test_serve_an_outbox_scenario_commit_through_the_cli_and_stop_it(tmp_path):
    db = tmp_path / "outbox.duckdb"
    proc = serve(db, "--scenario", OUTBOX, "--rate", "0")
    try:
        assert json.loads(Path(f"{db}.serve.json").read_text())["design"] == "outbox"
        first = cli("write", "--db", str(db), "page=p1", "body=hello")
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout) == {"seq": 1}
        assert json.loads(cli("write", "--db", str(db), "page=p2", "due_in:=0.5").stdout) == {"seq": 2}
        # the scenario's four consumers handle both rows: their cursors reach seq 2
        assert wait_for(lambda: {c["cursor"] for c in status(db)["consumers"].values()} == {2})
        st = status(db)
        assert st["design"] == "outbox" and st["running"] is True and st["pid"] == proc.pid
        assert set(st["consumers"]) == {"indexer", "search", "analytics", "triage"}
        assert st["rows"] == 2 and st["head"] == 2
        bad = cli("write", "--db", str(db), "pag=p3")
        assert bad.returncode == 2 and "unknown field 'pag' of a commit; fields: page, body" in bad.stderr
        fired = cli("fire", "--db", str(db), "--reactor", "r")
        assert fired.returncode == 2 and "holds a run of the outbox design, not the reactor design" in fired.stderr
    finally:
        stop(proc)
    assert not Path(f"{db}.serve.json").exists()
    # no server: status reads the file, and a write opens it
    st = status(db)
    assert st["design"] == "outbox" and st["running"] is False and st["rows"] == 2
    assert json.loads(cli("write", "--db", str(db), "page=p3").stdout) == {"seq": 3}
    assert status(db)["head"] == 3


def test_serve_a_leases_scenario_publish_through_the_cli_and_stop_it(tmp_path):
    db = tmp_path / "leases.duckdb"
    proc = serve(db, "--scenario", LEASES, "--rate", "0")
    try:
        out = cli("write", "--db", str(db), "partition=p0", 'payload:={"ticket": 7}')
        assert out.returncode == 0, out.stderr
        event = json.loads(out.stdout)["event"]
        cli("write", "--db", str(db), "partition=p1", "kind=ticket.changed")
        # indexer, enricher and archiver run from the start (audit joins at 300 s): each acks both
        joined = ("indexer", "enricher", "archiver")
        assert wait_for(
            lambda: all(status(db)["consumers"].get(c, {}).get("checkpoints") == {"p0": 1, "p1": 2} for c in joined)
        )
        st = status(db)
        assert st["design"] == "leases" and st["running"] is True and st["events"] == 2
        assert set(st["consumers"]) == set(joined)
        assert event.startswith("1:")
        bad = cli("write", "--db", str(db), "kind=x")
        assert bad.returncode == 2 and "a publish needs the field 'partition'" in bad.stderr
    finally:
        stop(proc)
    assert not Path(f"{db}.serve.json").exists()
    st = status(db)
    assert st["design"] == "leases" and st["running"] is False and st["events"] == 2


def test_a_file_of_one_design_is_not_served_or_written_as_another(tmp_path):
    db = tmp_path / "run.duckdb"
    proc = serve(db, "--scenario", OUTBOX, "--rate", "0")
    stop(proc)
    refused = cli("serve", "--db", str(db), "--scenario", LEASES)
    assert refused.returncode == 2
    assert "holds a run of the outbox design; the scenario is of the leases design" in refused.stderr
    wrong = cli("write", "--db", str(db), "--design", "leases", "partition=p0")
    assert wrong.returncode == 2 and "holds a run of the outbox design, not the leases design" in wrong.stderr
    assert status(db)["rows"] == 0


def test_a_file_that_records_no_design_needs_one_named(tmp_path):
    db = str(tmp_path / "made.duckdb")
    with fs.LeaseRealtime(store=db) as rt:  # made from Python, not by serve: it records its design too
        rt.publish("p0")
    assert json.loads(cli("status", "--db", db).stdout)["design"] == "leases"
    import duckdb

    with duckdb.connect(db) as con:  # as an older fanoutsim left it: no design recorded
        con.execute("DELETE FROM fanoutsim_meta WHERE key = 'design'")
    bare = cli("status", "--db", db)
    assert bare.returncode == 2 and "records no design" in bare.stderr and "--design" in bare.stderr
    named = cli("status", "--db", db, "--design", "leases")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["events"] == 1
    missing = cli("status", "--db", str(tmp_path / "nope.duckdb"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["page"], "'page' is not FIELD=TEXT or FIELD:=JSON"),
        (["due_in:=soon"], "the value after := is not JSON"),
    ],
)
def test_write_fields_are_checked(tmp_path, capsys, args, message):
    from fanoutsim.cli import main

    db = tmp_path / "x.duckdb"
    assert main(["write", "--db", str(db), *args]) == 2
    assert message in capsys.readouterr().err
    assert not db.exists()


def _http(address: str, path: str, *, token: str | None = None, body: bytes | None = None):
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    req = urllib.request.Request(
        f"{address}{path}", data=body, headers=headers, method="POST" if body is not None else "GET"
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(
    "scenario, write, count",
    [
        (OUTBOX, {"page": "p1", "body": "hello"}, "rows"),
        (LEASES, {"partition": "p0", "payload": {"n": 1}}, "events"),
    ],
)
def test_every_design_s_server_needs_its_token_and_caps_bodies(tmp_path, scenario, write, count):
    """The token and the body cap live in the design-free endpoint: an outbox or
    leases server refuses a request without the token (403, nothing written) and a
    body over --max-body-bytes (413, nothing written), and write/status send the token."""
    import os
    import stat

    db = tmp_path / "d.duckdb"
    proc = serve(db, "--scenario", scenario, "--rate", "0", "--max-body-bytes", "300")
    try:
        side = Path(f"{db}.serve.json")
        assert stat.S_IMODE(side.stat().st_mode) == 0o600
        info = json.loads(side.read_text())
        address, token = f"http://127.0.0.1:{info['port']}", info["token"]
        assert len(token) == 64
        before = status(db)[count]  # through the CLI: sends the token
        body = json.dumps(write).encode()
        for wrong in (None, "0" * 64):
            assert _http(address, "/status", token=wrong)[0] == 403
            code, reply = _http(address, "/write", token=wrong, body=body)
            assert code == 403 and "token" in reply["error"]
        big = json.dumps({**write, "body" if "page" in write else "payload": "x" * 1000}).encode()
        code, reply = _http(address, "/write", token=token, body=big)
        assert code == 413 and "300 bytes" in reply["error"] and "--max-body-bytes" in reply["error"]
        assert status(db)[count] == before  # nothing written by the refused requests
        done = cli("write", "--db", str(db), *(f"{k}:={json.dumps(v)}" for k, v in write.items()))
        assert done.returncode == 0, done.stderr
        assert status(db)[count] == before + 1
        assert os.path.exists(side)
    finally:
        stop(proc)
