"""The notebooks' studies as fs.sweep calls: notebook 9's lease length x work
law sweep (lx.lease_scenario, la.work_laws, la.lease_table) gives the runs the
hand-built lease_run gives."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from experiments import leases as lx  # notebooks/experiments: the lessons' experiments

import fanoutsim as fs
from fanoutsim.analysis import leases as la


@pytest.fixture(scope="module")
def table():
    laws = la.work_laws(5.0)
    runs = fs.sweep(
        lx.lease_scenario(seconds=300.0),
        grid={
            "consumers.worker.duration": [laws["exponential"], laws["uniform"]],
            "consumers.worker.lease_seconds": [5.0, 10.0],
        },
        cache=None,
        progress=False,
    )
    return la.lease_table(runs)


def test_the_sweep_equals_the_hand_built_runs(table):
    old = lx.lease_sweep(leases=(5.0, 10.0), laws=("exponential", "uniform"), seconds=300.0)
    columns = [
        "law",
        "lease_seconds",
        "mean_work",
        "p_exceeds",
        "published",
        "delivered",
        "duplicates",
        "dups_per_1000",
        "theory_per_1000",
        "dead_lettered",
        "lost",
        "valid",
        "p50_s",
        "p99_s",
    ]
    pd.testing.assert_frame_equal(table[columns], old[columns], check_dtype=False)
    assert table["duplicates"].iloc[0] > table["duplicates"].iloc[1] > 0  # exponential: fewer at 10 s
    assert table["duplicates"].iloc[3] == 0  # uniform on [0, 10 s] never outlasts a 10 s lease


def test_work_laws_have_the_mean_they_are_named_for():
    from fanoutsim.kernel.dist import parse_dist

    for law, table in la.work_laws(4.0).items():
        assert parse_dist(table).mean == pytest.approx(4.0), law
    assert la.work_laws(4.0)["lognormal"]["median"] == pytest.approx(4.0 * math.exp(-0.5))


def test_lease_table_needs_the_sweep_keys():
    runs = fs.sweep(lx.lease_scenario(seconds=60.0), cache=None, progress=False)
    with pytest.raises(KeyError, match="consumers.worker.duration"):
        la.lease_table(runs)
    with pytest.raises(ValueError, match="order must be one of"):
        lx.lease_scenario(order="fifo")
