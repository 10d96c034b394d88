"""The control endpoint of ``fanoutsim serve``: a token from an owner-only
file, and a cap on the size of a request."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import wait_for

from fanoutsim import serve as srv

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fanoutsim", *args], capture_output=True, text=True, timeout=60, env=ENV
    )


def _serving(db: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    """``fanoutsim serve --db DB --rate 0 [EXTRA...]``, once its sidecar names it; and the sidecar."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--db", str(db), "--rate", "0", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    side = Path(f"{db}.serve.json")
    try:
        assert wait_for(lambda: side.exists() and json.loads(side.read_text())["pid"] == proc.pid, timeout=60)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, side


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with a small body cap; yields (db, address, token)."""
    db = tmp_path_factory.mktemp("serve") / "ctl.duckdb"
    proc, side = _serving(db, "--max-body-bytes", "2000")
    try:
        info = json.loads(side.read_text())
        yield db, f"http://127.0.0.1:{info['port']}", info["token"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def request(url: str, *, token: str | None = None, body: bytes | None = None, scheme: str = "token"):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"{scheme} {token}"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def retained(address: str, token: str) -> int:
    code, body = request(f"{address}/status", token=token)
    assert code == 200
    return body["firings_retained"]


def test_the_sidecar_is_readable_by_its_owner_only(server):
    db, _, token = server
    side = Path(f"{db}.serve.json")
    assert stat.S_IMODE(side.stat().st_mode) == 0o600
    assert len(token) == 64 and int(token, 16) >= 0


@pytest.mark.parametrize("token, scheme", [(None, "token"), ("0" * 64, "token"), ("", "token"), ("right", "Bearer")])
def test_a_request_without_the_token_gets_403_and_changes_nothing(server, token, scheme):
    _, address, right = server
    token = right if token == "right" else token
    before = retained(address, right)
    fire = json.dumps({"reactor": "pricing_reactor", "payload": {"quote": {"price": 1}}}).encode()
    code, body = request(f"{address}/fire", token=token, body=fire, scheme=scheme)
    assert code == 403 and "token" in body["error"]
    code, body = request(f"{address}/status", token=token, scheme=scheme)
    assert code == 403 and "firings_retained" not in body
    assert retained(address, right) == before


def test_fire_and_status_send_the_token(server):
    db, address, token = server
    before = retained(address, token)
    done = cli("fire", "--db", str(db), "--reactor", "pricing_reactor", "--payload", '{"quote": {"price": 5}}')
    assert done.returncode == 0, done.stderr
    status = cli("status", "--db", str(db))
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["firings_retained"] == before + 1


def test_a_body_over_the_cap_gets_413_and_is_not_stored(server):
    db, address, token = server
    before = retained(address, token)
    big = json.dumps({"reactor": "pricing_reactor", "payload": {"x": "a" * (10 << 20)}}).encode()  # 10 MB
    code, body = request(f"{address}/fire", token=token, body=big)
    assert code == 413 and "2000 bytes" in body["error"] and "--max-body-bytes" in body["error"]
    # just over the cap, through the command: one line, exit 2
    done = cli("fire", "--db", str(db), "--reactor", "pricing_reactor", "--payload", json.dumps({"x": "a" * 2000}))
    assert done.returncode == 2 and "over this server's limit of 2000 bytes" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    # under it: stored
    code, body = request(
        f"{address}/fire",
        token=token,
        body=json.dumps({"reactor": "pricing_reactor", "payload": {"x": "a" * 1000}}).encode(),
    )
    assert code == 200 and body["firing"]
    assert retained(address, token) == before + 1


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"{not json", "Expecting"),
        (b'{"payload": {}}', "needs the field 'reactor'"),
        (b'{"reactor": "r", "payload": [1]}', "payload"),
        (b"[1, 2]", "JSON object"),
    ],
)
def test_bad_bodies_get_400(server, body, fragment):
    _, address, token = server
    code, reply = request(f"{address}/fire", token=token, body=body)
    assert code == 400 and fragment in reply["error"]


def test_the_cap_is_checked_in_the_library_too(tmp_path):
    with pytest.raises(ValueError, match="max_body_bytes"):
        srv.serve(str(tmp_path / "x.duckdb"), max_body_bytes=0)
    assert not (tmp_path / "x.duckdb").exists()
    assert srv.MAX_BODY_BYTES == 1 << 20


def test_the_sidecar_is_private_from_its_first_byte(tmp_path):
    old = os.umask(0)  # the most permissive umask: the file must still be 0600
    try:
        path = srv.write_sidecar(str(tmp_path / "a.duckdb"), {"pid": 1, "port": 2, "token": "t"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["token"] == "t"
    assert [p.name for p in tmp_path.iterdir()] == ["a.duckdb.serve.json"]


def test_the_live_view_reads_a_server_with_its_token(server):
    from fanoutsim.widgets import LiveView

    db, address, token = server
    snap = LiveView(str(db)).snapshot()
    assert snap["firings"] >= 0 and isinstance(snap["executions"], dict)


def test_a_signal_right_after_the_sidecar_appears_stops_the_server_cleanly(tmp_path, monkeypatch):
    """A caller may signal as soon as FILE.serve.json exists: the handlers must already be in."""
    from fanoutsim.kernel.runtime.control import ControlServer

    start, seen, stop = ControlServer.start, {}, threading.Event()

    def start_then_signal(self):
        started = start(self)
        seen["handler"] = signal.getsignal(signal.SIGTERM)
        if callable(seen["handler"]):
            signal.raise_signal(signal.SIGTERM)
        else:  # the default action would end this process: stop the server another way
            stop.set()
        return started

    monkeypatch.setattr(ControlServer, "start", start_then_signal)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert srv.serve(str(tmp_path / "s.duckdb"), rate=0, stop_event=stop) == 0
    assert callable(seen["handler"]) and stop.is_set()  # the signal set the stop
    # the caller's own handlers are back once it returns
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert not (tmp_path / "s.duckdb.serve.json").exists()


def test_a_runtime_thread_that_dies_of_a_bug_stops_serving_with_its_traceback(tmp_path, monkeypatch):
    """A loop that dies of an error nobody expected (a bug) must not leave a
    process that looks alive and does nothing: its traceback is printed, and
    serving stops with an error naming it."""
    from fanoutsim.designs.reactor.engine import ReactorEngine

    def prune_once(self, now):
        raise ZeroDivisionError("a bug in the pruner")

    monkeypatch.setattr(ReactorEngine, "prune_once", prune_once)
    told = []  # what Python's own hook would print (pytest's would keep it for a warning)
    monkeypatch.setattr(threading, "excepthook", lambda args: told.append((args.exc_type, args.thread.name)))
    before = threading.excepthook
    stop = threading.Event()
    timer = threading.Timer(60.0, stop.set)  # a stop that never came: this test fails, it does not hang
    timer.start()
    try:
        with pytest.raises(RuntimeError) as died:
            srv.serve(str(tmp_path / "s.duckdb"), rate=0, stop_event=stop)
    finally:
        timer.cancel()
    assert str(died.value).startswith(
        "a thread of the runtime failed (ZeroDivisionError: a bug in the pruner; its traceback is above); "
        "stopped serving"
    )
    assert told == [(ZeroDivisionError, "fanoutsim-reactor-prune")]  # its traceback, printed by the hook before
    assert threading.excepthook is before  # the caller's hook is back


@pytest.mark.parametrize("path, body", [("/nope", None), ("/write", None), ("/nope", b"{}")])
def test_an_unknown_endpoint_gets_404_naming_every_route_of_either_method(server, path, body):
    _, address, token = server
    code, reply = request(f"{address}{path}", token=token, body=body)
    assert code == 404
    method = "POST" if body is not None else "GET"
    assert reply["error"].startswith(f"no such endpoint {method} {path}; this server has ")
    for route in ("GET /status", "GET /metrics", "GET /explain", "POST /write", "POST /fire"):
        assert route in reply["error"], route


def test_a_sidecar_left_by_a_killed_server_whose_pid_lives_on_is_stale(tmp_path):
    """A server killed with -9 leaves its sidecar; its pid may live on (a zombie
    not yet reaped, or reused by another process). Nobody listens on its port,
    so the clients open the file themselves instead of failing to reach it."""
    db = tmp_path / "killed.duckdb"
    proc, side = _serving(db)
    try:
        assert cli("fire", "--db", str(db), "--reactor", "r", "--payload", "{}").returncode == 0
    finally:
        proc.kill()
        proc.wait()
    info = json.loads(side.read_text())
    side.write_text(json.dumps({**info, "pid": os.getpid()}))  # its pid reused: a process that lives, not a server
    from fanoutsim.kernel.runtime.control import server_info

    assert server_info(str(db)) is None
    status = cli("status", "--db", str(db))
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["running"] is False and json.loads(status.stdout)["firings_retained"] == 1
    fired = cli("fire", "--db", str(db), "--reactor", "r", "--payload", "{}")
    assert fired.returncode == 0, fired.stderr
