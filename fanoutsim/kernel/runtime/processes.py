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
from collections.abc import Iterable
from typing import Any

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
    except BaseException:
        kill_all(procs)
        raise
    return procs


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
            proc.kill()
            proc.wait()
            failed.append(f"pid {proc.pid} did not stop within {timeout:g} s")
            continue
        if proc.returncode != 0:
            err = proc.stderr.read() if proc.stderr is not None else ""
            err = err.decode() if isinstance(err, bytes) else err
            lines = [line for line in err.strip().splitlines() if line.strip()]
            failed.append(f"pid {proc.pid} exited with {proc.returncode}" + (f": {lines[-1]}" if lines else ""))
    if failed:
        raise RuntimeError("; ".join(failed))


def kill_all(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGKILL every process still running (a test's or a harness's last word)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
