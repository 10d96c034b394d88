"""Every runtime and every store closes, by close() or as a ``with`` block: a
DuckDB file is free again, and a run on ``store="postgres"`` stops the
throwaway server it started — so a notebook of many runs piles up none."""

from __future__ import annotations

import os

import duckdb
import pytest

import fanoutsim as fs
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.designs.stores import open_store

SIMULATIONS = {"reactor": fs.Simulation, "outbox": OutboxSimulation, "leases": LeaseSimulation}


def _alive(pid: int) -> bool:
    """The process runs (a zombie, its exit not yet collected by init, does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("design", list(SIMULATIONS))
def test_a_simulation_closes_and_frees_its_file(tmp_path, design):
    path = str(tmp_path / f"{design}.duckdb")
    with SIMULATIONS[design](seed=0, store=path) as sim:
        sim.run(until=1.0)
    duckdb.connect(path).close()  # another connection may open it read-write: it was released
    with pytest.raises(RuntimeError, match="is closed"):
        sim.run(until=2.0)
    sim.close()  # again: nothing


def test_a_closed_simulation_refuses_the_api_and_a_restart():
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False)
    sim.close()
    with pytest.raises(RuntimeError, match="LeaseSimulation is closed"):
        sim.publish("p")
    with pytest.raises(RuntimeError, match="is closed"):
        sim.restart()


def test_every_store_is_a_context_manager(tmp_path):
    path = str(tmp_path / "s.duckdb")
    with open_store(path) as store:
        assert store.rows("runner_log") == []
    duckdb.connect(path).close()
    with open_store("memory") as store:
        assert store.rows("runner_log") == []


def test_a_wall_clock_runtime_is_one_too(tmp_path):
    path = str(tmp_path / "w.duckdb")
    with LeaseRealtime(store=path) as rt:
        rt.publish("p")
    duckdb.connect(path).close()


def test_ten_runs_on_postgres_in_one_process_leave_no_server_running():
    pytest.importorskip("pgserver")
    servers = []
    for i in range(10):
        make = list(SIMULATIONS.values())[i % 3]
        with make(seed=i, store="postgres") as sim:
            sim.run(until=1.0)
            server = sim.store.server
            servers.append((server.pid, server.folder))
            assert _alive(server.pid)
    assert [pid for pid, _ in servers if _alive(pid)] == []
    assert [folder for _, folder in servers if os.path.exists(folder)] == []
