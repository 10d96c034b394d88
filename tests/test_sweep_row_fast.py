"""The reactor's sweep row reads latencies and the backlog straight from the
store's rows: the same floats, in the same order, as latency_frame and
watermarks give, and the frame path whenever a context is not the engine's."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.designs.reactor.analysis.delivery import (
    _seconds,
    backlog_total,
    latency_columns,
    latency_frame,
    watermarks,
)
from fanoutsim.designs.reactor.design import DESIGN
from fanoutsim.designs.reactor.scenario import load_scenario
from fanoutsim.kernel.timeutil import US, UTC, rfc3339, rfc3339_us, to_us

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"


def _frame_row(sim, checked) -> dict:
    """The row as the frames give it (what the sweep row read before)."""
    from fanoutsim.designs.reactor.analysis.delivery import metric_total, percentiles

    executions, subs = sim.executions(), sim.subscriptions()
    lat = latency_frame(sim, executions=executions, subs=subs)
    metrics = sim.metrics()
    row = {}
    for col in ("fire_to_dispatch", "fire_to_claim"):
        stats = percentiles(lat[col])
        for s in ("p50", "p95", "p99", "mean"):
            row[f"{col}_{s}_s"] = np.nan if stats[s] is None else stats[s]
    row["executions"] = len(executions)
    row["firings"] = int(metric_total(metrics, "fanoutsim_reactor_firings_total"))
    row["polls_per_s"] = metric_total(metrics, "fanoutsim_reactor_poll_queries_total") / sim.now
    row["backlog"] = sum(w["backlog"] for w in watermarks(sim, subs=subs))
    row["lost"] = int(checked.total["lost"])
    row["extra_deliveries"] = int(checked.total["extra_deliveries"])
    row["valid"] = bool(checked.valid)
    return row


def _same(sim) -> None:
    lat = latency_frame(sim)
    n, dispatch, claim = latency_columns(sim.store)
    assert n == len(sim.executions())
    # bit for bit, NaN where unclaimed, in the frame's order
    np.testing.assert_array_equal(dispatch, lat["fire_to_dispatch"].to_numpy(dtype=float))
    np.testing.assert_array_equal(claim, lat["fire_to_claim"].to_numpy(dtype=float))
    assert backlog_total(sim.store) == sum(w["backlog"] for w in watermarks(sim))
    checked = DESIGN.check(sim)
    assert DESIGN.sweep_row(sim, checked) == pytest.approx(_frame_row(sim, checked), nan_ok=True, rel=0, abs=0)


@pytest.mark.parametrize(
    "name, until, store",
    [
        ("sweep.toml", 600.0, "memory"),  # unfiltered, 4 subscriptions
        ("crashes.toml", 1800.0, "memory"),  # crashes, failing inserts, CEL filters, duplicates
        ("default.toml", 300.0, "duckdb"),  # the same rows read back through SQL
    ],
)
def test_the_row_equals_the_frames(name, until, store):
    sim = load_scenario(SCENARIOS / name).build(store=store)
    sim.run(until)
    assert latency_columns(sim.store)[0] > 0
    _same(sim)


def test_unclaimed_executions_and_a_backlog_at_the_end():
    sim = fs.Simulation(fs.SchedulerConfig(executor_workers=1), seed=2)
    sim.runner.register_workflow("slow", duration=5.0)
    sim.runner.subscribe_workflow_to_reactor("r", "slow")
    sim.runner.subscribe_workflow_to_reactor("r", "slow", tenant="t2")
    for i in range(6):
        sim.fire("r", {"x": i})
        sim.fire("r", {"x": i}, tenant="t2")
        sim.run(sim.now + 0.7)
    sim.runner.set_subscription_enabled("r", "slow", "t2", enabled=False)
    for i in range(3):
        sim.fire("r", {"x": i}, tenant="t2")
    sim.run(sim.now + 2.0)
    n, dispatch, claim = latency_columns(sim.store)
    assert np.isnan(claim).sum() >= 5 and not np.isnan(dispatch).any()
    assert backlog_total(sim.store) == 3
    _same(sim)


def test_trigger_executions_carry_no_firing_and_are_left_out():
    sim = fs.Simulation(seed=3)
    sim.runner.register_workflow("primary", duration=0.5)
    sim.runner.register_workflow("secondary", triggers=["orders"])
    sim.runner.register_trigger("orders", on="primary")
    sim.runner.subscribe_workflow_to_reactor("r", "primary")
    sim.fire_trigger("orders", {"order": {"qty": 3}})
    sim.fire("r", {"x": 1})
    sim.run(5.0)
    n, dispatch, _ = latency_columns(sim.store)
    assert n == 3 and len(dispatch) == 1
    _same(sim)


def _insert(sim, context: str) -> None:
    with sim.store.transaction() as tx:
        tx.insert_execution(
            {
                "id": "00000000-0000-4000-8000-00000000beef",
                "workflow_name": "audit",
                "tenant_id": "acme",
                "context": context,
                "status": "pending",
                "dispatched_at": sim.now_us(),
                "claimed_at": None,
                "finished_at": None,
            }
        )


def _row_is_the_frames(sim) -> None:
    checked = DESIGN.check(sim)
    row = DESIGN.sweep_row(sim, checked)
    assert row == pytest.approx(_frame_row(sim, checked), nan_ok=True, rel=0, abs=0)
    assert row["executions"] == len(sim.executions())


@pytest.mark.parametrize(
    "context",
    [
        '{"reactor_name": "r", "reactor_firing_id": "f", "reactor_fired_at": "2026-01-01T00:00:00.000000Z"}',
        '{"reactor_name":"r","reactor_firing_id":"f","reactor_fired_at":"2026-01-01T00:00:00.000000Z"} ',
        '{"reactor\\u005fname":"r","reactor\\u005ffiring_id":"f","reactor_fired_at":"2026-01-01T00:00:00.500000Z"}',
        '{"reactor_name":"r","reactor_firing_id":"f","reactor_fired_at":"2026-01-01T00:00:00.500000Z",'
        '"reactor_firing_id":null}',
    ],
)
def test_a_context_the_engine_did_not_write_is_decoded_as_json(context):
    sim = load_scenario(SCENARIOS / "sweep.toml").build()
    sim.run(20.0)
    _insert(sim, context)
    _same(sim)
    _row_is_the_frames(sim)


def test_a_timestamp_in_another_shape_is_read_by_the_frame():
    sim = fs.Simulation(seed=1)
    sim.run(1.0)
    _insert(sim, '{"reactor_name":"r","reactor_firing_id":"f","reactor_fired_at":"2026-01-01T00:00:00.5Z"}')
    assert latency_columns(sim.store) is None
    _row_is_the_frames(sim)


def test_contexts_that_mix_timestamp_shapes_are_each_read_as_written():
    """Beside the engine's own stamps, hand-written ones in other ISO 8601 shapes."""
    sim = load_scenario(SCENARIOS / "sweep.toml").build()
    sim.run(20.0)
    engine_rows = len(latency_frame(sim))
    for eid, stamp in (
        ("beef", "2026-01-01T00:00:00.5Z"),
        ("cafe", "2026-01-01T02:00:00+02:00"),
        ("f00d", "2026-01-01 00:00:01Z"),
    ):
        with sim.store.transaction() as tx:
            tx.insert_execution(
                {
                    "id": f"00000000-0000-4000-8000-00000000{eid}",
                    "workflow_name": "audit",
                    "tenant_id": "acme",
                    "status": "pending",
                    "context": f'{{"reactor_name":"r","reactor_firing_id":"{eid}","reactor_fired_at":"{stamp}"}}',
                    "dispatched_at": sim.now_us(),
                    "claimed_at": None,
                    "finished_at": None,
                }
            )
    lat = latency_frame(sim)
    assert len(lat) == engine_rows + 3
    fired = dict(zip(lat["reactor_firing_id"], lat["fired_at"]))
    assert fired["beef"] == pd.Timestamp("2026-01-01T00:00:00.5", tz="UTC")
    assert fired["cafe"] == pd.Timestamp("2026-01-01T00:00:00", tz="UTC")  # the offset applied
    assert fired["f00d"] == pd.Timestamp("2026-01-01T00:00:01", tz="UTC")
    assert latency_columns(sim.store) is None  # not the engine's shape: the frame reads them
    _row_is_the_frames(sim)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-9_000_000_000 * US, max_value=9_000_000_000 * US))
def test_rfc3339_us_inverts_rfc3339_as_pandas_reads_it(us):
    text = rfc3339(us)
    got = rfc3339_us(text)
    year = int(text[:4]) if text[:4].isdigit() else 0
    if 1678 <= year <= 2261:
        assert got == us
        assert got == int((pd.Timestamp(text) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(1, "us"))
    else:
        assert got is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.integers(-(2**53), 2**53), min_size=1, max_size=20), st.integers(-(2**60), 2**60))
def test_latencies_are_the_seconds_pandas_makes(gaps, since):
    got = np.array([_seconds(None if g is None else since + g, since) for g in gaps], dtype=float)
    expected = (
        pd.Series([pd.NaT if g is None else pd.Timedelta(g, "us") for g in gaps], dtype="timedelta64[us]")
        .dt.total_seconds()
        .to_numpy()
    )
    assert np.array_equal(got, expected, equal_nan=True)  # to the last bit
    assert _seconds(since + 2**53 + 1, since) is None


@settings(max_examples=500, deadline=None)
@given(st.tuples(st.integers(1678, 2261), *(st.integers(0, 99) for _ in range(5))), st.integers(0, 999_999))
def test_a_stamps_second_is_read_as_strptime_reads_it(fields, micros):
    """Each field but the year drawn from all its digits, so that impossible
    dates (month 13, February 30, hour 24, second 60) are drawn too."""
    second = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}".format(*fields)
    try:
        expected = to_us(datetime.strptime(second, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)) + micros
    except ValueError:
        expected = None
    assert rfc3339_us(f"{second}.{micros:06d}Z") == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01T00:00:00.000000+00",
        "2026-01-01 00:00:00.000000Z",
        "2026-13-01T00:00:00.000000Z",
        "2026-01-01T00:00:00.00000aZ",
        "２026-01-01T00:00:00.000000Z",
        "2026-1-01T00:00:00.0000000Z",
        "9999-01-01T00:00:00.000000Z",
        "",
    ],
)
def test_rfc3339_us_refuses_other_shapes(text):
    assert rfc3339_us(text) is None
