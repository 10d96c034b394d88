"""The consumer processes of a run, from the harness: start, wait for events, kill, stop.

Each consumer is an OS process of its own (:mod:`.client_process`, run by path
on this Python), so that SIGKILL takes exactly it and nothing else, as when a
worker's machine dies. A thread per process reads its events (JSON lines) into
:attr:`ClientProcess.events`, each with the process's consumer and name; the
harness waits for *events* (a count of them, with a generous timeout), never
for a fixed time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable

from fanoutsim.designs.leases.realbrokers import client_process

READY_TIMEOUT = 60.0  # seconds a process may take to import its client and connect (a loaded machine)
EVENT_TIMEOUT = 120.0  # seconds the harness waits for events it needs, by default


class ClientError(RuntimeError):
    """A consumer process failed, or did not do what was awaited in time."""


class ClientProcess:
    """One consumer process: ``job`` as :data:`.client_process.JOB_KEYS` says."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self.consumers, self.name = list(job["consumers"]), job["name"]
        self.events: list[list] = []  # [kind, consumer, n, deliveries, t, (t_done)], as the process said them
        self.errors: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, "-P", client_process.__file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._send(json.dumps(job))
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"client-{self.name}")
        self._reader.start()

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # it has ended: what it said tells why
            pass

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self._changed:
                if event[0] == "error":
                    self.errors.append(event[1])
                else:
                    self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def of(self, *kinds: str) -> list[list]:
        """The events of these kinds so far."""
        with self._changed:
            return [e for e in self.events if e[0] in kinds]

    def wait_for(self, done: Callable[[list[list]], bool], what: str, timeout: float = EVENT_TIMEOUT) -> None:
        """Until ``done(events)``; a ClientError (with what the process said) if it ends or errors first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(self.events):
                if self.errors or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise ClientError(f"consumer process {self} {self._why()} before {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClientError(f"consumer process {self}: no {what} in {timeout:g} s")
                self._changed.wait(min(left, 1.0))

    def __str__(self) -> str:
        return f"{self.name} ({', '.join(self.consumers)})"

    def _why(self) -> str:
        if self.errors:
            return f"failed: {self.errors[0]}"
        err = self.process.stderr.read() if self.process.stderr is not None else ""
        return f"ended (exit {self.process.returncode}): {err.strip()[-800:]}"

    def ready(self, timeout: float = READY_TIMEOUT) -> ClientProcess:
        self.wait_for(lambda events: any(e[0] == "ready" for e in events), "ready", timeout)
        return self

    def go(self, consumer: str | None = None) -> None:
        """Start pulling, as ``consumer`` (None: as each of its consumers); the process
        waits for this after ``ready``."""
        self._send("go" if consumer is None else f"go {consumer}")

    def kill(self) -> float:
        """SIGKILL, as a machine dies; returns when (``time.time()``)."""
        at = time.time()
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30.0)
        self._close()
        return at

    def stop(self) -> None:
        """Ask it to stop; kill it if it has not within 10 s."""
        if self.process.poll() is None:
            self._send("stop")
            try:
                self.process.wait(10.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10.0)
        self._close()

    def _close(self) -> None:
        self._reader.join(10.0)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                try:
                    stream.close()
                except BrokenPipeError:
                    pass


def start_all(jobs: Iterable[dict]) -> list[ClientProcess]:
    """A process per job, all started at once (each takes a while to import and connect),
    returned once every one is ready; if one is not, all are killed."""
    procs: list[ClientProcess] = []
    try:
        for job in jobs:
            procs.append(ClientProcess(job))
        for p in procs:
            p.ready()
    except BaseException:
        stop_all(procs, kill=True)
        raise
    return procs


def stop_all(procs: Iterable[ClientProcess], kill: bool = False) -> None:
    for p in procs:
        if kill and p.process.poll() is None:
            p.process.kill()
        p.stop()
