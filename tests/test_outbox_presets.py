"""The model-side pieces of issue 28's comparison: an empirical distribution of
measured samples, a per-commit hint-loss rule on the notification channel, the
presets of procrastinate 3.10 and pgqueuer 1.6 (each number checked against the
installed library's source), their scenario files, and the comparison's
statistics. The real runs themselves: ``test_outbox_realqueues.py``."""

from __future__ import annotations

import inspect
import json
import math
import random
import re
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from presettools import generated_scenario
from rqtools import need_libraries

from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.presets import HINT_COST_FILE, PRESETS, Measured, hint_cost, preset, scenario_toml
from fanoutsim.designs.outbox.realqueues import Case, PoissonLoad, RealRun, ks_2samp, ks_critical, percentiles
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import FaultPlan, Notifications
from fanoutsim.kernel.dist import EMPIRICAL_MAX_SAMPLES, Dist, parse_dist

ROOT = Path(__file__).resolve().parents[1]
PRESET_SCENARIOS = ROOT / "fanoutsim" / "examples" / "presets"

samples = st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=40)


# -- the empirical law ---------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(values=samples, seed=st.integers(0, 2**32))
def test_an_empirical_law_draws_only_its_samples_and_repeats_under_its_seed(values, seed):
    d = Dist.empirical(values)
    draws = [d.sample(random.Random(seed)) for _ in range(3)]
    assert len(set(draws)) == 1  # one seed, one draw
    run = random.Random(seed)
    many = [d(run) for _ in range(50)]
    assert set(many) <= set(values)
    assert d.mean == pytest.approx(math.fsum(values) / len(values))
    assert parse_dist(d.as_table()) == d == Dist.empirical(list(reversed(values)))  # order-free


def test_an_empirical_law_draws_each_sample_about_as_often():
    d = Dist.empirical([0.001, 0.002, 0.003, 0.004])
    rng = random.Random(7)
    counts = {v: 0 for v in d.samples}
    for _ in range(8000):
        counts[d.sample(rng)] += 1
    assert all(1800 < n < 2200 for n in counts.values()), counts


@pytest.mark.parametrize(
    "bad,message",
    [
        ([], "samples must hold at least one value"),
        ("0.1, 0.2", "samples must be a list of seconds"),
        ({"a": 1}, "samples must be a list of seconds"),
        ([0.1, -0.2], r"samples\[1\] must be >= 0 seconds, got -0.2"),
        ([0.1, float("nan")], r"samples\[1\] must be a finite number"),
        ([True], r"samples\[0\] must be a finite number"),
        ([0.0] * (EMPIRICAL_MAX_SAMPLES + 1), f"samples may hold at most {EMPIRICAL_MAX_SAMPLES} values"),
    ],
)
def test_bad_samples_are_refused_naming_the_key(bad, message):
    with pytest.raises(ValueError, match=rf"notifications\.delay\.{message}"):
        Notifications(delay={"dist": "empirical", "samples": bad})
    with pytest.raises(ValueError, match="needs samples"):
        parse_dist({"dist": "empirical"}, "notifications.delay")


def test_a_dist_made_in_python_is_checked_where_a_fault_plan_takes_it():
    # a Dist object went into Notifications / CrashAt unchecked: a NaN mean or an empty
    # empirical law would only fail mid-run
    with pytest.raises(ValueError, match=r"notifications\.delay\.mean must be a finite number"):
        Notifications(delay=Dist("exponential", float("nan")))
    with pytest.raises(ValueError, match=r"notifications\.delay\.samples must hold at least one value"):
        Notifications(delay=Dist("empirical"))
    with pytest.raises(ValueError, match=r"notifications\.delay\.dist must be one of"):
        Notifications(delay=Dist("weibull", 1.0))
    assert Notifications(delay=Dist("exponential", 0.5)).delay == Dist("exponential", 0.5)


def test_an_empirical_hint_delay_is_drawn_for_each_hint():
    sim = OutboxSimulation(
        OutboxConfig(safety_poll_interval=5.0),
        seed=3,
        faults=FaultPlan([Notifications(delay={"dist": "empirical", "samples": [0.25, 0.5]})]),
    )
    sim.register_consumer("c")
    for k in range(20):
        sim.run(until=1.3 + k)  # off the poll's grid (every 5 s)
        sim.commit("p")
    sim.run(until=30.0)
    t = sim.trace()
    lat = _latencies(sim)
    assert set(np.round(lat, 6)) == {0.25, 0.5}  # each hint came after one of the two delays
    assert (t["kind"] == "hint").sum() == 20


# -- the per-commit hint-loss rule ----------------------------------------------------
def _latencies(sim) -> np.ndarray:
    t = sim.trace()
    c = t[t["kind"] == "committed"].set_index("seq")["t"]
    d = t[t["kind"] == "delivered"].drop_duplicates("seq").set_index("seq")["t"]
    return ((d - c.loc[d.index]) / 1e6).to_numpy()


def _committed_at(times, lose=None, plan=None, poll=5.0):
    sim = OutboxSimulation(OutboxConfig(safety_poll_interval=poll), seed=1, faults=plan)
    sim.register_consumer("c")
    if lose is not None:
        sim.channel.lose_hints(lose)
    for t in times:
        sim.run(until=t)
        sim.commit("p")
    sim.run(until=max(times) + 2 * poll)
    return sim


def test_lose_hints_loses_exactly_the_named_seqs_hints():
    sim = _committed_at([1.0, 1.5, 2.0, 3.0], lose={2, 4})
    t = sim.trace()
    dropped = t[t["kind"] == "hint_dropped"]
    assert dropped["seq"].astype(int).tolist() == [2, 4] and set(dropped["detail"]) == {"lose_hints"}
    assert sim.channel.dropped == 2 and sim.channel.sent == 4
    # seq 2 waits for seq 3's hint (the read takes everything new); seq 4, the last, for the poll at 5 s
    assert _latencies(sim).tolist() == pytest.approx([0.0, 0.5, 0.0, 2.0])


def test_lose_hints_takes_a_predicate_and_none_clears_it():
    sim = _committed_at([1.0, 2.0, 3.0], lose=lambda seq: seq % 2 == 1)
    assert _latencies(sim).tolist() == pytest.approx([1.0, 0.0, 2.0])
    sim.channel.lose_hints(None)
    sim.commit("p")
    sim.run(until=sim.now + 0.1)
    assert _latencies(sim)[-1] == pytest.approx(0.0)


def test_lose_hints_leaves_the_seeded_drops_of_the_other_hints_as_they_were():
    times = [0.5 + 0.25 * k for k in range(40)]

    def dropped(lose):
        t = _committed_at(times, lose=lose, plan=FaultPlan([Notifications(drop=0.3)])).trace()
        return set(t.loc[t["kind"] == "hint_dropped", "seq"].astype(int))

    drawn = dropped(None)
    assert 0 < len(drawn) < 40
    extra = min(set(range(1, 41)) - drawn)
    assert dropped({extra}) == drawn | {extra}
    assert dropped(set()) == drawn


@pytest.mark.parametrize(
    "bad,error,match",
    [
        ("12", TypeError, "seqs \\(ints\\) or a predicate"),
        ([0], ValueError, "a seq is an int >= 1, got 0"),
        ([True], ValueError, "a seq is an int >= 1, got True"),
        ([1.5], ValueError, "a seq is an int >= 1, got 1.5"),
    ],
)
def test_lose_hints_refuses_what_is_not_a_seq(bad, error, match):
    sim = OutboxSimulation(seed=0)
    with pytest.raises(error, match=match):
        sim.channel.lose_hints(bad)


# -- the presets -----------------------------------------------------------------------
def test_a_preset_sets_the_librarys_defaults_and_takes_overrides():
    costs = {
        name: {"read_cost": preset(name).read_cost(), "empty_read_cost": preset(name).measured().empty_read_cost}
        for name in PRESETS
    }
    assert OutboxConfig.preset("procrastinate-3.10") == OutboxConfig(
        safety_poll_interval=5.0,
        poll_mode="idle",
        wake_mode="after_fetch",
        catch_up=False,
        batch_limit=1,
        read_until_empty=True,
        **costs["procrastinate-3.10"],
    )
    assert OutboxConfig.preset("pgqueuer-1.6") == OutboxConfig(
        safety_poll_interval=30.0,
        poll_mode="idle",
        wake_mode="before_fetch",
        catch_up=False,
        batch_limit=10,
        read_until_empty=True,
        repoll=0.1,
        self_hint_every=Dist("uniform", 0.08, 0.12),
        **costs["pgqueuer-1.6"],
    )
    c = OutboxConfig.preset("procrastinate-3.10", safety_poll_interval=2.0)
    assert (c.safety_poll_interval, c.batch_limit, c.wake_mode) == (2.0, 1, "after_fetch")
    with pytest.raises(ValueError, match="preset must be one of 'procrastinate-3.10', 'pgqueuer-1.6', got 'rq-1'"):
        OutboxConfig.preset("rq-1")
    with pytest.raises(ValueError, match="batch_limit must be an int >= 1"):
        OutboxConfig.preset("pgqueuer-1.6", batch_limit=0)


def test_a_preset_takes_costs_measured_elsewhere():
    p = preset("pgqueuer-1.6")
    m = Measured.of([0.002], [0.004, 0.005], [0.001])
    values = p.config_values(m)
    assert values["read_cost"] == Dist.empirical([0.004, 0.005]) and values["empty_read_cost"] == Dist(
        "empirical", samples=(0.001,)
    )
    assert p.notifications(drop=0.2, measured=m).delay == Dist.empirical([0.002])
    assert {k: v for k, v in values.items() if "read_cost" not in k} == dict(p.options)


@pytest.mark.parametrize("name", PRESETS)
def test_every_number_of_a_preset_says_where_it_comes_from(name):
    p = preset(name)
    assert set(dict(p.sources)) == set(p.config_values()) | {"hint_delay"}
    d = hint_cost()["libraries"][p.library]
    assert p.hint_delay() == Dist.empirical(d["hint_latency_s"]) and p.read_cost() == Dist.empirical(d["read_cost_s"])
    assert p.config_values()["empty_read_cost"] == Dist.empirical(d["empty_fetch_s"])
    assert p.notifications(drop=0.5).delay == p.hint_delay() and p.notifications(drop=0.5).drop == 0.5


def test_the_hint_cost_file_says_when_how_and_on_what_it_was_measured():
    data = json.loads(HINT_COST_FILE.read_text(encoding="utf-8"))
    assert data["measured"] and "hint_latency_s" in data["method"] and data["machine"]["postgresql"]
    for library in ("procrastinate", "pgqueuer"):
        d = data["libraries"][library]
        assert d["unhandled"] == 0 and len(d["hint_latency_s"]) == d["jobs"] >= 100
        for key in ("hint_latency_s", "read_cost_s", "empty_fetch_s", "handled_latency_s"):
            assert len(d[key]) >= 100 and min(d[key]) >= 0 and max(d[key]) < 5.0, (library, key)
        # the hint alone is a fraction of commit -> handled (the read is the rest)
        assert np.median(d["hint_latency_s"]) < np.median(d["handled_latency_s"])


def test_the_procrastinate_preset_is_what_procrastinate_3_10_does():
    need_libraries("procrastinate")
    from procrastinate import worker
    from procrastinate.schema import SchemaManager

    assert version("procrastinate").startswith("3.10.")
    o = dict(preset("procrastinate-3.10").options)
    assert worker.FETCH_JOB_POLLING_INTERVAL == o["safety_poll_interval"]
    assert (
        inspect.signature(worker.Worker).parameters["fetch_job_polling_interval"].default == o["safety_poll_interval"]
    )
    fetch = SchemaManager.get_schema().split("CREATE FUNCTION procrastinate_fetch_job_v2")[1].split("$$;")[0]
    assert "LIMIT 1" in fetch and o["batch_limit"] == 1
    # the wake flag is cleared after each fetch (the lost wake-up the presets' docstring describes) ...
    loop = inspect.getsource(worker.Worker._fetch_and_process_jobs)
    assert loop.index("fetch_job(") < loop.index("finally:") < loop.index("self._new_job_event.clear()")
    assert o["wake_mode"] == "after_fetch"
    # ... a round fetches until a fetch finds nothing ...
    assert "if not job:\n                break" in loop and o["read_until_empty"]
    # ... and the poll is a new sleep after each round: an idle timeout
    assert "asyncio.sleep(self.fetch_job_polling_interval)" in inspect.getsource(worker.Worker._run_loop)
    assert o["poll_mode"] == "idle"
    # the listener reconnects without a word to the worker: no catch-up
    from procrastinate.psycopg_connector import PsycopgConnector

    assert "_new_job_event" not in inspect.getsource(PsycopgConnector) and o["catch_up"] is False


def test_the_pgqueuer_preset_is_what_pgqueuer_1_6_does():
    need_libraries("pgqueuer")
    from pgqueuer import QueueManager

    assert version("pgqueuer").startswith("1.6.")
    from pgqueuer.adapters.persistence.schema_ddl import render_trigger
    from pgqueuer.core import buffers, listeners
    from pgqueuer.domain.schema.notify import notify_function_body, notify_trigger
    from pgqueuer.domain.settings import DBSettings

    o = dict(preset("pgqueuer-1.6").options)
    run = inspect.signature(QueueManager.run).parameters
    assert run["dequeue_timeout"].default == timedelta(seconds=o["safety_poll_interval"])
    assert run["batch_size"].default == o["batch_limit"]
    # a round dequeues until a dequeue is empty, then waits for an event or the timeout
    assert "break" in inspect.getsource(QueueManager.fetch_jobs) and o["read_until_empty"]
    assert "wait_for_notice_event" in inspect.getsource(QueueManager.run) and o["poll_mode"] == "idle"
    # events queue up and are never cleared (no lost wake-up): the model's wake armed before the read
    assert issubclass(listeners.PGNoticeEventListener, __import__("asyncio").Queue)
    assert o["wake_mode"] == "before_fetch"
    # a missed ready job: a re-poll after min_dequeue_poll_interval
    assert QueueManager.__dataclass_fields__["min_dequeue_poll_interval"].default == timedelta(seconds=o["repoll"])
    assert "eligible_queued_work" in inspect.getsource(QueueManager._effective_dequeue_timeout)
    # the status log flushes every 0.1 s x uniform(0.8, 1.2), and its DELETE notifies the worker
    flush = buffers.TimedOverflowBuffer.__dataclass_fields__["timeout"].default_factory()
    assert flush == timedelta(seconds=0.1) and "uniform(0.8, 1.2)" in inspect.getsource(buffers.TimedOverflowBuffer)
    assert o["self_hint_every"] == Dist("uniform", 0.08, 0.12)
    assert re.search(r"TG_OP = 'DELETE' THEN\s+to_emit := true", notify_function_body("ch"))
    trigger = render_trigger(notify_trigger(DBSettings()), DBSettings())
    assert "AFTER INSERT OR UPDATE OR DELETE" in trigger and "FOR EACH ROW" not in trigger  # a statement trigger


# -- the preset scenario files ------------------------------------------------------
@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_scenario_file_is_the_generated_one_and_sets_the_preset(name):
    sc = generated_scenario(PRESET_SCENARIOS / f"outbox-{name}.toml", scenario_toml(name), "outbox")
    assert sc.config == OutboxConfig.preset(name)
    (spec,) = sc.faults.of(Notifications)
    assert spec.delay == preset(name).hint_delay()
    sim = sc.run(until=60.0)
    assert len(_latencies(sim)) > 200 and np.median(_latencies(sim)) < 0.01  # hints on: milliseconds


# -- the comparison's statistics -----------------------------------------------------
def test_the_ks_statistic_is_the_largest_gap_between_the_two_cdfs():
    assert ks_2samp([1, 2, 3], [1, 2, 3]) == 0.0
    assert ks_2samp([1, 2, 3], [4, 5]) == 1.0
    assert ks_2samp([1, 2, 3], [1.5, 2.5, 3.5]) == pytest.approx(1 / 3)
    assert ks_2samp([0.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]) == pytest.approx(0.25)
    assert ks_critical(190, 190) == pytest.approx(1.3581 * math.sqrt(2 / 190), rel=1e-3)
    with pytest.raises(ValueError, match="two non-empty samples"):
        ks_2samp([], [1.0])


@settings(max_examples=40, deadline=None)
@given(x=samples, y=samples)
def test_the_ks_statistic_is_symmetric_and_in_0_1(x, y):
    d = ks_2samp(x, y)
    assert 0 <= d <= 1 and d == ks_2samp(y, x)


def test_a_real_run_reads_its_latencies_hints_and_read_costs():
    run = RealRun(
        library="procrastinate",
        version="3.10.0",
        case="hints",
        poll_interval=2.0,
        fetch_size=1,
        commits=[1.0, 2.0, 3.0, 3.001, 4.0],
        handled=[1.004, 2.5, None, 3.010, 4.02],
        hint_at=[1.001, 2.001, 3.0005, 3.0015, 4.001],
        hint_lost=[False, True, False, False, False],
        fetches=[
            [0.5, 0.501, []],
            [1.0015, 1.0035, [0]],
            [1.005, 1.006, []],
            [2.499, 2.4995, [1]],
            [2.5005, 2.501, []],
            [3.009, 3.0095, [3]],
            [3.0105, 3.011, []],
            [4.002, 4.015, [4]],
            [4.021, 4.022, []],
        ],
    )
    assert run.latencies().tolist() == pytest.approx([0.004, 0.5, 0.009, 0.02])
    assert run.unhandled() == 1
    assert run.hint_latencies().tolist() == pytest.approx([0.001, 0.0005, 0.0005, 0.001])
    # the rounds a job's own hint began while the worker waited (its last fetch empty and returned
    # before the hint; the next fetch took that job first): jobs 0, 3 and 4; not job 1, whose hint
    # was lost (the poll took it), nor job 2, never handled
    assert run.read_costs().tolist() == pytest.approx([0.003, 0.0085, 0.019])
    assert run.fetch_costs(False).tolist() == pytest.approx([0.001, 0.001, 0.0005, 0.0005, 0.001])
    assert run.fetch_costs(True).tolist() == pytest.approx([0.002, 0.0005, 0.0005, 0.013])
    assert RealRun.from_dict(json.loads(json.dumps(run.as_dict()))) == run
    assert percentiles([1, 2, 3, 4, 5], (50,)) == {50: 3.0}


def test_the_load_is_seeded_and_the_cases_checked():
    a, b = PoissonLoad(seed=3).offsets(), PoissonLoad(seed=3).offsets()
    assert a == b != PoissonLoad(seed=4).offsets() and len(a) == 190 and a == sorted(a)
    assert 190 / 5.0 * 0.7 < a[-1] < 190 / 5.0 * 1.3
    times = Case("x", terminate_every=5.0, seed=1).terminations(40.0)
    assert times == Case("x", terminate_every=5.0, seed=1).terminations(40.0) and all(0 < t < 40 for t in times)
    assert Case("x").terminations(40.0) == []
    for kwargs, match in [({"rate": 0}, "rate must be a finite number > 0"), ({"jobs": 0}, "jobs must be an int >= 1")]:
        with pytest.raises(ValueError, match=match):
            PoissonLoad(**kwargs)
    with pytest.raises(ValueError, match=r"drop must be a probability in \[0, 1\], got 1.5"):
        Case("x", drop=1.5)
