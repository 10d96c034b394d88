"""``fanoutsim serve``: a long-running runner process that owns a DuckDB file.

DuckDB lets one process hold a database file at a time, so the serving
process is the only one that opens it. Everyone else reaches the run through
a small HTTP control endpoint on the loopback interface, whose address the
server writes next to the database (``FILE.serve.json``: pid and port):

``POST /fire``    ``{"reactor": ..., "payload": {...}, "tenant": ...}`` -> ``{"firing": id}``
``GET /status``   counts, watermarks and metrics as JSON (what a live view polls)

``fanoutsim fire --db FILE`` uses that endpoint when a server holds the file
and opens the file itself when none does. SIGTERM and SIGINT stop the server
gracefully (the pass in hand finishes, a ``stop`` row is logged); SIGKILL is
a crash, and the next ``serve`` on the same file resumes from its tables.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fanoutsim.kernel.timeutil import from_us
from fanoutsim.designs.reactor.realtime import Realtime


def sidecar(db: str) -> Path:
    return Path(f"{db}.serve.json")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def server_address(db: str) -> str | None:
    """``http://127.0.0.1:PORT`` of the server holding ``db``, if one is alive."""
    path = sidecar(db)
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not _alive(int(info.get("pid", -1))):
        return None
    return f"http://127.0.0.1:{int(info['port'])}"


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


def _handler(rt: Realtime):
    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/status":
                self._reply(200, status_of(rt))
            else:
                self._reply(404, {"error": f"no such endpoint {self.path}; try /status or POST /fire"})

        def do_POST(self):  # noqa: N802
            if self.path != "/fire":
                self._reply(404, {"error": f"no such endpoint {self.path}; try POST /fire"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
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
          port: int = 0, ready=None, stop_event: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or ``stop_event``); returns an exit status."""
    config = scenario.config if scenario is not None else None
    rt = Realtime(config, store=db, faults=getattr(scenario, "faults", None))
    try:
        if scenario is not None:
            apply_scenario(rt, scenario, workloads=rate is None)
        if rate:
            if scenario is None:
                rt.runner.subscribe_workflow_to_reactor(reactor, "audit")
            rt.add_workload(reactor, rate)
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(rt))
        sidecar(db).write_text(json.dumps({"pid": os.getpid(), "port": server.server_address[1]}))
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
    address = server_address(db)
    if address is not None:
        request = urllib.request.Request(f"{address}/fire", method="POST",
                                         data=json.dumps({"reactor": reactor, "payload": payload,
                                                          "tenant": tenant}).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read())["firing"]
        except urllib.error.HTTPError as exc:
            raise ValueError(json.loads(exc.read()).get("error", str(exc))) from None
    rt = Realtime(store=db)
    try:
        return rt.fire(reactor, payload, tenant)
    finally:
        rt.close()


def status(db: str) -> dict[str, Any]:
    """The status of the run in ``db``: from its server, or read from the file."""
    address = server_address(db)
    if address is not None:
        with urllib.request.urlopen(f"{address}/status", timeout=10) as reply:
            return json.loads(reply.read())
    rt = Realtime(store=db)
    try:
        return status_of(rt)
    finally:
        rt.close()
