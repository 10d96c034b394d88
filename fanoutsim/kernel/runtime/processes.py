"""Several serving processes over one store: start them, stop them, merge their traces.

``fanoutsim serve --store postgresql://... --role ROLE --trace FILE`` runs one
part of a design's process (:mod:`.roles`) and writes its trace to ``FILE`` at
a clean stop. A checker over several processes reads the database's tables
and :func:`merged_trace`: every process's trace in one, by time.

Across processes a trace row bears the time its step began, read before the
step waited for a row another process held locked; so two rows of two
processes less than a lock wait apart may sort in either order. A checker
that reads causes from the order says "unknown" where that happens, never a
wrong cause.

:func:`serve_role` starts one serving process and returns once it serves
(:func:`serve_roles`: several at once);
:func:`stop_all` stops several cleanly (SIGTERM) and says which did not.
Nothing here knows a design.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable
from typing import IO, Any

import pandas as pd

from fanoutsim.kernel.runtime.crashtest import READY_TIMEOUT
from fanoutsim.kernel.trace import TraceFrame


def merged_trace(traces: Iterable[Any]) -> TraceFrame:
    """The traces of several processes (each a DataFrame, or the Parquet file
    ``serve --trace`` wrote) as one, sorted by time: rows of one time keep
    their process's order, and processes the order given."""
    frames = [pd.read_parquet(t) if isinstance(t, (str, os.PathLike)) else pd.DataFrame(t) for t in traces]
    frames = [f for f in frames if len(f)] or frames[:1]
    if not frames:
        raise ValueError("merged_trace needs at least one process's trace")
    merged = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].copy()
    return TraceFrame(merged.sort_values("t", kind="stable").reset_index(drop=True))


def serve_role(
    db: str, role: str, trace: str, scenario: str | None = None, extra: Iterable[str] = ()
) -> subprocess.Popen[bytes]:
    """``python -m fanoutsim serve --store DB --role ROLE --trace TRACE
    [--scenario SCENARIO] [EXTRA...]``, returned once it says it serves."""
    return serve_roles(db, [(role, trace)], scenario, extra)[0]


def serve_roles(
    db: str, roles: Iterable[tuple[str, str]], scenario: str | None = None, extra: Iterable[str] = ()
) -> list[subprocess.Popen[bytes]]:
    """One :func:`serve_role` process per ``(role, trace)``, all started at
    once (each takes a while: its imports, its connection) and returned once
    every one serves; if one does not, all are killed and a RuntimeError
    says why."""
    roles, procs = list(roles), []
    try:
        for role, trace in roles:
            cmd = [sys.executable, "-m", "fanoutsim", "serve", "--store", db, "--role", role, "--trace", trace]
            if scenario is not None:
                cmd += ["--scenario", str(scenario)]
            procs.append(subprocess.Popen[bytes](cmd + list(extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for proc, (role, _) in zip(procs, roles):
            said = _until_serving(proc)
            if said is not None:  # its stderr ended (it died) before "serving ..."
                proc.wait(READY_TIMEOUT)
                raise RuntimeError(f"serve --role {role} did not start (exit {proc.returncode}): {said}")
            _drain(proc)
    except BaseException:
        kill_all(procs)
        raise
    return procs


SAID_LINES = 500  # the last lines a serving process wrote to stderr (a stack dump's), kept for an error message


class _Tail:
    """What a serving process wrote to stderr since it served: its last lines,
    and how many it wrote in all."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: deque[str] = deque(maxlen=SAID_LINES)
        self.count = 0
        self.reader = threading.Thread(target=self._read, args=(stream,), name="stderr-tail", daemon=True)
        self.reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self.lines.append(line.decode(errors="replace").rstrip("\n"))
            self.count += 1

    def since(self, count: int) -> list[str]:
        """The lines written after the first ``count`` (those still kept)."""
        return list(self.lines)[max(0, len(self.lines) - (self.count - count)) :]


_TAILS: weakref.WeakKeyDictionary[subprocess.Popen[bytes], _Tail] = weakref.WeakKeyDictionary()


def _drain(proc: subprocess.Popen[bytes]) -> None:
    """Read what ``proc`` writes to stderr from now on, keeping its last
    :data:`SAID_LINES` lines (:func:`stderr_tail`). A pipe nobody reads fills (64 KiB)
    and then blocks the process at its next write, holding whatever lock it
    held: a serving process that warned often enough stopped working."""
    assert proc.stderr is not None, "started with stderr=PIPE"
    _TAILS[proc] = _Tail(proc.stderr)


def stderr_tail(proc: subprocess.Popen[bytes]) -> list[str]:
    """The last lines a process :func:`serve_roles` started wrote to stderr
    after it said it serves (up to its last line, once it has exited); of
    another process with a stderr pipe, its last lines once it has exited."""
    tail = _TAILS.get(proc)
    if tail is None:  # not one of serve_roles': what is left in its pipe, once it has exited
        left = proc.stderr.read() if proc.stderr is not None and proc.poll() is not None else b""
        return (left.decode(errors="replace") if isinstance(left, bytes) else left).splitlines()[-SAID_LINES:]
    if proc.poll() is not None:
        tail.reader.join(5.0)  # its stderr closed with it: the last lines are on their way
    return list(tail.lines)


def _until_serving(proc: subprocess.Popen[bytes]) -> str | None:
    """Read ``proc``'s stderr up to its line "serving ..." (then None) or to
    its end (then all it said: why it did not start). A line before "serving"
    (a library's warning at import) is passed over, not taken for a failure."""
    said = []
    assert proc.stderr is not None, "started with stderr=PIPE"
    for line in iter(proc.stderr.readline, b""):
        if line.startswith(b"serving"):
            return None
        said.append(line)
    return b"".join(said).decode(errors="replace").strip()


def stop_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    """Stop every process cleanly (SIGTERM: each finishes the work in hand and
    writes its trace), all at once; a RuntimeError names any that exited with
    another status than 0 (with its last error line), or did not stop within
    ``timeout`` seconds (then killed)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    failed = []
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stacks = _stacks(proc)
            proc.kill()
            proc.wait()
            failed.append(f"pid {proc.pid} did not stop within {timeout:g} s; its threads:\n{stacks}")
            continue
        if proc.returncode != 0:
            lines = [line for line in stderr_tail(proc) if line.strip()]
            failed.append(f"pid {proc.pid} exited with {proc.returncode}" + (f": {lines[-1]}" if lines else ""))
    if failed:
        raise RuntimeError("; ".join(failed))


def _stacks(proc: subprocess.Popen[bytes], wait: float = 5.0, quiet: float = 1.0) -> str:
    """Where a serving process that will not stop is stuck: the stack of each
    of its threads, which ``serve`` prints on SIGUSR1 (what it wrote to stderr
    since, once it has said nothing more for ``quiet`` seconds, or after ``wait``)."""
    tail = _TAILS.get(proc)
    if tail is None or not hasattr(signal, "SIGUSR1") or proc.poll() is not None:
        return "(none printed)"
    before = tail.count
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + wait
    seen, since = before, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if tail.count != seen:
            seen, since = tail.count, time.monotonic()
        elif seen > before and time.monotonic() - since >= quiet:  # it began, and has said no more since
            break
    return "\n".join(tail.since(before)) or "(none printed)"


def kill_all(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGKILL every process still running (a test's or a harness's last word)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
