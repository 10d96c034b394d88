"""The control endpoint of a serving process, whatever its design.

DuckDB lets one process hold a database file at a time, so a serving process
(``fanoutsim serve``) is the only one that opens its file. Everyone else
reaches it through a small HTTP endpoint on the loopback interface, whose
address it writes next to the database: ``FILE.serve.json`` holds its
``pid``, ``port``, ``design`` and ``token``, and is readable by the file's
owner only (mode 0600).

``GET /status``
    the design's status of the run, as JSON
``GET /metrics``
    the run's metrics in the Prometheus text format (the names
    and values of ``metrics()``, each family with the ``# HELP``
    and ``# TYPE`` the design's ``metrics`` give it), for a
    scraper: read-only, so it needs no token
``GET /explain?id=ID``
    one item's story (a firing, an outbox row, an event)
    as ``{"story": text}``
``POST /write``
    the design's write command (a firing, a commit, a publish):
    a JSON object of its fields -> a JSON answer
``POST /fire``
    the same as ``/write`` (the reactor's older name)

Every other request must carry the token, ``Authorization: token <token>``
(as Jupyter does): any local process can reach the port, only the owner can
read the token. A request without it, or with a wrong one, gets 403 and
changes nothing. A query string is parsed: a parameter the endpoint does not
take gets 400 naming it. A body larger than ``max_body_bytes`` (``fanoutsim serve
--max-body-bytes``, 1 MiB by default) gets 413 and is not stored.

This module knows no design: :class:`ControlServer` calls the two functions
it is given, and :func:`request` is the client side. Errors the write raises
as ValueError, TypeError, KeyError or RuntimeError come back as status 400
with ``{"error": message}``.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "sidecar",
    "write_sidecar",
    "server_info",
    "server_address",
    "ControlServer",
    "request",
    "server_request",
    "ControlError",
    "MAX_BODY_BYTES",
    "check_max_body_bytes",
    "process_alive",
]

#: The largest request body a server takes by default, in bytes (1 MiB); a larger one gets 413.
MAX_BODY_BYTES = 1 << 20  # 1 MiB: a firing's payload, a commit or a publish is a few hundred bytes
_DRAIN_LIMIT = 64 << 20  # read and drop at most this much of a refused body (so the client sees 413)


class ControlError(ValueError):
    """The server refused a request (its message), or could not be reached."""


def sidecar(db: str | os.PathLike[str]) -> Path:
    """``FILE.serve.json``: where a server of ``db`` writes its pid, port, design and token."""
    return Path(f"{os.fspath(db)}.serve.json")


def write_sidecar(db: str | os.PathLike[str], info: dict[str, Any]) -> Path:
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
    except (OverflowError, ValueError):
        return False
    return True


def process_alive(pid: int) -> bool:
    """Whether a process with this pid lives on this host."""
    return _alive(pid)


def server_info(db: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The sidecar of the server holding ``db`` (``pid``, ``port``, ``design``,
    ``token``), if one is alive; None otherwise (no file, a stale one, an unreadable one)."""
    try:
        info = json.loads(sidecar(db).read_text())
        pid, port = int(info["pid"]), int(info["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid <= 0 or not _alive(pid) or not _listening(port):
        return None
    return {**info, "pid": pid, "port": port}


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``. A server
    killed with -9 leaves its sidecar, and its pid may live on (a zombie not yet
    reaped, or reused by another process): nobody listening on its port says the
    sidecar is stale, so a client opens the file rather than failing to reach it.
    A server listens before it writes its sidecar. Only a refusal counts: a
    connection that times out on a loaded machine is taken for a live server."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return True


def server_address(db: str | os.PathLike[str]) -> str | None:
    """``http://127.0.0.1:PORT`` of the server holding ``db``, if one is alive."""
    info = server_info(db)
    return None if info is None else f"http://127.0.0.1:{info['port']}"


# endpoint -> the query parameters it takes
_GET: dict[str, tuple[str, ...]] = {"/status": (), "/metrics": (), "/explain": ("id",)}
_POST: dict[str, tuple[str, ...]] = {"/write": (), "/fire": ()}


class _Handler(BaseHTTPRequestHandler):
    """One request to the endpoint; :func:`_handler` binds the server's callbacks
    and limits as class attributes (``http.server`` makes a handler per request)."""

    token: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    callbacks: dict[str, Any] = {}  # get_status, post_write, get_metrics, explain
    metric_help: Mapping[str, Any] = {}  # name -> kernel.metrics.Help: the HELP and TYPE of /metrics
    timeout = 30  # seconds a connection may stall mid-request

    def _route(self, endpoints: dict[str, tuple[str, ...]]) -> tuple[str, dict[str, str]] | None:
        """The request's path and query parameters; None after a 404 or 400 reply."""
        parts = urllib.parse.urlsplit(self.path)
        if parts.path not in endpoints:
            method = "GET" if endpoints is _GET else "POST"
            # every route, of either method: a GET /write is answered with where POST /write is
            known = ", ".join(f"{m} {e}" for m, routes in (("GET", _GET), ("POST", _POST)) for e in routes)
            self._reply(404, {"error": f"no such endpoint {method} {parts.path}; this server has {known}"})
            return None
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        allowed = endpoints[parts.path]
        unknown = sorted(set(query) - set(allowed))
        if unknown:
            takes = f"it takes {', '.join(allowed)}" if allowed else "it takes none"
            self._reply(
                400,
                {
                    "error": f"unknown query parameter{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))} for {parts.path}; {takes}"
                },
            )
            return None
        return parts.path, {k: v[-1] for k, v in query.items()}

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        if self.token is None:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "token" and hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return True
        self.close_connection = True
        self._reply(
            403,
            {
                "error": "missing or wrong token: send 'Authorization: token <token>' with "
                "the token in FILE.serve.json (readable by the server's owner only)"
            },
        )
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
        if length > self.max_body_bytes:
            self.close_connection = True
            left = length if length <= _DRAIN_LIMIT else 0  # drop it unread, so the client reads 413
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
            self._reply(
                413,
                {
                    "error": f"request body of {length} bytes is over this server's limit of "
                    f"{self.max_body_bytes} bytes (fanoutsim serve --max-body-bytes)"
                },
            )
            return None
        return self.rfile.read(length)

    def _metrics(self) -> None:
        from fanoutsim.kernel.metrics import PROMETHEUS_CONTENT_TYPE, prometheus_text

        try:
            get_metrics = self.callbacks.get("get_metrics")
            data = prometheus_text(get_metrics() if get_metrics is not None else {}, self.metric_help)
        except (ValueError, TypeError, KeyError, RuntimeError) as exc:
            self._reply(500, {"error": str(exc)})
            return
        self.send_response(200)
        self.send_header("Content-Type", PROMETHEUS_CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _explain(self, query: dict[str, str]) -> None:
        explain = self.callbacks.get("explain")
        if explain is None:
            self._reply(404, {"error": "this server tells no stories"})
        elif not query.get("id"):
            self._reply(400, {"error": "GET /explain needs ?id=ID: a firing id, an outbox seq or an event id"})
        else:
            try:
                self._reply(200, {"story": explain(query["id"])})
            except KeyError as exc:
                self._reply(404, {"error": str(exc.args[0]) if exc.args else "no such item"})
            except (ValueError, TypeError, RuntimeError) as exc:
                self._reply(400, {"error": str(exc)})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        route = self._route(_GET)
        if route is None:
            return
        path, query = route
        if path == "/metrics":  # read-only, for a scraper: no token
            self._metrics()
            return
        if not self._authorized():
            return
        if path == "/explain":
            self._explain(query)
            return
        try:
            body = self.callbacks["get_status"]()
        except (ValueError, TypeError, KeyError, RuntimeError) as exc:
            self._reply(500, {"error": str(exc)})
        else:
            self._reply(200, body)

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        if self._route(_POST) is None:
            return
        raw = self._body()
        if raw is None:
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError(f"the request must be a JSON object of fields, got {type(body).__name__}")
            answer = self.callbacks["post_write"](body)
        except KeyError as exc:
            self._reply(400, {"error": f"missing field {exc}"})
        except (TypeError, ValueError, RuntimeError) as exc:
            self._reply(400, {"error": str(exc)})
        else:
            self._reply(200, answer)

    def log_message(self, *args: object) -> None:  # quiet
        pass


def _handler(
    get_status: Callable[[], dict[str, Any]],
    post_write: Callable[[dict[str, Any]], Any],
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    get_metrics: Callable[[], dict[str, Any]] | None = None,
    explain: Callable[[str], str] | None = None,
    metric_help: Mapping[str, Any] | None = None,
) -> type:
    """A handler class for one server: its callbacks, token, body limit and
    what its metrics mean."""
    callbacks = {"get_status": get_status, "post_write": post_write, "get_metrics": get_metrics, "explain": explain}
    members = {"token": token, "max_body_bytes": max_body_bytes, "callbacks": callbacks}
    return type("Handler", (_Handler,), {**members, "metric_help": dict(metric_help or {})})


class ControlServer:
    """The endpoint of one serving process: ``start()`` serves it in a thread and
    writes the sidecar of ``db`` (owner-only, with a fresh token every request
    must carry); ``close()`` stops it and removes the sidecar (if it is still
    this process's). Bodies over ``max_body_bytes`` get 413."""

    def __init__(
        self,
        db: str | os.PathLike[str],
        design: str,
        get_status: Callable[[], dict[str, Any]],
        post_write: Callable[[dict[str, Any]], Any],
        port: int = 0,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        get_metrics: Callable[[], dict[str, Any]] | None = None,
        explain: Callable[[str], str] | None = None,
        metric_help: Mapping[str, Any] | None = None,
    ) -> None:
        check_max_body_bytes(max_body_bytes)
        self.db = os.fspath(db)
        self.design = design
        self.token = secrets.token_hex(32)
        handler = _handler(get_status, post_write, self.token, max_body_bytes, get_metrics, explain, metric_help)
        self.http = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.port = self.http.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> ControlServer:
        """Write the sidecar beside the database (pid, port, design, token), so that
        clients find this server, and serve in a background thread; returns the server."""
        write_sidecar(self.db, {"pid": os.getpid(), "port": self.port, "design": self.design, "token": self.token})
        self._thread = threading.Thread(target=self.http.serve_forever, name="fanoutsim-control", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, release the port, and remove the sidecar if it is this
        process's (another server's is left alone)."""
        if self._thread is not None:
            self.http.shutdown()
            self._thread = None
        self.http.server_close()
        path = sidecar(self.db)
        try:
            if path.exists() and json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def check_max_body_bytes(max_body_bytes: Any) -> int:
    """``max_body_bytes`` if it is a whole number of bytes >= 1; else a ValueError."""
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be a positive number of bytes, got {max_body_bytes!r}")
    return max_body_bytes


def request(
    address: str, path: str, body: dict[str, Any] | None = None, timeout: float = 10.0, token: str | None = None
) -> Any:
    """GET (``body`` None) or POST ``body`` to a server, with its ``token``; its
    JSON answer. A refusal raises :class:`ControlError` with the server's message."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"token {token}"
    req = urllib.request.Request(
        f"{address}{path}", method="GET" if body is None else "POST", data=data, headers=headers
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except (ValueError, AttributeError):
            message = str(exc)
        raise ControlError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ControlError(f"cannot reach the server at {address}: {getattr(exc, 'reason', exc)}") from None


def server_request(info: dict[str, Any], path: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    """:func:`request` to the server a :func:`server_info` describes, with its token."""
    return request(f"http://127.0.0.1:{info['port']}", path, body, timeout, token=str(info.get("token", "")))


def later(rt: Any, at: float, step: Callable[[], Any], name: str = "fanoutsim-later") -> threading.Thread:
    """Run ``step()`` in a thread once the wall-clock runtime ``rt`` has run ``at``
    seconds since its start (the scale of ``rt.now``): a scenario's later join,
    retirement or action, when it is served. It gives up when ``rt`` stops, and
    a ``RuntimeError`` from ``step`` (the runtime is down) skips it."""
    import time

    def wait_then_run() -> None:
        while not rt.running:  # not started yet
            if getattr(rt, "_state", "") in ("stopped", "closed"):
                return
            time.sleep(0.05)
        while rt.running and rt.now < at:
            time.sleep(min(0.05, max(at - rt.now, 0.001)))
        if rt.running:
            try:
                step()
            except RuntimeError:
                pass

    t = threading.Thread(target=wait_then_run, name=name, daemon=True)
    t.start()
    return t
