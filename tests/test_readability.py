"""What a reader sees: whole names in the checker's table, decoded payloads,
figures whose bars sit on their ticks and whose legends cover nothing."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.cli import write_outputs
from fanoutsim.designs.reactor.checker import format_check


def long_names_sim():
    sim = fs.Simulation(seed=0)
    sim.runner.register_workflow("incident_response")
    sim.runner.register_workflow("audit")
    for tenant in ("acme_corporation_europe", "acme_corporation_americas"):
        sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "incident_response", tenant=tenant)
        sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "audit", tenant=tenant)
        sim.add_workload("pricing_reactor", 1.0, tenant=tenant)
    sim.run(60)
    return sim


def test_the_checker_table_keeps_whole_subscription_names():
    text = format_check(fs.check(long_names_sim()))
    for tenant in ("acme_corporation_europe", "acme_corporation_americas"):
        assert f"pricing_reactor->incident_response@{tenant} " in text
        assert f"pricing_reactor->audit@{tenant} " in text
    rows = [line for line in text.splitlines() if "pricing_reactor->" in line]
    header = next(line for line in text.splitlines() if line.strip().startswith("subscription"))
    # the columns still line up under the header
    valid_at = {line.rindex("yes") for line in rows}
    assert valid_at == {header.index("valid")}


def test_short_names_keep_the_old_layout():
    sim = fs.Simulation(seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.fire("r", {"n": 1})
    sim.run(5)
    line = next(x for x in format_check(fs.check(sim)).splitlines() if x.strip().startswith("subscription"))
    assert line.index("expected") == 2 + 36 + 1  # a 36-wide name column, as before


def test_firings_have_a_decoded_sources_column(tmp_path):
    sim = fs.Simulation(seed=0)
    sim.fire("r", {"quote": {"price": 150, "region": "us-east"}, "raw": b"\x00\xff"})
    f = sim.firings()
    assert list(f.columns[:5]) == ["id", "reactor_name", "tenant_id", "payload", "sources"]
    assert isinstance(f["payload"].iloc[0], bytes)  # the stored bytes stay
    assert f["sources"].iloc[0] == {"quote": {"price": 150, "region": "us-east"}, "raw": "00ff"}
    duck = fs.Simulation(seed=0, store="duckdb")
    duck.fire("r", {"quote": {"price": 150}})
    assert duck.firings()["sources"].iloc[0] == {"quote": {"price": 150}}
    # in the Parquet file the decoded column is JSON text
    sim.run(2)
    write_outputs(sim, {"scenario": "t"}, tmp_path)
    table = pd.read_parquet(tmp_path / "firings.parquet")
    assert json.loads(table["sources"].iloc[0])["quote"]["price"] == 150


# -- figures ---------------------------------------------------------------------
def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig.get_renderer() if hasattr(fig, "get_renderer") else fig.canvas.get_renderer()


def test_lease_outcome_bars_are_centred_on_their_ticks():
    from pathlib import Path

    import numpy as np

    from fanoutsim.designs.leases import plots as lp
    from fanoutsim.scenario import load_scenario

    sim = load_scenario(Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "leases.toml").run(until=600)
    fig = lp.lease_outcomes(sim)
    ax = fig.axes[0]
    ticks = ax.get_yticks()
    bars = [p for p in ax.patches if np.isfinite(p.get_width()) and p.get_width() > 0]
    assert bars
    for tick in ticks:
        mine = [b for b in bars if abs(b.get_y() + b.get_height() / 2 - tick) < 0.45]
        if mine:
            centre = (min(b.get_y() for b in mine) + max(b.get_y() + b.get_height() for b in mine)) / 2
            assert centre == pytest.approx(tick, abs=1e-9), (tick, [b.get_y() for b in mine])
    # the legend names every consumer once and sits outside the axes
    legend = ax.get_legend()
    assert len(legend.get_texts()) == len({b.get_facecolor() for b in bars})  # one entry per consumer
    renderer = _drawn(fig)
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_the_outbox_latency_legend_covers_no_bars():
    from pathlib import Path

    from fanoutsim.designs.outbox.plots import consumer_latency_histogram
    from fanoutsim.scenario import load_scenario

    sim = load_scenario(Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "outbox.toml").run(until=300)
    fig = consumer_latency_histogram(sim)
    ax = fig.axes[0]
    renderer = _drawn(fig)
    assert not ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def lag_sim(pause: bool):
    sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=1.0), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    for t in (0.25, 10.5):
        sim.env.process(_fire_at(sim, t))
    if pause:
        sim.env.process(_pause(sim, 5.0, 8.0))
    sim.run(20)
    return sim


def _fire_at(sim, t):
    yield sim.env.timeout(t)
    sim.fire("r", {"n": t})


def _pause(sim, at, until):
    yield sim.env.timeout(at)
    sim.runner.set_subscription_enabled("r", "wf", enabled=False)
    yield sim.env.timeout(until - at)
    sim.runner.set_subscription_enabled("r", "wf", enabled=True)


def test_lag_over_time_is_the_age_of_the_oldest_unread_firing():
    from fanoutsim.analysis import watermark_lag_over_time

    lag = watermark_lag_over_time(lag_sim(False), bins=20)  # one-second bins
    worst = lag.set_index("t0_s")["lag_max_s"]
    # fired at 0.25 s, read by the poll at 1 s: at most 0.75 s behind; then nothing to read
    assert worst[0.0] == pytest.approx(0.75)
    assert worst[1.0:9.0].eq(0.0).all()  # a quiet stream is not behind
    assert worst[10.0] == pytest.approx(0.5)  # fired at 10.5, read at 11
    assert worst[11.0:].eq(0.0).all()


def test_lag_over_time_before_the_first_watermark_move():
    """A run too short for any poll: a firing visible and unread is the lag."""
    from fanoutsim.analysis import watermark_lag_over_time

    sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=1.0), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(0.25)
    sim.fire("r", {"x": 1})
    sim.run(0.75)
    lag = watermark_lag_over_time(sim, bins=1)
    assert lag["lag_max_s"].tolist() == [pytest.approx(0.5)]


def test_a_paused_subscription_falls_behind_in_the_lag_over_time():
    from fanoutsim.analysis import watermark_lag_over_time
    from fanoutsim.plots import watermark_lag_over_time_figure

    sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=1.0), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "live")
    sim.runner.subscribe_workflow_to_reactor("r", "paused")
    sim.add_workload("r", 5.0)
    sim.env.process(_pause_one(sim))
    sim.run(60)
    lag = watermark_lag_over_time(sim, bins=60)
    live = lag[lag["label"].str.endswith("live")].set_index("t0_s")["lag_max_s"]
    paused = lag[lag["label"].str.endswith("paused")].set_index("t0_s")["lag_max_s"]
    assert live.max() <= 1.0 + 1e-9  # one poll interval at most
    assert paused[35.0] == pytest.approx(36.0 - 20.0, abs=1.0)  # behind since the pause at 20 s
    assert paused[55.0] <= 1.0 + 1e-9  # caught up after resuming at 40 s
    fig = watermark_lag_over_time_figure(sim)
    # a panel each (the paused one's climb does not flatten the live one's teeth), P dashed in both
    assert len(fig.axes) == 2
    titles = [a.get_title(loc="left") for a in fig.axes]
    assert "live" in titles[0] and titles[0].endswith("never above P")
    assert "paused" in titles[1] and "above P in" in titles[1]
    for a in fig.axes:
        assert [line.get_ydata()[0] for line in a.get_lines() if line.get_linestyle() == "--"] == [1.0]
    assert fig.axes[0].get_ylim() != fig.axes[1].get_ylim()  # a lag of 20 P: each panel its own scale
    assert fig.get_supylabel().startswith("watermark lag (s)")


def test_the_lag_figure_draws_p_and_a_quiet_stream_in_a_panel_of_its_own():
    """The default scenario: a busy tenant and a quiet one, whose ragged line
    hid the busy one's in one axes; the poll interval drawn in each panel."""
    from pathlib import Path

    from fanoutsim.plots import watermark_lag_over_time_figure
    from fanoutsim.scenario import load_scenario

    sim = load_scenario(Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "default.toml").run(until=600)
    fig = watermark_lag_over_time_figure(sim, bins=60)
    assert [a.get_title(loc="left").split(":")[0] for a in fig.axes] == ["acme", "globex"]
    assert all(a.get_title(loc="left").endswith("never above P") for a in fig.axes)
    assert fig.axes[0].get_ylim() == fig.axes[1].get_ylim()  # within 3 P: one scale, to compare
    assert any("P = 1 s" in t.get_text() for t in fig.axes[0].texts)
    assert "Watermark lag" in fig.get_suptitle()


def _pause_one(sim):
    yield sim.env.timeout(20.0)
    sim.runner.set_subscription_enabled("r", "paused", enabled=False)
    yield sim.env.timeout(20.0)
    sim.runner.set_subscription_enabled("r", "paused", enabled=True)


def test_the_report_figure_is_the_lag_over_time_and_falls_back_without_a_trace(tmp_path):
    from fanoutsim.plots import save_report_figures

    sim = lag_sim(False)
    save_report_figures(sim, tmp_path / "a")
    assert (tmp_path / "a" / "watermark_lag.png").read_bytes()[:4] == b"\x89PNG"
    quiet = fs.Simulation(seed=0, trace=False)
    quiet.runner.subscribe_workflow_to_reactor("r", "wf")
    quiet.add_workload("r", 2.0)
    quiet.run(10)
    save_report_figures(quiet, tmp_path / "b")  # the end-of-run snapshot instead
    assert (tmp_path / "b" / "watermark_lag.png").exists()
