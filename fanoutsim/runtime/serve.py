"""``fanoutsim serve``: a long-running runner process that owns a DuckDB file.

DuckDB lets one process hold a database file at a time, so the serving
process is the only one that opens it. Everyone else reaches the run through
a small HTTP control endpoint on the loopback interface, whose address the
server writes next to the database (``FILE.serve.json``: pid, port and token,
readable by the file's owner only — mode 0600):

``POST /fire``    ``{"reactor": ..., "payload": {...}, "tenant": ...}`` -> ``{"firing": id}``
``GET /status``   counts, watermarks and metrics as JSON (what a live view polls)

Every request must carry the token, ``Authorization: token <token>`` (as
Jupyter does): any local process can reach the port, only the owner can read
the token. A request without it, or with a wrong one, gets 403 and changes
nothing. A body larger than ``max_body_bytes`` (``fanoutsim serve
--max-body-bytes``, 1 MiB by default) gets 413 and is not stored.

``fanoutsim fire --db FILE`` uses that endpoint when a server holds the file
and opens the file itself when none does. SIGTERM and SIGINT stop the server
gracefully (the pass in hand finishes, a ``stop`` row is logged); SIGKILL is
a crash, and the next ``serve`` on the same file resumes from its tables.
"""
from __future__ import annotations

import hmac
import json
import os
import secrets
import signal
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..store.duckdb import StoreError
from ..timeutil import from_us
from .realtime import Realtime

MAX_BODY_BYTES = 1 << 20  # 1 MiB: a firing's payload is a few hundred bytes
_DRAIN_LIMIT = 64 << 20  # read and drop at most this much of a refused body (so the client sees 413)


def sidecar(db: str) -> Path:
    return Path(f"{db}.serve.json")


def write_sidecar(db: str, info: dict) -> Path:
    """Write ``FILE.serve.json`` readable and writable by its owner only (0600),
    from its first byte: written to a private temporary file, then renamed."""
    path = sidecar(db)
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, json.dumps(info).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def server_info(db: str) -> tuple[str, str] | None:
    """``("http://127.0.0.1:PORT", token)`` of the server holding ``db``, if one is alive."""
    path = sidecar(db)
    try:
        info = json.loads(path.read_text())
        if not _alive(int(info.get("pid", -1))):
            return None
        return f"http://127.0.0.1:{int(info['port'])}", str(info.get("token", ""))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def server_address(db: str) -> str | None:
    """``http://127.0.0.1:PORT`` of the server holding ``db``, if one is alive."""
    found = server_info(db)
    return None if found is None else found[0]


def _existing(db: str) -> None:
    """Reading a run needs its file: a typo must not create an empty database."""
    if not os.path.exists(db):
        raise StoreError(f"{db}: no such file (start a run with 'fanoutsim serve --db {db}')")


def status_of(rt: Realtime) -> dict[str, Any]:
    subs = rt.store.rows("reactor_subscriptions")
    now = rt.now_us()
    with rt.store.transaction() as tx:
        retained = tx.count_firings()
    executions = rt.store.rows("workflow_executions")
    by_status: dict[str, int] = {}
    for row in executions:
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    return {
        "pid": os.getpid(), "db": getattr(rt.store, "path", None), "now": from_us(now).isoformat(),
        "running": rt.running, "firings_retained": retained, "executions": by_status,
        "watermark_lag_s": {f"{s['reactor_name']}->{s['workflow_name']}@{s['tenant_id']}":
                            (None if s["last_seen_fired_at"] is None else (now - s["last_seen_fired_at"]) / 1e6)
                            for s in subs},
        "metrics": rt.metrics(),
    }


def _handler(rt: Realtime, token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES):
    class Handler(BaseHTTPRequestHandler):
        timeout = 30  # seconds a connection may stall mid-request

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if token is None:
                return True
            given = self.headers.get("Authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() == "token" and hmac.compare_digest(value.strip().encode(), token.encode()):
                return True
            self.close_connection = True
            self._reply(403, {"error": "missing or wrong token: send 'Authorization: token <token>' with "
                                       "the token in FILE.serve.json (readable by the server's owner only)"})
            return False

        def _body(self) -> bytes | None:
            """The request body, or None after a 400 or 413 reply."""
            try:
                length = int(self.headers.get("Content-Length", 0))
                if length < 0:
                    raise ValueError
            except ValueError:
                self.close_connection = True
                self._reply(400, {"error": "Content-Length is not a number of bytes"})
                return None
            if length > max_body_bytes:
                self.close_connection = True
                left = length if length <= _DRAIN_LIMIT else 0  # drop it unread, so the client reads 413
                while left > 0:
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    left -= len(chunk)
                self._reply(413, {"error": f"request body of {length} bytes is over this server's limit of "
                                           f"{max_body_bytes} bytes (fanoutsim serve --max-body-bytes)"})
                return None
            return self.rfile.read(length)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if not self._authorized():
                return
            if self.path == "/status":
                self._reply(200, status_of(rt))
            else:
                self._reply(404, {"error": f"no such endpoint {self.path}; try /status or POST /fire"})

        def do_POST(self):  # noqa: N802
            if not self._authorized():
                return
            if self.path != "/fire":
                self._reply(404, {"error": f"no such endpoint {self.path}; try POST /fire"})
                return
            raw = self._body()
            if raw is None:
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object: reactor, payload, tenant")
                firing = rt.fire(body["reactor"], body.get("payload", {}), body.get("tenant", "public"))
            except KeyError as exc:
                self._reply(400, {"error": f"missing field {exc}"})
            except (TypeError, ValueError, RuntimeError) as exc:
                self._reply(400, {"error": str(exc)})
            else:
                self._reply(200, {"firing": firing})

        def log_message(self, *args) -> None:  # quiet
            pass

    return Handler


def apply_scenario(rt: Realtime, scenario, *, workloads: bool = True) -> None:
    """Register the scenario's workflows, upsert its subscriptions and add its workloads."""
    for wf in scenario.workflows:
        d = wf.duration
        rt.runner.register_workflow(wf.name, duration=d.a if d.law == "fixed" else d)
    for sub in scenario.subscriptions:
        rt.runner.subscribe_workflow_to_reactor(sub.reactor, sub.workflow, sub.tenant, when=sub.when)
    if workloads:
        for w in scenario.workloads:
            rt.add_workload(w.reactor, w.rate, w.tenant, payload=w.payload, start=w.start, stop=w.stop)


def serve(db: str, scenario=None, *, rate: float | None = None, reactor: str = "pricing_reactor",
          port: int = 0, ready=None, stop_event: threading.Event | None = None,
          max_body_bytes: int = MAX_BODY_BYTES) -> int:
    """Run until SIGTERM/SIGINT (or ``stop_event``); returns an exit status.

    ``ready(port)`` is called once the file is open, the control endpoint
    listens and the loops run. Requests need the token written to
    ``FILE.serve.json``; bodies over ``max_body_bytes`` get 413."""
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be a positive number of bytes, got {max_body_bytes!r}")
    config = scenario.config if scenario is not None else None
    rt = Realtime(config, store=db, faults=getattr(scenario, "faults", None))
    try:
        if scenario is not None:
            apply_scenario(rt, scenario, workloads=rate is None)
        if rate:
            if scenario is None:
                rt.runner.subscribe_workflow_to_reactor(reactor, "audit")
            rt.add_workload(reactor, rate)
        token = secrets.token_hex(32)
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(rt, token, max_body_bytes))
        write_sidecar(db, {"pid": os.getpid(), "port": server.server_address[1], "token": token})
        threading.Thread(target=server.serve_forever, name="fanoutsim-control", daemon=True).start()
        stop = stop_event or threading.Event()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
        rt.start()
        if ready is not None:
            ready(server.server_address[1])
        while not stop.wait(0.2):
            pass
        server.shutdown()
        return 0
    finally:
        rt.close()
        try:
            if sidecar(db).exists() and json.loads(sidecar(db).read_text()).get("pid") == os.getpid():
                sidecar(db).unlink()
        except (OSError, ValueError):
            pass


def fire(db: str, reactor: str, payload: dict, tenant: str = "public") -> str:
    """Fire into ``db``: through its server if one holds it, else directly."""
    found = server_info(db)
    if found is not None:
        address, token = found
        request = urllib.request.Request(f"{address}/fire", method="POST",
                                         data=json.dumps({"reactor": reactor, "payload": payload,
                                                          "tenant": tenant}).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read())["firing"]
        except urllib.error.HTTPError as exc:
            raise ValueError(_error_of(exc)) from None
    _existing(db)
    rt = Realtime(store=db)
    try:
        return rt.fire(reactor, payload, tenant)
    finally:
        rt.close()


def status(db: str) -> dict[str, Any]:
    """The status of the run in ``db``: from its server, or read from the file."""
    found = server_info(db)
    if found is not None:
        address, token = found
        request = urllib.request.Request(f"{address}/status", headers={"Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(_error_of(exc)) from None
    _existing(db)
    rt = Realtime(store=db)
    try:
        return status_of(rt)
    finally:
        rt.close()


def _error_of(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read()).get("error", str(exc))
    except (ValueError, AttributeError):
        return str(exc)
