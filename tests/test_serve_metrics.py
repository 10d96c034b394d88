"""``GET /metrics`` of ``fanoutsim serve`` for each design, read with
prometheus_client's own parser: its lag gauges and its latency histogram are
there, each family's HELP explains it (never its name again), the
histogram counts every delivery the run made, and the names are those
``sim.metrics()`` gives on the virtual clock. Wall-clock runs: each waits for
a state (deliveries done), never for a time."""

from __future__ import annotations

import json
import urllib.request

import pytest
from conftest import wait_for
from prometheus_client.parser import text_string_to_metric_families
from test_serve_observe import get, start, stop

from fanoutsim import examples
from fanoutsim.scenario import load_scenario

LAGS = {
    "reactor": {"fanoutsim_reactor_watermark_lag_seconds"},
    "outbox": {"fanoutsim_outbox_cursor_lag_rows", "fanoutsim_outbox_cursor_lag_seconds"},
    "leases": {"fanoutsim_lease_checkpoint_lag_events", "fanoutsim_lease_checkpoint_lag_seconds"},
}
HISTOGRAM = {
    "reactor": "fanoutsim_reactor_fire_to_dispatch_seconds",
    "outbox": "fanoutsim_outbox_commit_to_handled_seconds",
    "leases": "fanoutsim_lease_publish_to_ack_seconds",
}
SCENARIO = {"reactor": "realtime", "outbox": "outbox", "leases": "leases"}


def post(address: str, token: str, body: dict) -> dict:
    req = urllib.request.Request(
        f"{address}/write",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as reply:
        return json.loads(reply.read())


def families(address: str) -> dict:
    code, text = get(f"{address}/metrics")
    assert code == 200
    return {f.name: f for f in text_string_to_metric_families(text)}


def total(fams: dict, family: str, sample: str, **labels: str) -> float:
    """The sum of ``sample``'s values in ``family`` over the series with ``labels``."""
    f = fams.get(family)
    if f is None:
        return 0.0
    return sum(s.value for s in f.samples if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.fixture(params=list(SCENARIO))
def served(request, tmp_path):
    design = request.param
    db = tmp_path / f"{design}.duckdb"
    proc, info = start(db, "--scenario", str(examples.path(SCENARIO[design])), "--rate", "0")
    try:
        yield design, f"http://127.0.0.1:{info['port']}", info["token"]
    finally:
        stop(proc)


WRITES = {  # a few events each: the reactor's both subscriptions take a price of 150
    "reactor": [{"reactor": "pricing_reactor", "payload": {"quote": {"price": 150}}}] * 3,
    "outbox": [{"page": f"p{n}"} for n in range(3)],
    "leases": [{"partition": "p0"}] * 3,
}
OUTBOX_CONSUMERS = ("indexer", "search", "analytics", "triage")
LEASE_CONSUMERS = ("indexer", "enricher", "archiver")  # audit joins later


def delivered(design: str, fams: dict) -> bool:
    """Whether the run has delivered every event :data:`WRITES` wrote."""
    if design == "reactor":  # two subscriptions x three firings
        return total(fams, HISTOGRAM[design], f"{HISTOGRAM[design]}_count") >= 6
    if design == "outbox":
        lag = "fanoutsim_outbox_cursor_lag_rows"
        caught_up = all(total(fams, lag, lag, consumer=c) == 0 for c in OUTBOX_CONSUMERS)
        return caught_up and total(fams, "fanoutsim_outbox_commits", "fanoutsim_outbox_commits_total") == 3
    acked = "fanoutsim_lease_acked"
    return all(total(fams, acked, f"{acked}_total", consumer=c) >= 3 for c in LEASE_CONSUMERS)


def test_metrics_have_each_designs_lag_gauges_and_histogram_explained_and_counting_deliveries(served):
    design, address, token = served
    for body in WRITES[design]:
        post(address, token, body)
    assert wait_for(lambda: delivered(design, families(address)), timeout=120)
    fams = families(address)
    for name, family in fams.items():  # every family explains itself
        assert family.documentation and name not in family.documentation, name
        assert family.documentation != "(not described)", name
    for lag in LAGS[design]:
        assert fams[lag].type == "gauge" and fams[lag].samples, lag
    hist = HISTOGRAM[design]
    assert fams[hist].type == "histogram" and "Seconds" in fams[hist].documentation
    counted = total(fams, hist, f"{hist}_count")
    inf = total(fams, hist, f"{hist}_bucket", le="+Inf")
    assert counted == inf > 0  # the +Inf bucket holds every observation
    if design == "reactor":  # one observation per execution a subscription dispatched: the table's rows
        code, body = get(f"{address}/status", token)
        assert code == 200 and counted == sum(json.loads(body)["executions"].values()) == 6
        assert len(fams["fanoutsim_reactor_watermark_lag_seconds"].samples) == 2  # both subscriptions read
    elif design == "outbox":  # one per row handled: the handled counter, consumer by consumer
        for c in OUTBOX_CONSUMERS:
            handled = total(fams, "fanoutsim_outbox_handled", "fanoutsim_outbox_handled_total", consumer=c)
            assert total(fams, hist, f"{hist}_count", consumer=c) == handled >= 1
            assert (
                total(fams, "fanoutsim_outbox_cursor_lag_seconds", "fanoutsim_outbox_cursor_lag_seconds", consumer=c)
                == 0
            )
    else:  # one per ack that resolved its event
        for c in LEASE_CONSUMERS:
            acked = total(fams, "fanoutsim_lease_acked", "fanoutsim_lease_acked_total", consumer=c)
            assert total(fams, hist, f"{hist}_count", consumer=c) == acked >= 3
        lagging = {
            (s.labels["consumer"], s.labels["partition"]) for s in fams["fanoutsim_lease_checkpoint_lag_events"].samples
        }
        assert {("indexer", "p0"), ("enricher", "p0"), ("archiver", "p0")} <= lagging


@pytest.mark.parametrize("design", list(SCENARIO))
def test_the_virtual_clock_names_the_same_lag_gauges_and_histogram(design):
    from fanoutsim.kernel.metrics import parse_series

    sim = load_scenario(examples.path(SCENARIO[design])).run(until=30)
    names = {parse_series(k)[0] for k in sim.metrics()}
    assert LAGS[design] <= names
    assert {f"{HISTOGRAM[design]}_{part}" for part in ("bucket", "count", "sum")} <= names
