"""The outbox dispatcher's roles as separate OS processes on one PostgreSQL.

One ``fanoutsim serve --role dispatcher`` process runs the topic bus, one
``--role consumers`` the consumers' loops, one ``--role retention`` the
retention loop and one ``--role writers`` the scenario's workload; this test
process commits a fixed number more (and ``fanoutsim write`` a few, from a
process that keeps no trace). Every commit sends its NOTIFY in its
transaction, so the LISTEN connections of the bus's and the consumers'
processes hear another process's commits. The consumers' process crashes
once between a row's handling and its cursor, so that row is handled again
after the restart. When every cursor stands at the end of the log the
processes stop, and the outbox checker reads the tables with the traces
merged by time: nothing lost, and every duplicate with its cause. It counts
rows, never rates over time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pandas as pd

from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.designs.outbox.roles import check_processes
from fanoutsim.kernel.runtime.processes import kill_all, serve_roles, stderr_tail, stop_all

SCENARIO = """
design = "outbox"
name = "roles"
[run]
seed = 0
until = 120.0
[outbox]
safety_poll_interval = 0.5
batch_limit = 10
retention = 3600.0
retention_interval = 0.5

[[consumers]]
name = "indexer"
duration = 0.01

[[consumers]]
name = "mailer"
duration = 0.02

[[workload]]
rate = 30.0
pages = 10
stop = 1.0

[[faults]]
kind = "crash_at_point"
point = "dispatch.after_handle_before_cursor"
nth = 6
downtime = 0.3
"""

CONSUMERS = ("indexer", "mailer")
COMMITTED_HERE = 30  # by this test's process, traced
WRITTEN = 3  # by `fanoutsim write`, a process with no trace
SETTLE_S = 60.0  # at most this long for every cursor to reach the end of the log


def _settled(rt: OutboxRealtime, rows: int) -> bool:
    """At least ``rows`` committed, and every consumer's cursor at the last of them."""
    seqs = [r["seq"] for r in rt.store.rows("outbox")]
    cursors = {r["consumer"]: r["seq"] for r in rt.store.rows("cursors")}
    return (
        len(seqs) >= rows
        and set(cursors) == set(CONSUMERS)
        and all(c == max(seqs) for c in cursors.values())
        and not rt.store.rows("deferred")
    )


def _up(url: str) -> set[tuple[str, int]]:
    """(role, pid) of every process ``fanoutsim status`` says is up, each with a heartbeat."""
    out = subprocess.run(
        [sys.executable, "-m", "fanoutsim", "status", "--store", url], capture_output=True, text=True, timeout=60
    )
    if out.returncode != 0:
        return set()
    return {(s["role"], s["pid"]) for s in json.loads(out.stdout)["servers"] if s["up"] and s["heartbeat_at"]}


def _kinds(path) -> pd.Series:
    return pd.read_parquet(path)["kind"].value_counts()


def _said(procs) -> dict[int, list[str]]:
    """What each serving process wrote to stderr after it served (its last lines)."""
    return {proc.pid: stderr_tail(proc) for proc in procs}


def test_outbox_roles_in_separate_processes_lose_nothing_and_name_their_duplicates(pg_url, tmp_path):
    url = pg_url()
    scenario = tmp_path / "roles.toml"
    scenario.write_text(SCENARIO)
    traces = {role: str(tmp_path / f"{role}.parquet") for role in ("dispatcher", "consumers", "retention", "writers")}
    started = time.monotonic()
    procs = serve_roles(url, traces.items(), scenario)
    here = OutboxRealtime(store=url, role="writers")  # a writer of this test's own, never started
    try:
        # `fanoutsim status` names each role's process, its pid and its last heartbeat
        expected = {(role, p.pid) for role, p in zip(traces, procs)}
        deadline = time.monotonic() + 20
        while _up(url) != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _up(url) == expected
        for n in range(COMMITTED_HERE):
            assert here.commit(f"p{n % 5}", f"v{n}") is not None
        for n in range(WRITTEN):
            out = subprocess.run(
                [sys.executable, "-m", "fanoutsim", "write", "--store", url, f"page=w{n}"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout)["seq"]
        time.sleep(1.5)  # the writers' workload (1 s from its start) has ended
        deadline = time.monotonic() + SETTLE_S
        while not _settled(here, COMMITTED_HERE + WRITTEN) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _settled(here, COMMITTED_HERE + WRITTEN), (here.store.rows("cursors"), _said(procs))
        stop_all(procs)
        said = _said(procs)
        rows = here.store.rows("outbox")
        report = check_processes(here.store, list(traces.values()) + [here.trace()])
    finally:
        kill_all(procs)
        here.close()
    took = time.monotonic() - started
    # a serving process that ran cleanly said nothing after "serving" (a thread's traceback would show here)
    assert not any(said.values()), said
    total = report.total
    # every row committed is owed to each consumer, and handled: none lost, pending or parked
    assert total["committed"] == len(rows) > COMMITTED_HERE + WRITTEN  # the writers' process committed too
    assert total["lost"] == 0 and total["pending"] == 0 and total["parked"] == 0, report
    assert total["delivered"] == len(rows) * len(CONSUMERS)
    # each role ran its own part: the consumers' process handled every row, heard
    # other processes' NOTIFYs and crashed once; the bus published, handled nothing
    consumers, bus = _kinds(traces["consumers"]), _kinds(traces["dispatcher"])
    assert consumers.get("delivered", 0) == len(rows) * len(CONSUMERS) + total["extra_deliveries"]
    assert consumers.get("hint", 0) > 0 and consumers.get("crashed", 0) == 1
    assert consumers.get("published", 0) == 0 and bus.get("delivered", 0) == 0
    assert total["bus_published"] >= COMMITTED_HERE + WRITTEN  # every row committed once the bus was live
    assert _kinds(traces["writers"]).get("committed", 0) == len(rows) - COMMITTED_HERE - WRITTEN
    # the duplicate has its cause: a row handled, then the process crashed before its cursor moved
    assert total["extra_deliveries"] >= 1 and total["duplicates_by_cause"] == {"crash": total["extra_deliveries"]}
    assert report.valid, report
    print(f"{len(rows)} rows, {total['extra_deliveries']} duplicates, {took:.1f} s")
