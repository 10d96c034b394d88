"""Scenario files: loading, building, running, and every class of error."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.designs.reactor.scenario import Scenario, SubscriptionDef, WorkflowDef
from fanoutsim.kernel.dist import Dist
from fanoutsim.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"

MINIMAL = """
[run]
until = 30.0

[[workflows]]
name = "wf"
duration = 0.01

[[subscriptions]]
reactor = "r"
workflow = "wf"
when = "payload.quote.price > 100"

[[workload]]
reactor = "r"
rate = 2.0
"""


def write(tmp_path: Path, text: str, name: str = "scn.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value


# -- valid files ----------------------------------------------------------------
def test_minimal_file_loads_with_defaults(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL, "my-run.toml"))
    assert sc.name == "my-run"  # the file stem
    assert (sc.seed, sc.until, sc.store, sc.start) == (0, 30.0, "memory", None)
    assert sc.config == fs.SchedulerConfig()
    assert sc.workflows == (WorkflowDef("wf", Dist("fixed", 0.01)),)
    assert sc.subscriptions == (SubscriptionDef("r", "wf", "public", "payload.quote.price > 100"),)
    assert [(w.reactor, w.tenant, w.rate, w.payload, w.start, w.stop) for w in sc.workloads] == [
        ("r", "public", 2.0, "quote", 0.0, None)
    ]
    assert sc.faults is None
    with pytest.raises(AttributeError):
        sc.seed = 3  # frozen


def test_default_scenario_matches_its_description():
    sc = load_scenario(SCENARIOS / "default.toml")
    assert sc.name == "default"
    assert (sc.seed, sc.until) == (0, 3600.0)
    assert sc.config.reactor_firings_retention == 1800.0
    assert sc.config.reactor_firings_prune_interval == 600.0
    rates = {(w.reactor, w.tenant): w.rate for w in sc.workloads}
    assert rates == {("pricing_reactor", "acme"): 2.0, ("pricing_reactor", "globex"): 0.5}
    by_wf = {(s.workflow, s.tenant): s.when for s in sc.subscriptions}
    for tenant in ("acme", "globex"):
        assert by_wf[("incident_response", tenant)] == (
            "payload.quote.price > 100 && payload.quote.region == 'us-east'"
        )
        assert by_wf[("audit", tenant)] is None
        assert "eu-central" in by_wf[("eu_pricing", tenant)]


def test_bench_day_scenario_shape():
    sc = load_scenario(SCENARIOS / "bench-day.toml")
    assert sc.until == 86400.0
    assert sc.config == fs.SchedulerConfig()  # the defaults
    assert len(sc.subscriptions) == 20
    assert sum(s.when is not None for s in sc.subscriptions) == 5
    assert {s.tenant for s in sc.subscriptions} == {"acme", "globex"}
    assert sum(w.rate for w in sc.workloads) == pytest.approx(1.0)
    per_reactor: dict[str, float] = {}
    for w in sc.workloads:
        assert w.payload == "quote"
        per_reactor[w.reactor] = per_reactor.get(w.reactor, 0) + w.rate
    assert len(per_reactor) == 4 and all(r == pytest.approx(0.25) for r in per_reactor.values())
    assert {w.tenant for w in sc.workloads} == {"acme", "globex"}
    assert all(wf.duration == Dist("fixed", 0.05) for wf in sc.workflows)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_scenario_loads_and_has_a_comment_header(path):
    load_scenario(path)
    assert path.read_text().startswith("#")


def test_build_creates_everything_and_runs_nothing(tmp_path):
    sim = load_scenario(SCENARIOS / "default.toml").build()
    assert sim.now == 0
    assert sim.firings().empty and sim.executions().empty
    subs = sim.subscriptions()
    assert len(subs) == 6
    assert set(zip(subs["tenant_id"], subs["workflow_name"])) == {
        (t, w) for t in ("acme", "globex") for w in ("incident_response", "audit", "eu_pricing")
    }
    assert subs["last_seen_fired_at"].isna().all()
    wfs = sim.registry.workflows
    assert wfs["incident_response"].duration == Dist("exponential", 0.2)
    assert wfs["eu_pricing"].duration == Dist("uniform", 0.05, 0.15)
    assert wfs["audit"].duration == 0.02


def test_run_fires_workloads_and_delivers(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL))
    sim = sc.run()
    assert sim.now == 30.0
    firings = sim.firings()
    assert 20 < len(firings) < 100  # Poisson, 2/s for 30 s
    prices = [fs.decode_sources(p)["quote"]["price"] for p in firings["payload"]]
    fired_s = (firings["fired_at"] - sim.clock_time.replace(second=0)).dt.total_seconds()
    # the last poll ran at t=29: every expensive quote fired by then is delivered, the rest filtered
    expected = sorted(fid for fid, p, t in zip(firings["id"], prices, fired_s) if p > 100 and t <= 29.0)
    assert expected and sorted(sim.executions()["reactor_firing_id"]) == expected


def test_same_seed_same_run_and_overrides(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL))
    a, b = sc.run(), sc.run()
    assert a.firings()["fired_at"].tolist() == b.firings()["fired_at"].tolist()
    c = sc.run(seed=7, until=10.0)
    assert c.seed == 7 and c.now == 10.0
    assert c.firings()["fired_at"].tolist() != a.firings()["fired_at"].tolist()[: len(c.firings())]


def test_duckdb_store(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL))
    mem = sc.run(until=10.0)
    db = tmp_path / "run.duckdb"
    duck = sc.run(until=10.0, store=str(db))
    assert db.exists()
    assert duck.firings()["id"].tolist() == mem.firings()["id"].tolist()
    assert len(duck.executions()) == len(mem.executions())


def test_existing_duckdb_file_is_refused_untouched(tmp_path):
    db = tmp_path / "old.duckdb"
    db.write_bytes(b"precious")
    sc = load_scenario(write(tmp_path, MINIMAL))
    with pytest.raises(ScenarioError) as info:
        sc.build(store=str(db))
    assert "run.store" in str(info.value) and "already exists" in str(info.value)
    assert db.read_bytes() == b"precious"


def test_start_sets_the_virtual_wall_clock(tmp_path):
    text = MINIMAL.replace("until = 30.0", 'until = 30.0\nstart = "2030-06-01T12:00:00Z"')
    sim = load_scenario(write(tmp_path, text)).build()
    assert sim.clock_time.isoformat() == "2030-06-01T12:00:00+00:00"
    text = MINIMAL.replace("until = 30.0", "until = 30.0\nstart = 2030-06-01T12:00:00Z")  # a TOML datetime
    assert load_scenario(write(tmp_path, text)).build().clock_time.year == 2030


def test_duration_distributions_draw_from_the_given_rng(tmp_path):
    text = MINIMAL.replace("duration = 0.01", 'duration = {dist = "exponential", mean = 0.2}')
    e = load_scenario(write(tmp_path, text)).workflows[0].duration
    assert e(random.Random(5)) == random.Random(5).expovariate(5.0)
    text = MINIMAL.replace("duration = 0.01", 'duration = {dist = "uniform", low = 0.05, high = 0.15}')
    u = load_scenario(write(tmp_path, text)).workflows[0].duration
    draws = [u(random.Random(i)) for i in range(50)]
    assert all(0.05 <= d <= 0.15 for d in draws)
    assert draws[3] == random.Random(3).uniform(0.05, 0.15)
    text = MINIMAL.replace("duration = 0.01", "")
    assert load_scenario(write(tmp_path, text)).build().registry.workflows["wf"].duration == 0.0


def test_workflow_durations_hold_workers_for_their_drawn_time(tmp_path):
    text = MINIMAL.replace("duration = 0.01", 'duration = {dist = "uniform", low = 0.3, high = 0.4}')
    sim = load_scenario(write(tmp_path, text)).run()
    ex = sim.executions()
    ex = ex[ex["finished_at"].notna()]
    assert len(ex) > 0
    run_s = (ex["finished_at"] - ex["claimed_at"]).dt.total_seconds()
    assert run_s.between(0.3 - 1e-6, 0.4 + 1e-6).all()


# -- errors ---------------------------------------------------------------------
# (a change to MINIMAL, the key path the error must name, fragments it must contain)
ERRORS = [
    pytest.param(
        "bogus = 1\n" + MINIMAL,
        "bogus",
        ["unknown key", "name, description, run, config, workflows, subscriptions, workload, faults"],
        id="unknown-top-level-key",
    ),
    pytest.param(
        MINIMAL.replace("until = 30.0", "until = 30.0\nsead = 1"),
        "run.sead",
        ["unknown key", "[run]", "seed, until, store, start"],
        id="unknown-run-key",
    ),
    pytest.param(
        MINIMAL.replace("until = 30.0", 'until = "soon"'),
        "run.until",
        [">= 1e-06 (1 µs, the clock's unit)", "'soon'"],
        id="until-wrong-type",
    ),
    pytest.param(
        MINIMAL.replace("until = 30.0", "until = -5"),
        "run.until",
        [">= 1e-06 (1 µs, the clock's unit)", "-5"],
        id="until-negative",
    ),
    pytest.param(MINIMAL.replace("until = 30.0", "until = inf"), "run.until", ["finite"], id="until-inf"),
    pytest.param(MINIMAL.replace("until = 30.0", ""), "run.until", ["required"], id="until-missing"),
    pytest.param(MINIMAL.replace("until = 30.0", "until = 30.0\nseed = 1.5"), "run.seed", ["integer"], id="seed-float"),
    pytest.param(
        MINIMAL.replace("until = 30.0", 'until = 30.0\nstore = "mongodb"'),
        "run.store",
        ['"memory", "duckdb"', ".duckdb", '"postgres"', "postgresql://", "'mongodb'"],
        id="store-unknown",
    ),
    pytest.param(
        MINIMAL.replace("until = 30.0", 'until = 30.0\nstart = "yesterday"'),
        "run.start",
        ["2026-01-01T00:00:00Z"],
        id="start-not-a-timestamp",
    ),
    pytest.param(
        MINIMAL.replace("until = 30.0", "until = 30.0\nstart = 2026-01-01T00:00:00"),
        "run.start",
        ["timezone"],
        id="start-naive",
    ),
    pytest.param(MINIMAL.replace("[run]\nuntil = 30.0\n", ""), "run", ["required", "[run]"], id="run-missing"),
    pytest.param(
        MINIMAL + '\n[config]\nprune_policy = "sometimes"\n',
        "config.prune_policy",
        ["'ttl', 'conservative'", "'sometimes'"],
        id="config-bad-policy",
    ),
    pytest.param(
        MINIMAL + "\n[config]\nreactor_poll_interval = 0\n",
        "config.reactor_poll_interval",
        [">= 1e-06 (1 µs, the clock's unit)"],
        id="config-bad-interval",
    ),
    pytest.param(
        MINIMAL + "\n[config]\nexecutor_workers = 2.5\n",
        "config.executor_workers",
        ["integer >= 1"],
        id="config-float-workers",
    ),
    pytest.param(
        MINIMAL + "\n[config]\npoll_interval = 1\n",
        "config.poll_interval",
        ["unknown key", "reactor_poll_interval", "prune_policy", "executor_workers"],
        id="config-unknown-key",
    ),
    pytest.param(
        MINIMAL.replace('when = "payload.quote.price > 100"', 'when = "price > 100"'),
        "subscriptions[0].when",
        ["'price'", "payload, reactor, tenant"],
        id="cel-unknown-variable",
    ),
    pytest.param(
        MINIMAL.replace('when = "payload.quote.price > 100"', 'when = "payload.quote.price >"'),
        "subscriptions[0].when",
        ["not valid CEL", "payload, reactor, tenant"],
        id="cel-syntax",
    ),
    pytest.param(
        MINIMAL.replace('when = "payload.quote.price > 100"', "when = true"),
        "subscriptions[0].when",
        ["CEL expression string", "boolean true"],
        id="cel-not-a-string",
    ),
    pytest.param(
        MINIMAL.replace('workflow = "wf"', 'workflow = "wff"'),
        "subscriptions[0].workflow",
        ["'wff'", "declared: wf"],
        id="undeclared-workflow",
    ),
    pytest.param(
        MINIMAL.replace('reactor = "r"\nworkflow', "workflow"),
        "subscriptions[0].reactor",
        ["required"],
        id="subscription-without-reactor",
    ),
    pytest.param(
        MINIMAL.replace('reactor = "r"\nworkflow', 'reactor = "r"\ntenant = ""\nworkflow'),
        "subscriptions[0].tenant",
        ["non-empty string"],
        id="empty-tenant",
    ),
    pytest.param(
        MINIMAL.replace('when = "payload.quote.price > 100"', 'when = "payload.quote.price > 100"\nfilter = "x"'),
        "subscriptions[0].filter",
        ["unknown key", "reactor, workflow, tenant, when"],
        id="subscription-unknown-key",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "normal", mean = 1}'),
        "workflows[0].duration.dist",
        ["'exponential', 'uniform'", "'normal'"],
        id="unknown-dist",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "exponential"}'),
        "workflows[0].duration",
        ["needs mean"],
        id="dist-missing-param",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "exponential", mean = 0.2, sd = 1}'),
        "workflows[0].duration",
        ["unknown key", "'sd'", "dist, mean"],
        id="dist-unknown-param",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "uniform", low = 2, high = 1}'),
        "workflows[0].duration",
        ["low <= high"],
        id="uniform-high-below-low",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = -1"),
        "workflows[0].duration",
        ["seconds >= 0", "exponential", "uniform"],
        id="negative-duration",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = "fast"'),
        "workflows[0].duration",
        ["seconds >= 0", "'fast'", "exponential", "uniform"],
        id="duration-string",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "exponential", mean = "x"}'),
        "workflows[0].duration.mean",
        ["finite number", "'x'"],
        id="dist-param-not-a-number",
    ),
    pytest.param(
        MINIMAL + '\n[[workflows]]\nname = "wf"\n',
        "workflows[1].name",
        ["already declared at workflows[0]"],
        id="duplicate-workflow",
    ),
    pytest.param(
        MINIMAL + '\n[[subscriptions]]\nreactor = "r"\nworkflow = "wf"\n',
        "subscriptions[1]",
        ["already declared at subscriptions[0]"],
        id="duplicate-subscription",
    ),
    pytest.param(MINIMAL.replace("rate = 2.0", "rate = 0"), "workload[0].rate", ["> 0"], id="rate-zero"),
    pytest.param(MINIMAL.replace("rate = 2.0", 'rate = "2"'), "workload[0].rate", ["> 0", "'2'"], id="rate-string"),
    pytest.param(
        MINIMAL.replace("rate = 2.0", 'rate = 2.0\npayload = "prices"'),
        "workload[0].payload",
        ["'quote', 'counter'", "'prices'"],
        id="unknown-payload",
    ),
    pytest.param(
        MINIMAL.replace("rate = 2.0", "rate = 2.0\nstart = 10\nstop = 5"),
        "workload[0].stop",
        ["after start (10)"],
        id="stop-before-start",
    ),
    pytest.param(
        MINIMAL.replace("[[workload]]", "[workload]"),
        "workload",
        ["array of tables", "[[workload]]"],
        id="workload-as-table",
    ),
    pytest.param(
        MINIMAL + "\n[faults]\ncrash_at = 5\n", "faults", ["array of tables", "[[faults]]"], id="faults-as-table"
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "meteor"\n',
        "faults[0].kind",
        ["'meteor'", "crash_at, crash_randomly"],
        id="faults-unknown-kind",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "crash_at_point"\npoint = "poll.nowhere"\n',
        "faults[0].point",
        ["'poll.nowhere' is not a crash point", "the reactor design's points: reactor.after_graphs_before_log"],
        id="faults-bad-point",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "crash_at_point"\npoint = "dispatch.after_fetch"\n',
        "faults[0].point",
        [
            "'dispatch.after_fetch' is a crash point of the outbox design",
            "the reactor design's points: reactor.after_graphs_before_log",
        ],
        id="faults-other-designs-point",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "fail_inserts"\nwindow = [5, 1]\n',
        "faults[0].window",
        ["must end after it starts"],
        id="faults-bad-window",
    ),
    pytest.param('name = "../escape"\n' + MINIMAL, "name", ["output folder", "'../escape'"], id="bad-name"),
    pytest.param("description = 3\n" + MINIMAL, "description", ["string"], id="description-not-string"),
]


@pytest.mark.parametrize("text, key, fragments", ERRORS)
def test_each_class_of_error_names_file_key_and_what_is_allowed(tmp_path, text, key, fragments):
    path = write(tmp_path, text, "broken.toml")
    err = error_of(path)
    msg = str(err)
    assert isinstance(err, ValueError)
    assert msg.startswith(str(path))
    assert key in [p for p, _ in err.problems], err.problems
    assert f"{key}:" in msg
    for fragment in fragments:
        assert fragment in msg


def test_toml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "[run]\nuntil = 30.0\nseed = \n")
    msg = str(error_of(path))
    assert msg.startswith(f"{path}: line 3")
    assert "TOML syntax error" in msg


def test_missing_file_and_directory(tmp_path):
    missing = tmp_path / "nope.toml"
    assert str(error_of(missing)) == f"{missing}: no such scenario file"
    assert "directory" in str(error_of(tmp_path))


def test_all_problems_are_reported_at_once(tmp_path):
    text = MINIMAL.replace("until = 30.0", "until = 0\nseed = true").replace("rate = 2.0", "rate = -1")
    err = error_of(write(tmp_path, text))
    assert [p for p, _ in err.problems] == ["run.seed", "run.until", "workload[0].rate"]
    assert str(err).startswith(f"{tmp_path / 'scn.toml'}: 3 problems:\n")


def test_overrides_are_checked_like_the_file(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL))
    with pytest.raises(ScenarioError, match=r"run\.until: .*>= 1e-06 \(1 µs.*\(override\)"):
        sc.run(until=-1)
    with pytest.raises(ScenarioError, match=r"run\.seed: must be an integer"):
        sc.build(seed="zero")
    with pytest.raises(ScenarioError, match=r"run\.store: "):
        sc.build(store="sqlite")


# -- property tests -----------------------------------------------------------
_NOT_A_NUMBER = st.one_of(
    st.text(max_size=5),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_NOT_POSITIVE = st.one_of(st.integers(max_value=0), st.floats(max_value=0.0), st.just(float("nan")))


def _doc(**changes) -> dict:
    import tomllib

    doc = tomllib.loads(MINIMAL)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
        node[leaf] = value
    return doc


def _problem_keys(doc: dict) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, source="hyp.toml")
    assert str(info.value).startswith("hyp.toml: ")
    return [p for p, _ in info.value.problems]


@settings(max_examples=60, deadline=None)
@given(st.one_of(_NOT_A_NUMBER, _NOT_POSITIVE, st.just(float("inf"))))
def test_any_bad_until_is_named(value):
    assert _problem_keys(_doc(run__until=value)) == ["run.until"]


@settings(max_examples=60, deadline=None)
@given(st.one_of(_NOT_A_NUMBER, _NOT_POSITIVE, st.just(float("inf"))))
def test_any_bad_rate_is_named(value):
    doc = _doc()
    doc["workload"][0]["rate"] = value
    assert _problem_keys(doc) == ["workload[0].rate"]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        [
            "reactor_poll_interval",
            "executor_poll_interval",
            "reactor_firings_prune_interval",
            "executor_workers",
            "reactor_poll_batch_limit",
            "predicate_error_limit",
        ]
    ),
    st.one_of(_NOT_A_NUMBER, _NOT_POSITIVE),
)
def test_any_bad_config_number_is_named(key, value):
    doc = _doc()
    doc["config"] = {key: value}
    assert _problem_keys(doc) == [f"config.{key}"]


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=12).filter(lambda k: k not in fs.SchedulerConfig.field_names()))
def test_any_unknown_config_key_is_named_with_the_allowed_ones(key):
    doc = _doc()
    doc["config"] = {key: 1}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, source="hyp.toml")
    assert [p for p, _ in info.value.problems] == [f"config.{key}"]
    assert ", ".join(fs.SchedulerConfig.field_names()) in str(info.value)


@settings(max_examples=40, deadline=None)
@given(
    until=st.floats(min_value=1e-3, max_value=1e6),
    seed=st.integers(-(2**63), 2**63 - 1),
    rate=st.floats(min_value=1e-3, max_value=50),
)
def test_any_good_numbers_load(until, seed, rate):
    doc = _doc(run__until=until, run__seed=seed)
    doc["workload"][0]["rate"] = rate
    sc = parse_scenario(doc, source="hyp.toml")
    assert isinstance(sc, Scenario)
    assert (sc.until, sc.seed, sc.workloads[0].rate) == (until, seed, rate)


def test_faults_in_a_scenario_become_the_runs_fault_plan(tmp_path):
    path = write(tmp_path, MINIMAL + '\n[[faults]]\nkind = "crash_at"\nat = 10.0\ndowntime = 2.0\n')
    sim = load_scenario(path).run(until=20.0)
    crashed = sim.trace().query("kind == 'crashed'")
    assert list((crashed["t"] - sim.start_us) / 1e6) == [10.0]


def test_a_fault_naming_an_unknown_workflow_is_a_scenario_error(tmp_path):
    path = write(tmp_path, MINIMAL + '\n[[faults]]\nkind = "fail_inserts"\nworkflow = "nope"\n')
    with pytest.raises(ScenarioError, match="faults: .*'nope'.*known workflows"):
        load_scenario(path).build()
