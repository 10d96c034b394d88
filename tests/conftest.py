"""Shared fixtures: most engine tests run once per store adapter."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from pgfixtures import pg_dsn, pg_store, pg_url  # noqa: F401  (PostgreSQL fixtures)

import fanoutsim as fs
from fanoutsim.faults import Crash, InsertFailed, NoFaults

# the lessons' experiments live beside the notebooks (notebooks/experiments), as ``experiments``
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))


@pytest.fixture(params=["memory", "duckdb"])
def store(request):
    return request.param


class CrashAt(NoFaults):
    """A hand-written fault plan: crash at the ``nth`` pass through ``point``."""

    def __init__(self, point: str, nth: int = 1) -> None:
        self.at, self.nth, self.passes = point, nth, 0

    def point(self, name, now, **where):
        if name == self.at:
            self.passes += 1
            if self.passes == self.nth:
                raise Crash(name)


class FailInserts(NoFaults):
    """Execution inserts for ``workflow`` fail while ``failing`` is True."""

    def __init__(self, workflow: str) -> None:
        self.workflow, self.failing = workflow, True

    def before_insert(self, workflow, now, **where):
        if self.failing and workflow == self.workflow:
            raise InsertFailed(f"insert into workflow_executions for {workflow} refused")


@pytest.fixture
def make_sim(store):
    def make(seed=0, faults=None, **config):
        return fs.Simulation(config=fs.SchedulerConfig(**config), seed=seed, store=store, faults=faults)

    return make


def wait_for(predicate, timeout=10.0) -> bool:
    """Poll ``predicate`` every 20 ms until it holds (True) or ``timeout`` s pass (False):
    the wall-clock tests wait for a state, never for a fixed time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False
