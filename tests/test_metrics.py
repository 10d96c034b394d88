"""Counters and histograms: one series per name and label set, however they
are bumped; the Prometheus text format, typed and explained; and each
design's metrics: every one described, its latency histogram counting each
delivery, its lag gauges reading the tables."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fanoutsim import designs, examples
from fanoutsim.designs.reactor.analysis.delivery import watermarks
from fanoutsim.kernel.metrics import (
    KERNEL_METRICS,
    LATENCY_BUCKETS,
    Help,
    LockedMetrics,
    Metrics,
    bucket_label,
    family_of,
    parse_series,
    prometheus_text,
)
from fanoutsim.scenario import load_scenario


def test_labels_in_any_order_are_one_series():
    m = Metrics()
    m.inc("x_total", a="1", b="2")
    m.inc("x_total", 2, b="2", a="1")
    assert m.get("x_total", a="1", b="2") == 3
    assert m.as_dict() == {'x_total{a="1",b="2"}': 3}


def test_a_bound_counter_bumps_the_same_series_as_inc():
    m = Metrics()
    c = m.counter("handled_total", consumer="indexer")
    c()
    c(4)
    m.inc("handled_total", consumer="indexer")
    m.counter("handled_total", consumer="mailer")()
    assert m.get("handled_total", consumer="indexer") == 6
    assert m.as_dict() == {'handled_total{consumer="indexer"}': 6, 'handled_total{consumer="mailer"}': 1}


def test_a_family_binds_each_label_value_once_and_names_the_series_inc_and_observe_do():
    m, by_hand = Metrics(), Metrics()
    handled = m.counters("handled_total", "consumer")
    waits = m.histograms("wait_seconds", "consumer")
    assert m.as_dict() == {}  # nothing appears before its first use
    assert handled["indexer"] is handled["indexer"]  # bound once
    for who, x in [("indexer", 0.02), ("mailer", 3.0), ("indexer", 0.7)]:
        handled[who]()
        waits[who](x)
        by_hand.inc("handled_total", consumer=who)
        by_hand.observe("wait_seconds", x, consumer=who)
    handled["mailer"](2)
    by_hand.inc("handled_total", 2, consumer="mailer")
    assert m.as_dict() == by_hand.as_dict()
    assert m.get("handled_total", consumer="indexer") == 2


@pytest.mark.parametrize("use", ["bump", "bind a histogram"])
def test_a_locked_family_takes_the_registry_lock(use):
    # binding a new histogram adds a series: under the lock, or a reader's
    # as_dict (GET /metrics) could find the dict changing as it iterates
    m = LockedMetrics()
    bump = m.counters("n_total", "who")["all"]
    waits = m.histograms("wait_seconds", "who")
    act = bump if use == "bump" else lambda: waits["all"]
    done = threading.Event()
    with m._lock:
        t = threading.Thread(target=lambda: (act(), done.set()))
        t.start()
        assert not done.wait(0.2)  # blocked behind the lock
        assert m._values == {} and m._histograms == {}
    assert done.wait(5)
    t.join()
    assert len(m.as_dict()) == (1 if use == "bump" else len(LATENCY_BUCKETS) + 3)


def test_a_locked_counter_waits_for_the_registry_lock():
    # under the GIL a lost update is too rare to catch by racing threads, so this
    # shows the mechanism instead: a bump cannot happen while another holds the lock
    m = LockedMetrics()
    c = m.counter("n_total", who="all")
    done = threading.Event()
    with m._lock:
        t = threading.Thread(target=lambda: (c(), done.set()))
        t.start()
        assert not done.wait(0.2)  # blocked behind the lock
        assert m._values == {}
    assert done.wait(5)
    t.join()
    assert m.get("n_total", who="all") == 1


# -- histograms and the text format ---------------------------------------------------
def test_a_histogram_shows_as_prometheus_writes_one_cumulative_buckets_count_and_sum():
    m = Metrics()
    for value in (0.05, 0.2, 0.2, 1.0, 7.0):  # 1.0 sits on a bound: le counts it there
        m.observe("lat_seconds", value, (0.1, 1.0, 5.0), consumer="a")
    assert m.as_dict() == {
        'lat_seconds_bucket{consumer="a",le="0.1"}': 1,
        'lat_seconds_bucket{consumer="a",le="1.0"}': 4,
        'lat_seconds_bucket{consumer="a",le="5.0"}': 4,
        'lat_seconds_bucket{consumer="a",le="+Inf"}': 5,
        'lat_seconds_count{consumer="a"}': 5,
        'lat_seconds_sum{consumer="a"}': pytest.approx(8.45),
    }
    with pytest.raises(ValueError, match="lat_seconds has the buckets"):
        m.observe("lat_seconds", 1.0, (1.0, 2.0), consumer="a")


@given(st.lists(st.floats(min_value=0, max_value=5000, allow_nan=False), max_size=60))
def test_every_observation_lands_in_exactly_the_buckets_at_or_above_it(values):
    m = LockedMetrics()
    h = m.histogram("x_seconds")  # the bound form, as a hot path uses it
    for v in values:
        h(v)
    got = m.as_dict()
    for bound in (*LATENCY_BUCKETS, math.inf):
        key = f'x_seconds_bucket{{le="{bucket_label(bound)}"}}'
        assert got.get(key, 0) == sum(v <= bound for v in values)
    assert got.get("x_seconds_count", 0) == len(values)


def test_the_text_format_types_and_explains_each_family_and_the_client_parses_it_back():
    m = Metrics()
    m.inc("jobs_total", 3, queue="q")
    m.observe("wait_seconds", 0.3, (0.1, 1.0), queue="q")
    values = {**m.as_dict(), 'depth{queue="q"}': 7, "mystery": 1}
    described = {
        "jobs_total": Help("counter", "Jobs finished, by queue."),
        "wait_seconds": Help("histogram", "Seconds a job waited, by queue."),
        "depth": Help("gauge", "Jobs waiting now, by queue."),
    }
    families = {f.name: f for f in text_string_to_metric_families(prometheus_text(values, described).decode())}
    assert {n: f.type for n, f in families.items()} == {
        "jobs": "counter",  # the client names a counter's family without _total
        "wait_seconds": "histogram",
        "depth": "gauge",
        "mystery": "gauge",  # undescribed: a gauge, as its name does not end in _total
    }
    assert families["wait_seconds"].documentation == "Seconds a job waited, by queue."
    assert families["mystery"].documentation == "(not described)"
    samples = {(s.name, s.labels.get("le")): s.value for s in families["wait_seconds"].samples}
    assert samples == {
        ("wait_seconds_bucket", "0.1"): 0,
        ("wait_seconds_bucket", "1.0"): 1,
        ("wait_seconds_bucket", "+Inf"): 1,
        ("wait_seconds_count", None): 1,
        ("wait_seconds_sum", None): pytest.approx(0.3),
    }


# -- each design's metrics, on the virtual clock ---------------------------------------
RUNS = {"reactor": "crashes", "outbox": "outbox-crashes", "leases": "leases"}
LAGS = {
    "reactor": ("fanoutsim_reactor_watermark_lag_seconds",),
    "outbox": ("fanoutsim_outbox_cursor_lag_rows", "fanoutsim_outbox_cursor_lag_seconds"),
    "leases": ("fanoutsim_lease_checkpoint_lag_events", "fanoutsim_lease_checkpoint_lag_seconds"),
}
HISTOGRAMS = {
    "reactor": "fanoutsim_reactor_fire_to_dispatch_seconds",
    "outbox": "fanoutsim_outbox_commit_to_handled_seconds",
    "leases": "fanoutsim_lease_publish_to_ack_seconds",
}


@pytest.mark.parametrize("design", list(RUNS))
def test_every_metric_a_run_counts_is_explained_with_its_kind(design):
    sim = load_scenario(examples.path(RUNS[design])).run(until=120)
    described = {**KERNEL_METRICS, **designs.get(design).metrics}
    families = {family_of(parse_series(k)[0], described) for k in sim.metrics()}
    names = {name for name, _ in families}
    assert names >= {*LAGS[design], HISTOGRAMS[design]}
    for name, kind in families:
        assert name in described, f"{name} has no Help in designs/{design}/metrics.py"
        help_ = described[name]
        assert help_.kind == kind and name not in help_.text and len(help_.text) > 30
        if name.endswith("_seconds"):
            assert "Seconds" in help_.text  # the unit, said
    assert HISTOGRAMS[design] in {n for n, k in families if k == "histogram"}


def test_the_reactor_histogram_counts_each_dispatch_and_the_lag_is_the_oldest_unread_firings_age(make_sim):
    sim = make_sim()
    sim.runner.register_workflow("wf", duration=0.01)
    sim.runner.register_workflow("idle", duration=0.01)
    sim.runner.subscribe_workflow_to_reactor("r", "wf", tenant="t")
    sim.runner.subscribe_workflow_to_reactor("r", "idle", tenant="other")  # its stream is empty: lag 0
    for at in (0.3, 0.6, 2.2):
        sim.run(until=at)
        sim.fire("r", {"n": 1}, tenant="t")
    sim.run(until=10.0)
    m = sim.metrics()
    assert m['fanoutsim_reactor_fire_to_dispatch_seconds_count{reactor="r"}'] == len(sim.executions()) == 3
    # fired at 0.3 and 0.6 s, dispatched by the poll at 1 s; 2.2 s by the poll at 3 s
    assert m['fanoutsim_reactor_fire_to_dispatch_seconds_sum{reactor="r"}'] == pytest.approx(0.7 + 0.4 + 0.8)
    assert m['fanoutsim_reactor_fire_to_dispatch_seconds_bucket{le="0.5",reactor="r"}'] == 1
    lags = {k: v for k, v in m.items() if k.startswith("fanoutsim_reactor_watermark_lag_seconds")}
    read_all = {
        'fanoutsim_reactor_watermark_lag_seconds{reactor="r",tenant="t",workflow="wf"}': 0.0,
        'fanoutsim_reactor_watermark_lag_seconds{reactor="r",tenant="other",workflow="idle"}': 0.0,
    }
    assert lags == read_all  # every firing read: no lag, however long ago the last one was
    sim.run(until=10.5)
    sim.fire("r", {"n": 1}, tenant="t")
    sim.run(until=10.8)  # fired at 10.5, the next poll at 11: unread for 0.3 s
    m = sim.metrics()
    assert m['fanoutsim_reactor_watermark_lag_seconds{reactor="r",tenant="t",workflow="wf"}'] == pytest.approx(0.3)
    status = {s["workflow"]: s["watermark_lag_s"] for s in watermarks(sim)}  # the report's and status's
    assert status == {"wf": pytest.approx(0.3), "idle": 0.0}


def test_the_outbox_histogram_counts_each_row_handled_and_the_lag_is_the_oldest_rows_wait():
    from fanoutsim import OutboxSimulation

    sim = OutboxSimulation(seed=0)
    sim.register_consumer("fast", duration=0.01)
    sim.register_consumer("stuck", duration=1000.0)  # busy with its first row for the whole run
    sim.run(until=1.0)
    for _ in range(3):
        sim.commit("p", "b")
    sim.run(until=31.0)
    m = sim.metrics()
    assert m['fanoutsim_outbox_commit_to_handled_seconds_count{consumer="fast"}'] == 3
    assert m['fanoutsim_outbox_handled_total{consumer="fast"}'] == 3
    assert 'fanoutsim_outbox_commit_to_handled_seconds_count{consumer="stuck"}' not in m
    assert m['fanoutsim_outbox_cursor_lag_rows{consumer="fast"}'] == 0
    assert m['fanoutsim_outbox_cursor_lag_seconds{consumer="fast"}'] == 0.0
    assert m['fanoutsim_outbox_cursor_lag_rows{consumer="stuck"}'] == 3
    assert m['fanoutsim_outbox_cursor_lag_seconds{consumer="stuck"}'] == pytest.approx(30.0)  # committed at 1 s


def test_the_leases_histogram_counts_each_ack_and_the_lag_is_per_partition():
    from fanoutsim import LeaseSimulation

    sim = LeaseSimulation(seed=0)
    sim.register_consumer("fast", duration=0.01)
    sim.register_consumer("slow", duration=100.0, lease_seconds=300, in_flight_limit=1, batch_limit=1)
    sim.run(until=1.0)
    for part in ("a", "a", "b"):
        sim.publish(part, "k")
    sim.run(until=21.0)
    m = sim.metrics()
    assert m['fanoutsim_lease_publish_to_ack_seconds_count{consumer="fast"}'] == 3
    assert m['fanoutsim_lease_acked_total{consumer="fast"}'] == 3
    for part in ("a", "b"):
        assert m[f'fanoutsim_lease_checkpoint_lag_events{{consumer="fast",partition="{part}"}}'] == 0
    assert m['fanoutsim_lease_checkpoint_lag_events{consumer="slow",partition="a"}'] == 2
    assert m['fanoutsim_lease_checkpoint_lag_events{consumer="slow",partition="b"}'] == 1
    assert m['fanoutsim_lease_checkpoint_lag_seconds{consumer="slow",partition="a"}'] == pytest.approx(20.0)
