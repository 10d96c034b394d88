"""A kill -9 campaign against the reactor design's ``fanoutsim serve``, for real.

Start the server as a subprocess over one DuckDB file with a scenario's
steady workload, SIGKILL it at random moments, start it again each time; then
let one last server drain the backlog and stop it cleanly, and check the file
with :func:`fanoutsim.check_store`. The promise under test: no firing that was
durably logged is lost; duplicates are allowed, each lies across a crash, and
one crash re-delivers at most one batch per subscription::

    python -m fanoutsim.designs.reactor.crashtest run.duckdb fanoutsim/examples/realtime.toml 50
    python -m fanoutsim.designs.reactor.crashtest postgresql://me@localhost/fanout fanoutsim/examples/realtime.toml 10

Over PostgreSQL the server is ``fanoutsim serve --store URI`` (role ``all``),
and :func:`~fanoutsim.designs.reactor.checker.check_store` reads the same
tables from the database: a kill -9 closes the process's connection, and
PostgreSQL rolls back the transaction it had open.

The kill loop and the drain are the kernel's harness
(:mod:`fanoutsim.kernel.runtime.crashtest`), shared with the outbox and
leases campaigns.
"""

from __future__ import annotations

import json
import subprocess
import sys

from fanoutsim.designs.reactor.checker import check_store
from fanoutsim.designs.reactor.scenario import load_scenario
from fanoutsim.kernel.runtime.crashtest import campaign, says_serving, serving, start_child, stop_after


def start_server(db: str, scenario: str, extra=()) -> subprocess.Popen:
    """``fanoutsim serve --db DB --scenario SCENARIO`` (``--store DB`` for a
    ``postgresql://`` URI), returned once it serves."""
    pg = db.startswith(("postgresql://", "postgres://"))
    cmd = [sys.executable, "-m", "fanoutsim", "serve", "--store" if pg else "--db", db, "--scenario", scenario, *extra]
    return start_child(cmd, ready=says_serving if pg else serving(db))


def kill9_campaign(
    db: str, scenario: str, *, kills: int = 10, seed: int = 0, up=(0.3, 1.5), drain: float = 2.0
) -> dict:
    """Run the campaign; returns its figures and the check report."""
    proc = campaign(
        lambda: start_server(db, scenario),
        lambda: start_server(db, scenario, ["--rate", "0"]),  # no new firings: drain the backlog
        lambda p: stop_after(p, drain),
        kills=kills,
        seed=seed,
        up=up,
    )
    config = load_scenario(scenario).config
    report = check_store(db, config)
    dups = report.duplicates
    per_crash = dups.groupby(["crash_at", "subscription"]).size() if len(dups) else None
    return {
        "kills": kills,
        "crashes_seen": report.total["crashes"],
        "firings": report.total["expected"],
        "extra_deliveries": report.total["extra_deliveries"],
        "lost": report.total["lost"],
        "pending": report.total["pending"],
        "duplicates_by_cause": report.total["duplicates_by_cause"],
        "max_duplicates_per_crash_and_subscription": int(per_crash.max()) if per_crash is not None else 0,
        "batch_limit": config.reactor_poll_batch_limit,
        "clean_exit": proc.returncode == 0,
        "report": report,
    }


if __name__ == "__main__":  # python -m fanoutsim.designs.reactor.crashtest DB SCENARIO [KILLS]
    if len(sys.argv) < 3:
        sys.exit("usage: python -m fanoutsim.designs.reactor.crashtest DB SCENARIO [KILLS]")
    db, scenario = sys.argv[1], sys.argv[2]
    out = kill9_campaign(db, scenario, kills=int(sys.argv[3]) if len(sys.argv) > 3 else 10)
    report = out.pop("report")
    print(json.dumps(out, indent=2))
    print(report)
