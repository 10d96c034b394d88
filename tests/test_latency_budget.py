"""The latency budget: its components, the in-process path, the figures and notebook 1's control."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import fanoutsim as fs
from fanoutsim import plots
from fanoutsim.analysis import (
    BUDGET_COMPONENTS,
    budget_table,
    expected_budget,
    graph_latency,
    latency_budget,
    latency_frame,
    poll_wait_uniformity,
)
from fanoutsim.designs.reactor.scenario import load_scenario
from fanoutsim.widgets import LatencyExplorer, latency_explorer

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fanoutsim" / "examples" / "sweep.toml"
UNIT = re.compile(r"\((ms|s|\u00b5s|1/s|firings|firings / s)\)")


def run(P=1.0, batch=100, fetch_latency=0.0, until=300.0, graph=True, seed=0):
    sc = load_scenario(SCENARIO)
    sc = dataclasses.replace(
        sc, config=dataclasses.replace(sc.config, reactor_poll_interval=P, reactor_poll_batch_limit=batch)
    )
    sim = sc.build(seed=seed)
    sim.fetch_latency = fetch_latency
    if graph:
        sim.runner.register_computation_graph("pricing_reactor", lambda s: s["quote"]["price"], name="router")
    sim.run(until)
    return sim


@pytest.fixture(scope="module")
def sim():
    return run()


@pytest.fixture(scope="module")
def budget(sim):
    return latency_budget(sim)


def test_the_components_add_up(sim, budget):
    lat = latency_frame(sim)
    assert len(budget) == len(lat) > 500
    assert list(budget["execution_id"]) == list(lat["execution_id"])
    done = budget.dropna(subset=["total_s"])
    assert len(done) > 0.95 * len(budget)
    np.testing.assert_allclose(done["poll_wait_s"] + done["round_trip_s"], done["fire_to_dispatch"], atol=1e-6)
    np.testing.assert_allclose(
        done["poll_wait_s"] + done["round_trip_s"] + done["claim_wait_s"], done["fire_to_claim"], atol=1e-6
    )
    np.testing.assert_allclose(done[list(BUDGET_COMPONENTS)].sum(axis=1), done["total_s"], atol=1e-6)
    assert (done[list(BUDGET_COMPONENTS)] >= 0).all().all()
    # order of the timestamps
    assert (budget["fetched_at"] >= budget["fired_at"]).all()
    assert (budget["dispatched_at"] >= budget["fetched_at"]).all()


def test_poll_wait_is_uniform_on_zero_to_p(budget):
    assert budget["round_trip_s"].abs().max() < 1e-6  # no fetch latency: no round trip
    assert budget["poll_wait_s"].min() >= 0 and budget["poll_wait_s"].max() < 1.0
    u = poll_wait_uniformity(budget["poll_wait_s"], 1.0)
    assert u["count"] == len(budget)
    assert u["within_p"] == 1.0
    assert u["mean_s"] == pytest.approx(0.5, abs=0.05)
    assert u["ks"] < 2 * u["ks_critical_5pct"]


def test_a_round_trip_is_its_own_component():
    b = latency_budget(run(fetch_latency=0.05, until=120.0))
    # each drain follows its own fetch by exactly one round trip
    np.testing.assert_allclose(b["round_trip_s"], 0.05, atol=2e-6)


def test_the_in_process_path_runs_at_the_firings_own_time(sim):
    g = graph_latency(sim)
    fired = int(sum(v for k, v in sim.metrics().items() if k.startswith("fanoutsim_reactor_firings_total")))
    assert len(g) == fired > 0
    assert set(g["graph"]) == {"router"}
    assert (g["latency_s"] == 0.0).all()
    assert (g["called_at"] == g["fired_at"]).all()


def test_budget_table_rows_and_the_seed_000_estimate(sim, budget):
    t = budget_table(sim, budget)
    assert list(t.index) == ["Cloacina's estimate", "DB path (measured)", "in-process graph (measured)"]
    est = t.loc["Cloacina's estimate"]
    assert est["poll_wait_s"] == pytest.approx(0.5)  # P / 2
    assert est["claim_wait_s"] == pytest.approx(0.05)  # half the executor's 0.1 s tick
    assert 0.02 < est["run_s"] < 0.05  # audit 0.02 s and ledger_sync ~0.05 s, half each
    db = t.loc["DB path (measured)"]
    assert db["poll_wait_s"] == pytest.approx(budget["poll_wait_s"].mean())
    assert db["total_s"] == pytest.approx(db[list(BUDGET_COMPONENTS)].sum())
    assert t.loc["in-process graph (measured)", "total_s"] == 0.0
    assert expected_budget(fs.SchedulerConfig(reactor_poll_interval=3.0), fetch_latency=0.01, run_s=1.0) == {
        "poll_wait_s": 1.5,
        "round_trip_s": 0.01,
        "claim_wait_s": 0.05,
        "run_s": 1.0,
    }


def test_without_graphs_the_in_process_row_is_missing_data():
    s = run(graph=False, until=30.0)
    assert graph_latency(s).empty
    assert np.isnan(budget_table(s).loc["in-process graph (measured)", "total_s"])
    assert isinstance(plots.budget_bars(s), Figure)


def test_uniformity_statistic_tells_uniform_from_not():
    rng = np.random.default_rng(0)
    good = poll_wait_uniformity(rng.uniform(0, 2.0, 5000), 2.0)
    bad = poll_wait_uniformity(rng.uniform(0, 1.0, 5000), 2.0)
    assert good["ks"] < good["ks_critical_5pct"] < bad["ks"]
    assert poll_wait_uniformity([], 1.0)["count"] == 0


def labelled(ax):
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert UNIT.search(ax.get_xlabel()), ax.get_xlabel()


def test_poll_wait_histogram_draws_the_theory(sim, budget):
    fig = plots.poll_wait_histogram(budget, 1.0)
    (ax,) = fig.axes
    labelled(ax)
    assert "poll wait" in ax.get_xlabel() and "(ms)" in ax.get_xlabel()
    (theory,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    xs, ys = theory.get_data()
    assert list(xs) == [0.0, 1000.0]
    assert ys[0] == pytest.approx(len(budget) * 50.0 / 1000.0)  # n * width / P
    assert sum(p.get_height() for p in ax.patches) == len(budget)
    # from a Simulation, P is the run's
    assert plots.poll_wait_histogram(sim).axes[0].get_title() == "Poll wait at P = 1 s: uniform on [0, P)"
    with pytest.raises(ValueError, match="poll_interval"):
        plots.poll_wait_histogram(budget)
    # a backlog (waits past P: the median here is 10x the interval) is not called uniform
    queued = budget.assign(poll_wait_s=budget["poll_wait_s"] + 10.0)
    title = plots.poll_wait_histogram(queued, 1.0).axes[0].get_title()
    assert title == "Poll wait at P = 1 s: a backlog, far past the uniform [0, P)"


def test_budget_bars_stack_the_components(sim, budget):
    t = budget_table(sim, budget)
    fig = plots.budget_bars(t)
    (ax,) = fig.axes
    labelled(ax)
    assert [tick.get_text() for tick in ax.get_yticklabels()] == list(t.index)
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["poll wait", "insert / round trip", "claim wait", "run", "in-process call"]
    # the DB bar's segments add up to its total, in ms
    widths = [p.get_width() for p in ax.patches]
    db = sum(widths[1::3])
    assert db == pytest.approx(t.loc["DB path (measured)", "total_s"] * 1000.0)
    texts = [t_.get_text() for t_ in ax.texts]
    assert any("Cloacina: tens of" in x for x in texts)


def test_the_latency_explorer_reruns_and_redraws():
    w = latency_explorer(SCENARIO, until=120.0)
    assert isinstance(w, LatencyExplorer)
    # bounds the engine accepts
    assert w.poll_interval.min > 0 and w.batch_limit.min >= 1
    fs.SchedulerConfig(reactor_poll_interval=w.poll_interval.min, reactor_poll_batch_limit=w.batch_limit.min)
    assert w.poll_interval.value == 1.0 and w.batch_limit.value == 100
    first, summary = w.figure, w.summary.value
    assert isinstance(first, Figure) and len(first.axes) == 2
    assert "P = 1 s" in summary
    w.poll_interval.value = 2.0
    assert w.figure is not first
    assert w.sim.config.reactor_poll_interval == 2.0
    assert w.figure.axes[0].get_title() == "Poll wait at P = 2 s: uniform on [0, P)"
    assert "P = 2 s" in w.summary.value and w.summary.value != summary
    assert w.stats["mean_s"] == pytest.approx(1.0, abs=0.15)
    # below the knee nothing queues; batch 1 at P = 2 s drains 0.5/s < acme's 1.5/s
    assert w.stats["backlog"] < 20
    w.batch_limit.value = 1
    assert w.sim.config.reactor_poll_batch_limit == 1
    assert w.stats["backlog"] > 100 and w.stats["within_p"] < 0.5


def test_the_latency_explorer_is_deterministic():
    a = latency_explorer(SCENARIO, until=60.0, poll_interval=0.5, batch_limit=10)
    b = latency_explorer(load_scenario(SCENARIO), until=60.0, poll_interval=0.5, batch_limit=10)
    assert a.summary.value == b.summary.value
    pd.testing.assert_frame_equal(a.table, b.table)


def test_in_a_kernel_the_figure_goes_into_the_output_widgets_state(monkeypatch):
    """In a kernel the figure becomes the Output widget's state, as one PNG
    rendered once at the figure's own size (the inline backend's tight box would
    draw every figure twice)."""
    import base64
    import types

    import IPython
    from matplotlib.figure import Figure

    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace())
    drawn = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (drawn.append(self), real(self, *a, **k))[1])
    w = latency_explorer(SCENARIO, until=30.0)
    assert drawn == [w.figure]
    (out,) = w.out.outputs
    assert out["output_type"] == "display_data"
    assert base64.b64decode(out["data"]["image/png"]).startswith(b"\x89PNG")
    assert out["data"]["text/plain"] == "<Figure size 800x800>"
    w.batch_limit.value = 50
    assert drawn[-1] is w.figure and len(drawn) == 2 and len(w.out.outputs) == 1


def test_latency_explorer_takes_the_explorers_arguments():
    import inspect

    fn, cls = inspect.signature(latency_explorer), inspect.signature(LatencyExplorer)
    assert fn.parameters == cls.parameters  # names, kinds and defaults: written once, on the class
    assert fn.return_annotation in (LatencyExplorer, "LatencyExplorer")
    with pytest.raises(TypeError, match="pollinterval"):
        latency_explorer(SCENARIO, pollinterval=1.0)
