"""Competing lease clients as separate OS processes on one PostgreSQL.

Three ``fanoutsim serve --role clients`` processes work one consumer's events
and one ``--role publishers,recovery,retention`` process publishes the
scenario's workload; this test process publishes a fixed number more (and
``fanoutsim write`` a few, from a process that keeps no trace). Every client
process crashes once between a worker's effect and its ack, so that event is
delivered again once its lease expires, by whichever process leases it next.
When every event is resolved the processes stop, and the leases checker reads
the database's tables with their traces merged by time: nothing lost, and
every duplicate with its cause. It counts events, never rates over time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pandas as pd

from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.leases.roles import check_processes
from fanoutsim.kernel.runtime.processes import kill_all, serve_roles, stderr_tail, stop_all

SCENARIO = """
design = "leases"
name = "competing"
[run]
seed = 0
until = 120.0
[leases]
recovery_interval = 0.5

[[consumers]]
name = "indexer"
duration = 0.01
lease_seconds = 5.0
batch_limit = 4
in_flight_limit = 8
poll_interval = 0.05

[[workload]]
rate = 40.0
partitions = 4
kind = "ticket.changed"
stop = 1.0

[[faults]]
kind = "crash_at_point"
point = "worker.after_effect_before_ack"
nth = 8
downtime = 0.3
"""

CLIENTS = 3
PUBLISHED_HERE = 30  # by this test's process, traced
WRITTEN = 3  # by `fanoutsim write`, a process with no trace
# at most this long for every event to be resolved: room for a loaded machine (a stuck
# event still fails, and _unresolved names it)
SETTLE_S = 120.0


def _resolved(rt: LeaseRealtime, events: int) -> bool:
    """Every event published and resolved: none in flight, none to retry, none required."""
    st = rt.status("indexer")
    return (
        len(rt.store.rows("events")) >= events
        and st is not None
        and not st["in_flight"]
        and not st["retrying"]
        and st["first_required"] is None
    )


def _unresolved(rt: LeaseRealtime, procs) -> str:
    """What :func:`_resolved` found still open, and the last lines each
    serving process wrote (alive or not), short enough that pytest shows it whole."""
    st = rt.status("indexer") or {}
    keys = ("first_required", "in_flight", "retrying", "live_leases", "incarnation", "checkpoints")
    said = [f"pid {p.pid} (exit {p.poll()}): {stderr_tail(p)[-3:]}" for p in procs]
    return f"{len(rt.store.rows('events'))} events; " + ", ".join(f"{k}={st.get(k)!r}" for k in keys) + f"; {said}"


def test_competing_lease_clients_in_separate_processes_lose_nothing_and_name_their_duplicates(pg_url, tmp_path):
    url = pg_url()
    scenario = tmp_path / "competing.toml"
    scenario.write_text(SCENARIO)
    roles = [("publishers,recovery,retention", str(tmp_path / "node.parquet"))]
    roles += [("clients", str(tmp_path / f"clients-{k}.parquet")) for k in range(CLIENTS)]
    started = time.monotonic()
    procs = serve_roles(url, roles, scenario)
    here = LeaseRealtime(store=url)  # a publisher of this test's own, never started: its trace is merged too
    try:
        for n in range(PUBLISHED_HERE):
            here.publish(f"p{n % 4}", "ticket.changed", {"n": n})
        for n in range(WRITTEN):
            out = subprocess.run(
                [sys.executable, "-m", "fanoutsim", "write", "--store", url, f"partition=w{n}"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout)["event"]
        time.sleep(1.5)  # the node's workload (1 s from its start) has ended
        deadline = time.monotonic() + SETTLE_S
        while not _resolved(here, PUBLISHED_HERE + WRITTEN) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _resolved(here, PUBLISHED_HERE + WRITTEN), _unresolved(here, procs)
        stop_all(procs)
        said = {proc.pid: stderr_tail(proc) for proc in procs}
        events = here.store.rows("events")
        report = check_processes(here.store, [path for _, path in roles] + [here.trace()])
    finally:
        kill_all(procs)
        here.close()
    took = time.monotonic() - started
    # a serving process that ran cleanly said nothing after "serving" (a thread's traceback would show here)
    assert not any(said.values()), said
    total = report.total
    # every event published is owed, and delivered: none lost, pending or dead-lettered
    assert total["published"] == len(events) > PUBLISHED_HERE + WRITTEN
    assert total["lost"] == 0 and total["pending"] == 0 and total["dead_lettered"] == 0, report
    assert total["delivered"] == len(events)
    # the clients competed: several processes delivered, and no event was leased twice at once
    delivered_by = [int((pd.read_parquet(path)["kind"] == "delivered").sum()) for _, path in roles[1:]]
    assert sum(delivered_by) == len(events) + total["duplicates"]
    assert sum(1 for n in delivered_by if n) >= 2, delivered_by
    # each duplicate has its cause: an effect whose process crashed before its ack
    causes = total["duplicates_by_cause"]
    assert total["duplicates"] >= 1 and set(causes) <= {"crash", "lease_expired"}, causes
    assert total["out_of_order"] == 0 and report.valid, report.out_of_order
    print(f"{len(events)} events, {total['duplicates']} duplicates {causes}, by process {delivered_by}, {took:.1f} s")
