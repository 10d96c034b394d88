"""``fanoutsim serve --store postgresql://... --role ROLE``: real OS processes
sharing one PostgreSQL, each a part of the reactor's runner, fed by
``fanoutsim fire`` / ``write``; the reactor's checker reads the database's
tables and the processes' traces. And the reactor's kill -9 campaign through
``serve`` over PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pandas as pd

from fanoutsim import cli
from fanoutsim.designs.reactor.crashtest import kill9_campaign
from fanoutsim.designs.reactor.roles import check_processes
from fanoutsim.designs.reactor.scenario import load_scenario
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.processes import kill_all, serve_role, stderr_tail

SCENARIO = """
name = "roles"
[run]
seed = 0
until = 30.0
[config]
reactor_poll_interval = 0.02
executor_poll_interval = 0.02
executor_workers = 4
watermark = "fired_at_id"

[[workflows]]
name = "audit"
duration = 0.001

[[subscriptions]]
reactor = "pricing_reactor"
workflow = "audit"
"""

FIRINGS = 40  # fired first; then rounds of ROUND more until two pollers have raced
ROUND = 10
MAX_FIRINGS = 400  # the race is common (9 to 33 duplicates in 40 alone), but once, beside other tests, none


def _settled(store, firings: int) -> bool:
    rows = store.rows("workflow_executions")
    done = {json.loads(r["context"])["reactor_firing_id"] for r in rows if r["status"] == "completed"}
    return len(done) >= firings and all(r["status"] == "completed" for r in rows)


def _settle(store, firings: int) -> None:
    deadline = time.monotonic() + 60
    while not _settled(store, firings) and time.monotonic() < deadline:
        time.sleep(0.2)


def _duplicated(store) -> bool:
    """Whether some firing was dispatched twice (two pollers read one watermark)."""
    ids = [json.loads(r["context"])["reactor_firing_id"] for r in store.rows("workflow_executions")]
    return len(ids) > len(set(ids))


def _fire(url: str, price: int, capsys) -> str:
    """One firing through ``fanoutsim fire``, in this process; its id."""
    capsys.readouterr()
    args = [
        "fire",
        "--store",
        url,
        "--reactor",
        "pricing_reactor",
        "--payload",
        json.dumps({"quote": {"price": price}}),
    ]
    assert cli.main(args) == 0
    return capsys.readouterr().out.strip()


def _stop_cleanly(procs) -> None:
    """SIGTERM each serving process; each exits 0 and said nothing after
    "serving" (a thread's traceback would show here)."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(60) == 0, stderr_tail(proc)
    assert not any(stderr_tail(proc) for proc in procs), [stderr_tail(proc) for proc in procs]


def test_two_poller_processes_and_an_executor_lose_nothing_and_the_checker_names_their_duplicates(
    pg_url, tmp_path, capsys
):
    url = pg_url()
    scenario = tmp_path / "roles.toml"
    scenario.write_text(SCENARIO)
    roles = ["poller", "poller", "executor"]
    traces = [str(tmp_path / f"{k}-{role}.parquet") for k, role in enumerate(roles)]
    procs = []
    store = None
    try:
        for role, trace in zip(roles, traces):
            procs.append(serve_role(url, role, trace, str(scenario)))
        # one firing through the command in a process of its own, the rest through the same command in this one
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "fanoutsim",
                "write",
                "--store",
                url,
                "reactor=pricing_reactor",
                'payload:={"quote": {"price": 1}}',
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        fired = [json.loads(out.stdout)["firing"]]
        fired += [_fire(url, k, capsys) for k in range(1, FIRINGS)]
        store = open_store(url)
        _settle(store, len(fired))
        # a duplicate is a race of the two pollers: count rounds until one happened, not seconds
        while not _duplicated(store) and len(fired) < MAX_FIRINGS:
            fired += [_fire(url, len(fired), capsys) for _ in range(ROUND)]
            _settle(store, len(fired))
        assert len(set(fired)) == len(fired)
        time.sleep(0.3)  # a last poll pass of each poller
        _stop_cleanly(procs)
        report = check_processes(store, [pd.read_parquet(t) for t in traces], load_scenario(scenario).config)
        capsys.readouterr()
        assert cli.main(["status", "--store", url]) == 0  # read from the database: no server is asked
        status = json.loads(capsys.readouterr().out)
        assert status["design"] == "reactor" and status["running"] is False
        assert status["executions"] == {"completed": len(store.rows("workflow_executions"))}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if store is not None:
            store.close()
    total = report.total
    assert {r["id"] for r in open_store(url).rows("reactor_firings")} == set(fired)
    assert total["expected"] == len(fired) and total["lost"] == 0 and total["pending"] == 0
    # both poller processes dispatched, each under its own name
    pollers = {a for t in traces[:2] for a in pd.read_parquet(t)["actor"] if str(a).startswith("poller@")}
    assert len(pollers) == 2
    # two processes read one watermark before either moved it: both dispatched the firing,
    # and the checker says which processes did (rarely a watermark write that waited on the
    # other's row lock sorts before the dispatch it undid: "unknown", never a wrong cause)
    extra, causes = total["extra_deliveries"], total["duplicates_by_cause"]
    assert extra == sum(causes.values())
    assert set(causes) <= {"several_pollers", "unknown"}
    assert causes.get("several_pollers", 0) >= 0.9 * extra
    assert extra > 0, f"no two pollers raced over {len(fired)} firings"


def test_a_role_the_design_lacks_is_refused_in_one_line(pg_url, capsys):
    url = pg_url()
    assert cli.main(["serve", "--store", url, "--scenario", "fanoutsim/examples/outbox.toml", "--role", "poller"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == "fanoutsim: error: the outbox design has no role 'poller'; its roles: all, dispatcher, consumers, "
        "retention, writers"
    )
    assert (
        cli.main(["serve", "--store", url, "--scenario", "fanoutsim/examples/realtime.toml", "--role", "pollers"]) == 2
    )
    assert "its roles: all, poller, executor, prune, writers" in capsys.readouterr().err
    assert cli.main(["status", "--store", url]) == 2  # nothing served there yet: nothing created either
    assert "holds no fanoutsim run" in capsys.readouterr().err
    assert cli.main(["status", "--store", "postgres"]) == 2  # a throwaway server nobody else could reach
    assert "a postgresql:// URI of a server of yours" in capsys.readouterr().err
    assert cli.main(["serve", "--store", "run.db"]) == 2  # --store takes a .duckdb file or a URI, as run's does
    assert "'run.db' is not a store: give a path ending in .duckdb or a postgresql:// URI" in capsys.readouterr().err
    assert cli.main(["serve", "--db", "never.duckdb", "--role", "poller"]) == 2  # one process holds a file
    assert "role 'poller' needs a PostgreSQL store" in capsys.readouterr().err


def test_kill_9_of_the_reactor_server_over_postgres_loses_nothing(pg_url):
    out = kill9_campaign(pg_url(), "fanoutsim/examples/realtime.toml", kills=10, seed=3, up=(0.3, 0.8), drain=2.0)
    assert out["crashes_seen"] == out["kills"]
    assert out["firings"] > 20 and out["lost"] == 0 and out["pending"] == 0 and out["clean_exit"]
    # every duplicate lies across a kill, at most one batch per kill and subscription
    assert set(out["duplicates_by_cause"]) <= {"crash"}
    assert out["max_duplicates_per_crash_and_subscription"] <= out["batch_limit"]


WRITERS_SCENARIO = (
    SCENARIO
    + """
[[workload]]
reactor = "pricing_reactor"
rate = 20.0
stop = 2.0
"""
)


def test_a_writers_process_feeds_pollers_and_executors_of_other_processes(pg_url, tmp_path):
    """``--role writers`` runs the scenario's workloads and nothing else: its
    firings, logged in the shared table, are dispatched by a poller and run by an
    executor in other processes, and none is lost. The poller and the executor
    fire nothing themselves: every firing is the writer's."""
    url = pg_url()
    scenario = tmp_path / "writers.toml"
    scenario.write_text(WRITERS_SCENARIO)
    roles = ["poller", "executor", "writers"]  # the writer last: the others are up before its first firing
    traces = [str(tmp_path / f"{role}.parquet") for role in roles]
    procs, store = [], None
    try:
        procs = [serve_role(url, role, trace, str(scenario)) for role, trace in zip(roles, traces)]
        store = open_store(url)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the workload stops 2 s in: wait for its firings, then their runs
            firings = len(store.rows("reactor_firings"))
            if firings >= 20 and _settled(store, firings):
                time.sleep(0.5)  # the workload's last arrivals, if any came late
                if len(store.rows("reactor_firings")) == firings and _settled(store, firings):
                    break
            time.sleep(0.2)
        _stop_cleanly(procs)
        report = check_processes(store, [pd.read_parquet(t) for t in traces], load_scenario(scenario).config)
        fired_by = {role: pd.read_parquet(t) for role, t in zip(roles, traces)}
    finally:
        kill_all(procs)
        if store is not None:
            store.close()
    firings = open_store(url).rows("reactor_firings")
    assert 20 <= len(firings) <= 80  # 20 a second for 2 s, Poisson
    total = report.total
    assert total["expected"] == len(firings) and total["lost"] == 0 and total["pending"] == 0
    logged = {role: int((t["kind"] == "fired").sum()) for role, t in fired_by.items()}
    assert logged == {"poller": 0, "executor": 0, "writers": len(firings)}, logged
