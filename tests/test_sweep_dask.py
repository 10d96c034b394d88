"""fs.sweep(..., client=): each run a Dask task, the same table as the local
sweep, the cache kept here, workers checked before any task, failures and
Ctrl-C handled. On small LocalClusters (2 workers, 1 thread each)."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pandas as pd
import pytest
from distributed import Client, LocalCluster

import fanoutsim as fs

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fanoutsim" / "examples" / "sweep.toml"
OUTBOX = ROOT / "fanoutsim" / "examples" / "outbox.toml"
SW = importlib.import_module("fanoutsim.sweep")
GRID = {"reactor_poll_interval": [0.5, 2.0], "reactor_poll_batch_limit": [2, 50]}
UNTIL = 60.0


def volatile_free(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"])


def _executed(dask_worker) -> int:
    return dask_worker.state.executed_count


@pytest.fixture(scope="module")
def client():
    """Worker processes: the runs really leave this process."""
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as c,
    ):
        c.wait_for_workers(2)
        yield c


def _workers(client) -> list[str]:
    """The workers' addresses, asked of the workers themselves: scheduler_info()
    falls back to a cached summary without workers when the scheduler is slow
    to answer (a loaded CI machine)."""
    return sorted(client.run(_executed))


@pytest.fixture(scope="module")
def threads_client():
    """Workers in this process: what the test patches here, they run."""
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as c,
    ):
        yield c


def test_the_same_table_row_for_row_as_the_local_sweep(client):
    kw = dict(grid=GRID, seeds=range(2), until=UNTIL, cache=None, progress=False)
    local = fs.sweep(SCENARIO, workers=1, **kw)
    before = sum(client.run(_executed).values())
    remote = fs.sweep(SCENARIO, client=client, **kw)
    assert sum(client.run(_executed).values()) - before == 8  # every run was a task on the cluster
    pd.testing.assert_frame_equal(volatile_free(local), volatile_free(remote))
    assert remote.attrs == {"ran": 8, "from_cache": 0}
    assert (remote["wall_s"] > 0).all()


def test_another_design_on_the_cluster_too(client):
    kw = dict(
        grid={"safety_poll_interval": [1.0, 15.0], "faults.0.drop": [1.0]},
        seeds=[0],
        until=120.0,
        cache=None,
        progress=False,
    )
    local = fs.sweep(OUTBOX, **kw)
    remote = fs.sweep(OUTBOX, client=client, **kw)
    pd.testing.assert_frame_equal(volatile_free(local), volatile_free(remote))
    assert remote["commit_to_handled_p99_s"].iloc[1] > remote["commit_to_handled_p99_s"].iloc[0]


def test_the_cache_stays_here_resume_and_repeat(client, tmp_path):
    cache = tmp_path / "sweeps.duckdb"
    kw = dict(seeds=range(2), until=UNTIL, cache=cache, progress=False)
    half = fs.sweep(SCENARIO, grid={**GRID, "reactor_poll_interval": [0.5]}, client=client, **kw)
    assert half.attrs == {"ran": 4, "from_cache": 0} and cache.exists()
    whole = fs.sweep(SCENARIO, grid=GRID, client=client, **kw)  # resumes: only P = 2 runs
    assert whole.attrs == {"ran": 4, "from_cache": 4}
    before = sum(client.run(_executed).values())
    again = fs.sweep(SCENARIO, grid=GRID, workers=1, **kw)  # the rows the cluster made, read here
    assert again.attrs == {"ran": 0, "from_cache": 8}
    pd.testing.assert_frame_equal(whole, again)
    assert fs.sweep(SCENARIO, grid=GRID, client=client, **kw).attrs == {"ran": 0, "from_cache": 8}
    assert sum(client.run(_executed).values()) == before  # a repeated sweep sends nothing


def test_the_progress_bar_advances_as_runs_complete(client, monkeypatch):
    import tqdm.auto

    bars = []

    class Recording(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.steps = []
            bars.append(self)

        def update(self, n=1):
            self.steps.append(n)
            return super().update(n)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    fs.sweep(SCENARIO, grid=GRID, seeds=[0], until=UNTIL, cache=None, progress=True, client=client)
    [bar] = bars
    assert bar.total == 4 and bar.steps == [1, 1, 1, 1] and bar.n == 4


def _set_version(client, worker, version: str) -> None:
    client.run(exec, f"import fanoutsim; fanoutsim.__version__ = {version!r}", workers=[worker])


def test_a_worker_with_another_version_is_refused_before_any_task(client, tmp_path):
    worker = _workers(client)[0]
    before = sum(client.run(_executed).values())
    _set_version(client, worker, "0.0.9")
    try:
        with pytest.raises(SW.ClusterMismatch) as info:
            fs.sweep(SCENARIO, grid=GRID, until=UNTIL, cache=tmp_path / "c.duckdb", progress=False, client=client)
    finally:
        _set_version(client, worker, fs.__version__)
    message = str(info.value)
    assert f"this process runs fanoutsim {fs.__version__}" in message
    assert f"{worker}: fanoutsim 0.0.9" in message and "1 of its 2 workers" in message
    assert info.value.versions[worker] == "0.0.9"
    assert sum(client.run(_executed).values()) == before  # no task ran
    assert not (tmp_path / "c.duckdb").exists()
    # the worker back at this version: the sweep runs
    assert SW.check_cluster(client) == {w: fs.__version__ for w in _workers(client)}


def test_a_worker_without_fanoutsim_is_refused(client):
    worker = _workers(client)[-1]
    client.run(
        exec,
        "import sys; sys.modules['_fanoutsim_hidden'] = sys.modules['fanoutsim']; sys.modules['fanoutsim'] = None",
        workers=[worker],
    )
    try:
        with pytest.raises(SW.ClusterMismatch, match=rf"{worker}: no fanoutsim \(ModuleNotFoundError"):
            fs.sweep(SCENARIO, until=UNTIL, cache=None, progress=False, client=client)
    finally:
        client.run(
            exec, "import sys; sys.modules['fanoutsim'] = sys.modules.pop('_fanoutsim_hidden')", workers=[worker]
        )


def test_a_failed_run_names_its_setting_and_seed_and_keeps_the_finished(threads_client, tmp_path, monkeypatch):
    cache = tmp_path / "c.duckdb"
    real = SW._run_one

    def failing(run):
        if run.values == (2.0, 50) and run.seed == 1:
            time.sleep(1.0)  # the others finish first
            raise ZeroDivisionError("boom")
        return real(run)

    monkeypatch.setattr(SW, "_run_one", failing)
    with pytest.raises(
        SW.RunFailed,
        match=r"sweep run 8 \(reactor_poll_interval=2.0, reactor_poll_batch_limit=50, "
        r"seed=1\) failed: ZeroDivisionError: boom",
    ) as info:
        fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False, client=threads_client)
    assert info.value.setting == {"reactor_poll_interval": 2.0, "reactor_poll_batch_limit": 50}
    assert info.value.seed == 1 and isinstance(info.value.__cause__, ZeroDivisionError)
    monkeypatch.setattr(SW, "_run_one", real)
    df = fs.sweep(SCENARIO, grid=GRID, seeds=range(2), until=UNTIL, cache=cache, progress=False, client=threads_client)
    assert df.attrs["from_cache"] >= 1 and df.attrs["ran"] + df.attrs["from_cache"] == 8


def test_a_failed_run_is_reported_the_same_way_locally(tmp_path, monkeypatch):
    real = SW._run_one

    def failing(run):
        if run.seed == 1:
            raise ValueError("nope")
        return real(run)

    monkeypatch.setattr(SW, "_run_one", failing)
    with pytest.raises(SW.RunFailed, match=r"\(reactor_poll_interval=0.5, seed=1\) failed: ValueError: nope"):
        fs.sweep(
            SCENARIO,
            grid={"reactor_poll_interval": [0.5]},
            seeds=range(2),
            until=UNTIL,
            cache=tmp_path / "c.duckdb",
            progress=False,
        )
    monkeypatch.setattr(SW, "_run_one", real)
    df = fs.sweep(
        SCENARIO,
        grid={"reactor_poll_interval": [0.5]},
        seeds=range(2),
        until=UNTIL,
        cache=tmp_path / "c.duckdb",
        progress=False,
    )
    assert df.attrs == {"ran": 1, "from_cache": 1}


def test_ctrl_c_cancels_the_outstanding_tasks_and_keeps_the_finished(threads_client, tmp_path, monkeypatch):
    cache = tmp_path / "c.duckdb"
    real_completed, cancelled = SW._completed, []

    def interrupted(futures):
        for i, fut in enumerate(real_completed(futures)):
            if i == 1:
                raise KeyboardInterrupt  # Ctrl-C while waiting for the second run
            yield fut

    real_cancel = threads_client.cancel

    def cancel(futures, *a, **k):
        cancelled.extend(futures)
        return real_cancel(futures, *a, **k)

    monkeypatch.setattr(SW, "_completed", interrupted)
    monkeypatch.setattr(threads_client, "cancel", cancel)
    grid = {"reactor_poll_interval": [0.25, 0.5, 1.0, 2.0], "reactor_poll_batch_limit": [2, 50]}
    with pytest.raises(KeyboardInterrupt):
        fs.sweep(SCENARIO, grid=grid, seeds=range(2), until=300.0, cache=cache, progress=False, client=threads_client)
    assert len(cancelled) >= 8  # 16 runs on 2 single-threaded workers: most were still outstanding
    deadline = time.monotonic() + 10
    while not all(f.cancelled() or f.done() for f in cancelled) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(f.cancelled() for f in cancelled if f.status != "finished")
    monkeypatch.undo()
    df = fs.sweep(SCENARIO, grid=grid, seeds=range(2), until=300.0, cache=cache, progress=False, client=threads_client)
    assert df.attrs["from_cache"] == 1 and df.attrs["ran"] == 15  # the one finished row was kept


def test_bad_client_arguments(client):
    with pytest.raises(ValueError, match="give workers .* or client .*, not both"):
        fs.sweep(SCENARIO, until=UNTIL, cache=None, progress=False, client=client, workers=2)
    with pytest.raises(ValueError, match="client must be a dask.distributed.Client, got str"):
        fs.sweep(SCENARIO, until=UNTIL, cache=None, progress=False, client="tcp://localhost:8786")


def test_runs_that_cannot_be_pickled_are_refused_before_any_task(client, monkeypatch):
    import dataclasses

    keys, runs = SW.grid_runs(SCENARIO, GRID, range(1), UNTIL)
    unpicklable = [dataclasses.replace(r, scenario=lambda: None) for r in runs]
    monkeypatch.setattr(SW, "grid_runs", lambda *a, **k: (keys, unpicklable))
    before = sum(client.run(_executed).values())
    with pytest.raises(ValueError, match=r"cannot be sent to a Dask cluster \(.+\); sweep without a client"):
        fs.sweep(SCENARIO, grid=GRID, cache=None, progress=False, client=client)
    assert sum(client.run(_executed).values()) == before


def test_the_cluster_is_reached_through_its_concurrent_futures_executor(threads_client, monkeypatch):
    made = []
    real = threads_client.get_executor

    def get_executor(**kw):
        made.append(kw)
        return real(**kw)

    monkeypatch.setattr(threads_client, "get_executor", get_executor)
    df = fs.sweep(SCENARIO, grid=GRID, seeds=[0], until=UNTIL, cache=None, progress=False, client=threads_client)
    assert made == [{"pure": False}] and df.attrs == {"ran": 4, "from_cache": 0}
