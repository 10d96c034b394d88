"""Recorded workloads: the quotes day, Simulation.add_replay and the scenario key."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.designs.reactor.replay import ReplaySpec, load_recording
from fanoutsim.designs.reactor.scenario import ScenarioError, load_scenario
from fanoutsim.faults import CrashAt, FaultPlan, LateCommit, Ties

ROOT = Path(__file__).resolve().parents[1]
DAY = ROOT / "fanoutsim" / "examples" / "quotes-day.parquet"


@pytest.fixture(scope="module")
def day():
    return load_recording(DAY)


def small(rows):
    return pd.DataFrame(rows, columns=["t", "tenant", "symbol", "region", "price"])


# -- the recorded day ----------------------------------------------------------------
def test_the_quotes_day_is_small_and_has_its_columns(day):
    assert DAY.stat().st_size < 2_000_000
    assert list(day.columns) == ["t", "tenant", "symbol", "region", "price"]
    assert day["t"].is_monotonic_increasing and day["t"].between(0, 86400, inclusive="left").all()
    assert set(day["region"]) == {"us-east", "us-west", "eu-central", "ap-south"}
    assert set(day["tenant"]) == {"acme", "globex"} and day["symbol"].nunique() >= 4
    assert 0 < day["price"].isna().sum() < 0.01 * len(day)  # a few halted quotes carry no price


def test_each_region_quotes_in_its_business_hours(day):
    hour = (day["t"] // 3600).astype(int)
    per = day.groupby(["region", hour]).size().unstack(fill_value=0)
    busy = {"us-east": 16, "eu-central": 10, "ap-south": 6, "us-west": 20}
    quiet = {"us-east": 5, "eu-central": 22, "ap-south": 18, "us-west": 8}
    for region in busy:
        assert per.loc[region, busy[region]] > 10 * per.loc[region, quiet[region]], region


def test_each_symbol_walks_with_spikes(day):
    for sym, g in day.dropna(subset=["price"]).groupby("symbol"):
        p = g["price"].to_numpy()
        assert p.std() / p.mean() < 0.1, sym  # a walk, not noise
    jumps = day.dropna(subset=["price"]).groupby("symbol")["price"].agg(lambda p: p.max() / p.median())
    assert (jumps > 1.04).any()  # somebody spiked


def test_the_generator_is_seeded_and_wrote_this_file(day):
    spec = importlib.util.spec_from_file_location("make_quotes_day", ROOT / "data" / "make_quotes_day.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    again = mod.make_day()
    pd.testing.assert_frame_equal(again.reset_index(drop=True), day.reset_index(drop=True), check_dtype=False)


# -- add_replay ------------------------------------------------------------------------
def test_replay_fires_one_firing_per_row_at_the_recorded_times(store):
    frame = small(
        [
            (10.0, "acme", "ACME", "us-east", 101.5),
            (10.5, "globex", "HOOLI", "eu-central", None),
            (12.0, "acme", "GLOBX", "ap-south", 42.0),
            (20.0, "acme", "ACME", "us-west", 99.0),
        ]
    )
    sim = fs.Simulation(seed=0, store=store)
    sim.runner.subscribe_workflow_to_reactor("r", "wf", tenant="acme")
    sim.runner.subscribe_workflow_to_reactor("r", "wf", tenant="globex")
    rp = sim.add_replay(frame, "r", tenant="tenant", speed=2.0, start=10.0, stop=20.0)
    assert (rp.rows, rp.first_at, rp.last_at) == (3, 0.0, 1.0)
    sim.run(until=5)
    f = sim.firings().sort_values("fired_at")
    at = (f["fired_at"] - pd.Timestamp("2026-01-01", tz="UTC")).dt.total_seconds()
    assert list(at) == [0.0, 0.25, 1.0]  # (t - start) / speed
    assert list(f["tenant_id"]) == ["acme", "globex", "acme"]
    ex = sim.executions()
    ex = ex.iloc[sorted(range(len(ex)), key=lambda i: ex["context"].iloc[i]["reactor_fired_at"])]
    assert [c["quote"] for c in ex["context"]] == [
        {"symbol": "ACME", "region": "us-east", "price": 101.5},
        {"symbol": "HOOLI", "region": "eu-central", "price": None},  # a halted quote: null
        {"symbol": "GLOBX", "region": "ap-south", "price": 42.0},
    ]


def test_replay_without_tenant_fires_in_public_and_starts_now(day):
    sim = fs.Simulation(seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(until=100)
    rp = sim.add_replay(day, "r", start=15 * 3600, stop=15 * 3600 + 60)
    sim.run(until=170)
    assert rp.first_at >= 100 and rp.last_at < 160
    assert set(sim.firings()["tenant_id"]) == {"public"}
    assert len(sim.firings()) == rp.rows == ((day["t"] >= 54000) & (day["t"] < 54060)).sum()
    assert fs.check(sim).total["lost"] == 0


def test_a_down_reactor_replays_nothing_and_the_plan_stamps_apply():
    frame = small([(float(k), "acme", "ACME", "us-east", 100.0 + k) for k in range(20)])
    sim = fs.Simulation(seed=0, faults=FaultPlan([CrashAt(5.5, downtime=4.0)]))
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_replay(frame, "r")
    sim.run(until=30)
    prices = sorted(c["quote"]["price"] for c in sim.executions()["context"])
    assert prices == [100.0 + k for k in range(20) if not 5.5 <= k < 9.5]
    # a late-committing writer and ties come from the plan, as for add_workload
    sim = fs.Simulation(
        seed=0, faults=FaultPlan([LateCommit(probability=1.0, delay=2.0), Ties(probability=1.0, burst=2)])
    )
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_replay(frame, "r")
    sim.run(until=30)
    f = sim.firings()
    assert len(f) == 40 and ((f["created_at"] - f["fired_at"]).dt.total_seconds() == 2.0).all()


def test_the_same_replay_and_seed_give_the_same_trace(day):
    def run():
        sim = fs.Simulation(seed=3)
        sim.runner.subscribe_workflow_to_reactor("r", "wf", tenant="acme", when="payload.quote.price > 100")
        sim.add_replay(day, "r", tenant="tenant", speed=20.0, start=16 * 3600, stop=16 * 3600 + 600)
        sim.run(until=40)
        return sim.trace()

    pd.testing.assert_frame_equal(run(), run())


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(tenant="desk"), "'desk' is not one of t, tenant, symbol, region, price"),
        (dict(speed=0), "replay speed must be > 0"),
        (dict(speed=float("inf")), "replay speed must be a finite number"),
        (dict(start=5.0, stop=5.0), r"replay stop must be after start \(5\)"),
        (dict(start="0"), "replay start must be a finite number"),
    ],
)
def test_bad_replay_arguments_name_the_argument(kwargs, needle):
    sim = fs.Simulation()
    with pytest.raises(ValueError, match=needle):
        sim.add_replay(small([(0.0, "a", "X", "us-east", 1.0)]), "r", **kwargs)


def test_bad_recordings_name_the_column():
    sim = fs.Simulation()
    with pytest.raises(ValueError, match=r"no column\(s\) 'price'.*needs t, symbol, region, price"):
        sim.add_replay(pd.DataFrame({"t": [0.0], "symbol": ["X"], "region": ["us-east"]}), "r")
    with pytest.raises(ValueError, match="column 't' must hold finite seconds; 1 row"):
        sim.add_replay(small([(None, "a", "X", "us-east", 1.0)]), "r")
    with pytest.raises(ValueError, match="tenant column 'tenant' must hold non-empty strings"):
        sim.add_replay(small([(0.0, "", "X", "us-east", 1.0)]), "r", tenant="tenant")
    with pytest.raises(TypeError, match="needs a pandas DataFrame"):
        sim.add_replay([(0.0, "X")], "r")
    with pytest.raises(ValueError, match="reactor must be a non-empty string"):
        sim.add_replay(small([]), "")


# -- scenario files ----------------------------------------------------------------------
SCENARIO = """
[run]
until = 65.0

[[subscriptions]]
reactor = "pricing_reactor"
workflow = "audit"
tenant = "acme"

[[workload]]
replay = "{replay}"
reactor = "pricing_reactor"
tenant_column = "tenant"
speed = 10.0
start = 57600.0
stop = 58200.0
"""


def write(tmp_path, text, name="scn.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_scenario_replay_is_relative_to_the_file_and_runs(tmp_path, day):
    (tmp_path / "rec").mkdir()
    day.to_parquet(tmp_path / "rec" / "q.parquet")
    sc = load_scenario(write(tmp_path, SCENARIO.format(replay="rec/q.parquet")))
    assert sc.workloads == ()
    assert sc.replays == (
        ReplaySpec(str(tmp_path / "rec" / "q.parquet"), "pricing_reactor", "tenant", 10.0, 57600.0, 58200.0),
    )
    sim = sc.run()
    window = day[(day["t"] >= 57600) & (day["t"] < 58200)]
    assert len(sim.firings()) == len(window)
    assert len(sim.executions()) == (window["tenant"] == "acme").sum()


def test_the_shipped_quotes_day_scenario_replays_the_recording():
    sc = load_scenario(ROOT / "fanoutsim" / "examples" / "quotes-day.toml")
    (spec,) = sc.replays
    assert Path(spec.path) == DAY and spec.tenant_column == "tenant"


@pytest.mark.parametrize(
    "edit, key, fragments",
    [
        (
            lambda s: s.format(replay="nope.parquet"),
            "workload[0].replay",
            ["no such recording 'nope.parquet'", "relative to the scenario file"],
        ),
        (lambda s: s.format(replay="q.json"), "workload[0].replay", ["must name a .parquet or .csv file"]),
        (lambda s: s.format(replay="bad.csv"), "workload[0].replay", ["has no column(s) 'region', 'price'"]),
        (
            lambda s: s.format(replay="q.parquet").replace('"tenant"', '"desk"'),
            "workload[0].tenant_column",
            ["'desk' is not a column", "its columns: t, tenant, symbol, region, price"],
        ),
        (
            lambda s: s.format(replay="q.parquet").replace("speed = 10.0", "speed = 0"),
            "workload[0].speed",
            ["> 0", "got 0"],
        ),
        (
            lambda s: s.format(replay="q.parquet").replace("stop = 58200.0", "stop = 100.0"),
            "workload[0].stop",
            ["after start (57600)"],
        ),
        (
            lambda s: s.format(replay="q.parquet").replace("speed = 10.0", "rate = 2.0"),
            "workload[0].rate",
            ["unknown key for a replay workload", "recorded times", "allowed keys in workload[0] with replay: replay"],
        ),
        (
            lambda s: s.format(replay="q.parquet").replace('tenant_column = "tenant"', 'tenant = "acme"'),
            "workload[0].tenant",
            ["from tenant_column"],
        ),
        (
            lambda s: s.format(replay="q.parquet").replace(
                'reactor = "pricing_reactor"\ntenant_column', "tenant_column"
            ),
            "workload[0].reactor",
            ["is required"],
        ),
        (lambda s: s.replace('"{replay}"', "3"), "workload[0].replay", ["path of a recording", "got 3"]),
    ],
)
def test_bad_replay_tables_name_file_key_and_what_is_allowed(tmp_path, day, edit, key, fragments):
    day.head(10).to_parquet(tmp_path / "q.parquet")
    pd.DataFrame({"t": [0.0], "tenant": ["a"], "symbol": ["X"]}).to_csv(tmp_path / "bad.csv", index=False)
    path = write(tmp_path, edit(SCENARIO))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert [p for p, _ in err.problems] == [key], err.problems
    assert str(err).startswith(str(path))
    for fragment in fragments:
        assert fragment in str(err), (fragment, str(err))
