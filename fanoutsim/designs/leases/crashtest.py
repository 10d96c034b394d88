"""A kill -9 campaign against leased durable consumers on the wall clock, for real.

A child process runs a :class:`~.leases_realtime.LeaseRealtime` over one
DuckDB file with a steady workload over four partitions and one consumer,
``sink``, whose ``fn`` appends each event's id, partition and seq to a side
file (flushed and fsynced) — the consumer's effect, outside the database, as a
real consumer's would be. The parent SIGKILLs the child at random moments and
starts it again each time; then one last child, with no workload, drains the
backlog and stops cleanly. It has to wait for the leases the killed children
held: they stay in the table until they expire (``lease_seconds``, 5 s here,
the seed's least), as a dead client's leases do.

The promise under test (seed 003): an event leaves a partition's head only by
an exact ack (or a dead letter), so a killed consumer loses nothing. Every
event in the ``events`` table must appear in the side file at least once, and
first deliveries in partition order. Duplicates are allowed — a kill between a
worker's effect and its ack re-delivers — but only of leases in hand, so each
kill re-delivers at most ``in_flight_limit`` events::

    python -m fanoutsim.designs.leases.crashtest campaign leases.duckdb 10
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter

from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.crashtest import campaign, main, module_child, run_child, side_lines, wait_or_kill
from fanoutsim.designs.leases.realtime import LeaseRealtime

CONFIG = LeaseConfig(recovery_interval=0.2)
LIMITS = {"lease_seconds": 5.0, "in_flight_limit": 4, "batch_limit": 4}


def serve(db: str, side: str, rate: float, *, drain: bool = False, drain_timeout: float = 60.0) -> int:
    """The child: run until SIGTERM/SIGINT (or, with ``drain``, until the sink is
    past every event and holds no lease); returns an exit status."""
    rt = LeaseRealtime(CONFIG, store=db)
    fh = open(side, "a")
    write = threading.Lock()

    def sink(lease) -> None:
        with write:
            fh.write(f"{lease.event_id} {lease.partition} {lease.seq}\n")
            fh.flush()
            os.fsync(fh.fileno())  # the effect is durable before the ack may be sent

    try:
        rt.register_consumer("sink", fn=sink, duration=0.005, poll_interval=0.05, **LIMITS)
        if rate > 0:
            rt.add_workload(rate, partitions=4)
        return run_child(rt, lambda: _drained(rt), drain=drain, drain_timeout=drain_timeout)
    finally:
        rt.close()
        fh.close()


def _drained(rt: LeaseRealtime) -> bool:
    return rt.status("sink")["first_required"] is None and not rt.status("sink")["in_flight"]


def _start(db: str, side: str, rate: float, drain: bool = False) -> subprocess.Popen:
    return module_child("fanoutsim.designs.leases.crashtest", db, side, rate, drain)


def deliveries(side: str) -> list[tuple[str, str, int]]:
    """The side file's complete lines: ``(event_id, partition, seq)`` in order."""
    out = []
    for line in side_lines(side):
        eid, part, seq = line.split()
        out.append((eid, part, int(seq)))
    return out


def kill9_campaign(db: str, side: str | None = None, *, kills: int = 3, seed: int = 0, up=(0.3, 1.0),
                   rate: float = 20.0, drain_timeout: float = 60.0) -> dict:
    """Run the campaign; returns its figures (``lost`` lists event ids in the log
    the sink never saw; ``out_of_order`` first deliveries behind a later seq of
    their partition)."""
    side = side or f"{db}.sink.txt"
    proc = campaign(lambda: _start(db, side, rate),
                    lambda: _start(db, side, 0.0, drain=True),  # no new events: drain the backlog, stop cleanly
                    lambda p: wait_or_kill(p, drain_timeout + 30), kills=kills, seed=seed, up=up)
    store = open_store(db)
    try:
        published = [r["event_id"] for r in store.rows("events")]
        leases = store.rows("leases")
        log = [r["event"] for r in store.rows("runner_log")]
    finally:
        store.close()
    got = deliveries(side)
    seen = Counter(eid for eid, _, _ in got)
    first, last, out_of_order = set(), {}, []
    for eid, part, seq in got:
        if eid in first:
            continue
        first.add(eid)
        if seq < last.get(part, 0):
            out_of_order.append(eid)
        last[part] = max(seq, last.get(part, 0))
    return {
        "kills": kills,
        "starts": log.count("start"),
        "clean_stops": log.count("stop"),
        "published": len(published),
        "lost": [e for e in published if not seen[e]],
        "extra_deliveries": sum(n - 1 for n in seen.values() if n > 1),
        "max_deliveries_of_one_event": max(seen.values(), default=0),
        "out_of_order": out_of_order,
        "leases_left": len(leases),
        "clean_exit": proc.returncode == 0,
    }


if __name__ == "__main__":
    # python -m fanoutsim.designs.leases.crashtest serve DB SIDE RATE [--drain]
    # python -m fanoutsim.designs.leases.crashtest campaign DB [KILLS]
    sys.exit(main(sys.argv[1:], "fanoutsim.designs.leases.crashtest", serve, kill9_campaign))
