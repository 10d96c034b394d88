"""kill -9 against leased durable consumers, for real: a random campaign on the
wall clock, and RiffDB's before/after-commit crash matrix.

**The campaign.** A child process runs a
:class:`~.realtime.LeaseRealtime` over one DuckDB file with a steady
workload over two partitions and one consumer, ``sink`` (RiffDB's rule by
default: several leases per partition), whose ``fn`` appends each event's id,
partition and seq to a side file (flushed and fsynced) — the consumer's effect,
outside the database, as a real consumer's would be — with how many effects of
that partition were running at that moment. The parent SIGKILLs the child at
random moments and starts it again each time; then one last child, with no
workload, drains the backlog and stops cleanly. The leases the killed children
held become retries when they expire (``lease_seconds``, 5 s here, the seed's
least): at the next start's recovery, or at the next pull.

The promise under test (seed 003): an event is resolved only by an exact ack
(or a dead letter), so a killed consumer loses nothing. Every event in the
``events`` table must appear in the side file at least once. Duplicates are
allowed — a kill between a worker's effect and its ack re-delivers — but only
of leases in hand, so each kill re-delivers at most ``in_flight_limit`` events.
Under head-of-line first deliveries are in partition order; under RiffDB's rule
effects of one partition overlap and land in any order (``out_of_order`` counts
them, ``max_concurrent_in_partition`` shows the overlap)::

    python -m fanoutsim.designs.leases.crashtest campaign leases.duckdb 10

**The crash matrix** (RiffDB's ``process_crash_matrix_preserves_every_consumer_
transition``): for each transition — lease, ack, nack, seek, retire and
recovery — a child process over a prepared DuckDB file runs it with a fault
plan that SIGKILLs the process at ``<op>.before_commit`` or
``<op>.after_commit``; :func:`crash_matrix_case` prepares the file, runs the
child and returns the consumer's status read back from the file (None once
retired)::

    python -m fanoutsim.designs.leases.crashtest step DB OP PHASE
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import IO

from fanoutsim.designs.leases import LeaseConfig, LeaseEngine
from fanoutsim.designs.leases.engine import TRACE as LEASE_TRACE
from fanoutsim.designs.leases.leasing import Lease
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.faults import NoFaults
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.runtime.crashtest import module_child, serve_sink, side_lines, sink_campaign
from fanoutsim.kernel.runtime.wallclock import wall_us
from fanoutsim.kernel.trace import Trace

MODULE = "fanoutsim.designs.leases.crashtest"  # the child: python -m MODULE serve (or step) ...
CONFIG = LeaseConfig(recovery_interval=0.2)
LIMITS = {"lease_seconds": 5.0, "in_flight_limit": 4, "batch_limit": 4}
EFFECT_SECONDS = 0.02  # how long the sink's effect takes (so effects of one partition can overlap)


def serve(
    db: str,
    side: str,
    rate: float,
    *,
    drain: bool = False,
    drain_timeout: float = 60.0,
    partition_order: str = "riffdb",
) -> int:
    """The child: run until SIGTERM/SIGINT (or, with ``drain``, until the sink is
    past every event and holds no lease); returns an exit status."""
    config = LeaseConfig(recovery_interval=CONFIG.recovery_interval, partition_order=partition_order)
    rt = LeaseRealtime(config, store=db)
    return serve_sink(
        rt,
        side,
        lambda fh: rt.register_consumer("sink", fn=_sink(fh), duration=0.005, poll_interval=0.05, **LIMITS),
        lambda: _drained(rt),
        rate=rate,
        drain=drain,
        drain_timeout=drain_timeout,
        workload={"partitions": 2},
    )


def _sink(fh: IO[str]) -> Callable[[Lease], None]:
    """The consumer's effect: a line of the side file, with how many effects of
    the lease's partition were running as it began."""
    write = threading.Lock()
    running: Counter = Counter()  # effects of each partition running now

    def sink(lease: Lease) -> None:
        with write:
            running[lease.partition] += 1
            concurrent = running[lease.partition]
        try:
            time.sleep(EFFECT_SECONDS)
            with write:
                fh.write(f"{lease.event_id} {lease.partition} {lease.seq} {concurrent}\n")
                fh.flush()
                os.fsync(fh.fileno())  # the effect is durable before the ack may be sent
        finally:
            with write:
                running[lease.partition] -= 1

    return sink


def _drained(rt: LeaseRealtime) -> bool:
    st = rt.status("sink")
    return st["first_required"] is None and not st["in_flight"]


def _start(db: str, side: str, rate: float, drain: bool = False, partition_order: str = "riffdb") -> subprocess.Popen:
    return module_child(MODULE, db, side, rate, drain, ["--head-of-line"] if partition_order == "head_of_line" else [])


def deliveries(side: str) -> list[tuple[str, str, int, int]]:
    """The side file's complete lines: ``(event_id, partition, seq, concurrent)``
    in order (``concurrent``: effects of that partition running as it began)."""
    out = []
    for line in side_lines(side):
        eid, part, seq, concurrent = line.split()
        out.append((eid, part, int(seq), int(concurrent)))
    return out


def kill9_campaign(
    db: str,
    side: str | None = None,
    *,
    kills: int = 3,
    seed: int = 0,
    up=(0.3, 1.0),
    rate: float = 20.0,
    drain_timeout: float = 60.0,
    partition_order: str = "riffdb",
    backlog: int = 0,
) -> dict:
    """Run the campaign; returns its figures (``lost`` lists event ids in the log
    the sink never saw; ``out_of_order`` first deliveries behind a later seq of
    their partition; ``max_concurrent_in_partition`` the most effects of one
    partition seen running at once). ``backlog`` events (alternating over the
    two partitions) are in the log before the first child starts, so that its
    first pulls find several per partition."""
    side = side or f"{db}.sink.txt"
    if backlog:
        e, store = _engine(db)
        try:
            for i in range(backlog):  # on the wall clock, as the children's events
                e.publish(wall_us(), [(f"p{i % 2}", "event", {"backlog": i})])
        finally:
            store.close()
    # the last child has no new events: it drains the backlog and stops cleanly
    end = sink_campaign(
        lambda r, drain: _start(db, side, r, drain, partition_order),
        open_store,
        db,
        ("events", "leases"),
        rate=rate,
        kills=kills,
        seed=seed,
        up=up,
        drain_timeout=drain_timeout,
    )
    published = [r["event_id"] for r in end.rows["events"]]
    got = deliveries(side)
    seen = Counter(eid for eid, *_ in got)
    first, last, out_of_order = set(), {}, []
    for eid, part, seq, _ in got:
        if eid in first:
            continue
        first.add(eid)
        if seq < last.get(part, 0):
            out_of_order.append(eid)
        last[part] = max(seq, last.get(part, 0))
    return end.figures(
        published=len(published),
        lost=[e for e in published if not seen[e]],
        extra_deliveries=sum(n - 1 for n in seen.values() if n > 1),
        max_deliveries_of_one_event=max(seen.values(), default=0),
        out_of_order=out_of_order,
        max_concurrent_in_partition=max((c for *_, c in got), default=0),
        leases_left=len(end.rows["leases"]),
    )


# -- RiffDB's crash matrix: kill -9 before and after each transition's commit ------------------

T0 = 1_767_225_600_000_000  # the matrix's clock: epoch microseconds, then seconds past it
MATRIX_OPS = ("lease", "ack", "nack", "seek", "retire", "recover")
PHASES = ("before", "after")


def _t(seconds: float) -> int:
    return T0 + round(seconds * 1_000_000)


class KillAt(NoFaults):
    """A fault plan that SIGKILLs this process at one named point: kill -9, for real."""

    def __init__(self, point: str) -> None:
        self.at = point

    def point(self, name, now, **where):
        if name == self.at:
            os.kill(os.getpid(), signal.SIGKILL)


def _engine(db: str, faults=None) -> tuple[LeaseEngine, object]:
    store = open_store(db)
    return LeaseEngine(store, LeaseConfig(), Metrics(), Trace(LEASE_TRACE), faults, seed=0), store


def prepare_matrix(db: str, op: str) -> None:
    """The file each case starts from (as RiffDB's test seeds it): one consumer
    ``worker-a`` and one event; for ack, nack and recover a lease of it (taken at
    1 s, expiring at 6 s); for seek and retire that event acknowledged."""
    e, store = _engine(db)
    try:
        e.add_consumer(_t(0), "worker-a", batch_limit=1, in_flight_limit=2, lease_seconds=5)
        e.publish(_t(0), [("p", "RowChanged", {"row": 1})])
        if op in ("ack", "nack", "recover", "seek", "retire"):
            (lease,) = e.consume(_t(1), "worker-a")
            if op in ("seek", "retire"):
                e.ack(_t(2), "worker-a", lease.event_id, lease.token, lease.incarnation)
    finally:
        store.close()


def step(db: str, op: str, phase: str) -> int:
    """The child: run ``op`` over the file with a kill -9 armed at ``op.phase_commit``.
    It must not come back (exit status 3 if it does)."""
    e, store = _engine(db, KillAt(f"{op}.{phase}_commit"))
    now = _t(2)
    if op == "lease":
        e.consume(_t(1), "worker-a")
    elif op in ("ack", "nack"):
        with store.transaction() as tx:
            lease = tx.get_lease("worker-a", "1:0")
        args = ("worker-a", lease["event_id"], lease["token"], lease["incarnation"])
        e.ack(now, *args) if op == "ack" else e.nack(now, *args, delay=1.0)
    elif op == "seek":
        e.seek(now, "worker-a", "beginning")
    elif op == "retire":
        e.retire(now, "worker-a")
    elif op == "recover":
        e.recover(_t(10))
    store.close()
    return 3


def crash_matrix_case(db: str, op: str, phase: str) -> dict | None:
    """Prepare ``db`` for ``op``, run the child that is killed at ``op.phase_commit``,
    and return ``worker-a``'s status as the file says afterwards (None: no such
    consumer) with the child's ``returncode`` under ``"_returncode"`` on a dict."""
    if op not in MATRIX_OPS or phase not in PHASES:
        raise ValueError(f"op must be one of {MATRIX_OPS} and phase one of {PHASES}, got {op!r}, {phase!r}")
    prepare_matrix(db, op)
    proc = subprocess.run(
        [sys.executable, "-m", MODULE, "step", db, op, phase],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the {op}-{phase} child was not killed (status {proc.returncode}): {proc.stderr}")
    e, store = _engine(db)
    try:
        return e.status(_t(3), "worker-a")
    finally:
        store.close()


if __name__ == "__main__":
    # python -m fanoutsim.designs.leases.crashtest serve DB SIDE RATE [--drain] [--head-of-line]
    # python -m fanoutsim.designs.leases.crashtest campaign DB [KILLS]
    # python -m fanoutsim.designs.leases.crashtest step DB OP PHASE
    if len(sys.argv) >= 5 and sys.argv[1] == "serve":
        sys.exit(
            serve(
                sys.argv[2],
                sys.argv[3],
                float(sys.argv[4]),
                drain="--drain" in sys.argv[5:],
                partition_order="head_of_line" if "--head-of-line" in sys.argv[5:] else "riffdb",
            )
        )
    if len(sys.argv) == 5 and sys.argv[1] == "step":
        sys.exit(step(*sys.argv[2:5]))
    if len(sys.argv) >= 3 and sys.argv[1] == "campaign":
        print(json.dumps(kill9_campaign(sys.argv[2], kills=int(sys.argv[3]) if len(sys.argv) > 3 else 10), indent=2))
        sys.exit(0)
    sys.exit(
        "usage: python -m fanoutsim.designs.leases.crashtest "
        "(serve DB SIDE RATE [--drain] [--head-of-line] | campaign DB [KILLS] | step DB OP PHASE)"
    )
