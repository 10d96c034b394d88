"""Outbox scenario files (``design = "outbox"``): loading, running, reporting,
every class of error, and ``fanoutsim run`` on them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fanoutsim.cli import format_causes, full_report, main
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.analysis import outbox_report
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.scenario import ConsumerDef, OutboxScenario, OutboxWorkload, PoisonRow, TransientFailure
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.designs.reactor.scenario import Scenario
from fanoutsim.faults import CrashAtPoint, LateCommit, Notifications, SlowWorkflow
from fanoutsim.kernel.dist import Dist
from fanoutsim.report import format_outbox_check, format_outbox_report
from fanoutsim.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"
OUTBOX = SCENARIOS / "outbox.toml"
CRASHES = SCENARIOS / "outbox-crashes.toml"
FIGURES = {"outbox_latency.png", "outbox_cursors.png", "outbox_lag.png"}
TABLES = {"outbox.parquet", "cursors.parquet", "parked.parquet"}

MINIMAL = """
design = "outbox"

[run]
until = 60.0

[[consumers]]
name = "indexer"
duration = 0.01

[[workload]]
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


@pytest.fixture(scope="module")
def runs():
    """Each shipped outbox scenario, run once as the file says."""
    return {path.name: load_scenario(path).run() for path in (OUTBOX, CRASHES)}


# -- loading ------------------------------------------------------------------------
def test_minimal_file_loads_with_defaults(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL, "tiny.toml"))
    assert isinstance(sc, OutboxScenario) and sc.design == "outbox"
    assert (sc.name, sc.seed, sc.until, sc.store, sc.start) == ("tiny", 0, 60.0, "memory", None)
    assert sc.config == OutboxConfig()
    assert sc.consumers == (ConsumerDef("indexer", Dist("fixed", 0.01)),)
    assert sc.workloads == (OutboxWorkload(2.0),)
    assert sc.faults is None


def test_a_reactor_file_is_still_a_reactor_scenario():
    sc = load_scenario(SCENARIOS / "default.toml")
    assert isinstance(sc, Scenario) and sc.design == "reactor"
    assert load_scenario(SCENARIOS / "default.toml", design="reactor") == sc


def test_the_teaching_default_loads_as_documented():
    sc = load_scenario(OUTBOX)
    assert (sc.name, sc.until, sc.config.safety_poll_interval) == ("outbox", 3600.0, 5.0)
    by_name = {c.name: c for c in sc.consumers}
    assert set(by_name) == {"indexer", "search", "analytics", "triage"}
    assert by_name["search"].duration == Dist("exponential", 0.03) and by_name["search"].fail == 0.02
    assert by_name["analytics"].timeout is None  # timeout = "none"
    assert by_name["triage"].poison_every == 1000 and by_name["triage"].retry_budget == 4
    assert [w.rate for w in sc.workloads] == [5.0]
    assert sc.faults.faults == (Notifications(drop=0.05),)


def test_the_crash_scenario_loads_with_outbox_spellings():
    sc = load_scenario(CRASHES)
    assert sc.config.read_mode == "settled"
    kinds = [f.kind for f in sc.faults.faults]
    assert kinds == ["crash_randomly", "crash_at_point", "crash_at_point", "late_commit", "notifications"]
    assert {f.point for f in sc.faults.of(CrashAtPoint)} == {"dispatch.after_handle_before_cursor"}
    late = sc.faults.of(LateCommit)[0]
    assert late.reactor is None and late.delay == Dist("uniform", 0.05, 0.5)
    # commits later than their stamp by less than settle cannot land under a cursor
    assert late.delay.b < sc.config.settle


def test_late_commit_topic_and_slow_workflow_consumer_map_to_the_fault_specs(tmp_path):
    text = MINIMAL + textwrap.dedent("""
        [[faults]]
        kind = "late_commit"
        probability = 0.5
        delay = 2.0
        topic = "feed"

        [[faults]]
        kind = "slow_workflow"
        consumer = "indexer"
        duration = 3.0
        window = [10, 20]
        """)
    sc = load_scenario(write(tmp_path, text))
    assert sc.faults.faults == (LateCommit(0.5, 2.0, reactor="feed"), SlowWorkflow("indexer", 3.0, window=(10.0, 20.0)))


# -- running ------------------------------------------------------------------------
@pytest.mark.parametrize("name", [OUTBOX.name, CRASHES.name])
def test_shipped_scenarios_run_valid_and_the_report_agrees_with_the_checker(runs, name):
    sim = runs[name]
    assert isinstance(sim, OutboxSimulation) and sim.now == 3600.0
    checked = check_outbox(sim)
    assert checked.valid
    report = outbox_report(sim, name=name, checked=check_outbox(sim))  # a fresh check of the same run
    assert report == outbox_report(sim, name=name)
    assert report["check"] == json.loads(json.dumps(checked.total))
    pc = checked.per_consumer.set_index("consumer")
    assert [c["consumer"] for c in report["consumers"]] == list(pc.index)
    for c in report["consumers"]:
        row = pc.loc[c["consumer"]]
        for key in ("cursor", "delivered", "duplicates", "lost", "parked", "pending"):
            assert c[key] == row[key], (c["consumer"], key)
        for q in ("p50", "p99", "max"):
            assert c["latency_s"][q] == pytest.approx(row[f"latency_{q}_s"])
        assert sum(c["duplicates_by_cause"].values()) == c["duplicates"]
        assert sum(c["lost_by_cause"].values()) == c["lost"]
    t = report["totals"]
    assert t["delivered"] == sum(c["delivered"] for c in report["consumers"]) == checked.total["delivered"]
    assert t["committed"] == report["outbox"]["committed"] == checked.total["committed"]
    assert report["hints"] == {
        "sent": sim.channel.sent,
        "dropped": sim.channel.dropped,
        "missed": sim.channel.missed,
        "coalesced": sim.channel.coalesced,
        "delivered": sim.channel.delivered,
    }
    json.dumps(report)  # plain data all the way down


def test_the_teaching_default_shows_lost_hints_slow_and_poison_consumers(runs):
    sim = runs[OUTBOX.name]
    report = outbox_report(sim)
    c = {r["consumer"]: r for r in report["consumers"]}
    committed = report["outbox"]["committed"]
    assert 15_000 < committed < 21_000  # ~5 commits/s for an hour
    assert 0.03 < report["hints"]["dropped"] / report["hints"]["sent"] < 0.07
    assert report["totals"]["lost"] == 0 and report["totals"]["extra_deliveries"] == 0
    # every 1000th seq is parked by triage after its retry budget (4 failures), nothing else
    parked = sim.parked()
    assert sorted(parked["seq"]) == list(range(1000, committed + 1, 1000))
    assert set(parked["consumer"]) == {"triage"} and set(parked["attempts"]) == {4}
    assert parked["error"].str.startswith("PoisonRow").all()
    assert c["triage"]["failures"] == 4 * len(parked)
    # search fails 2% of attempts, retried: failures but no row parked
    assert c["search"]["failures"] > 100 and c["search"]["parked"] == 0
    # a lost hint costs at most one safety poll for the fast consumer; the slow one queues
    assert c["indexer"]["latency_s"]["max"] < 5.0 + 0.5
    assert c["analytics"]["latency_s"]["p50"] > 10 * c["indexer"]["latency_s"]["p50"]


def test_the_crash_scenario_redelivers_after_crashes_and_loses_nothing(runs):
    sim = runs[CRASHES.name]
    checked = check_outbox(sim)
    assert checked.total["lost"] == 0
    assert checked.total["duplicates_by_cause"] == {"crash": 2}  # the two crashes between handle and cursor
    t = sim.trace()
    assert (t["kind"] == "crashed").sum() > 5
    assert (t["kind"] == "reserved").sum() > (t["kind"] == "committed").sum() * 0.03  # late writers reserve first
    # audit joined at t = 1800 s and back-filled from the beginning
    start = t[(t["kind"] == "cursor_start") & (t["consumer"] == "audit")]
    assert ((start["t"] - sim.start_us) / 1e6).tolist() == [1800.0] and start["seq"].tolist() == [0]
    assert checked.per_consumer.set_index("consumer").loc["audit", "delivered"] > 10_000


def test_the_crash_scenario_with_read_mode_all_loses_late_commits(tmp_path):
    """The reason the shipped file reads "settled": the same run reading "all" is INVALID."""
    text = CRASHES.read_text().replace('read_mode = "settled"', 'read_mode = "all"')
    sim = load_scenario(write(tmp_path, text)).run(until=600.0)
    checked = check_outbox(sim)
    assert not checked.valid and set(checked.lost["cause"]) == {"late_commit"}
    assert "INVALID" in format_outbox_check(checked) and "late_commit" in format_outbox_check(checked)


def test_same_seed_same_trace_and_overrides():
    sc = load_scenario(CRASHES)
    a, b = sc.run(until=600.0), sc.run(until=600.0)
    pd.testing.assert_frame_equal(a.trace(), b.trace())
    assert outbox_report(a) == outbox_report(b)
    c = sc.run(seed=7, until=300.0)
    assert (c.seed, c.now) == (7, 300.0)
    assert not c.trace()["t"].head(200).equals(a.trace()["t"].head(200))
    with pytest.raises(ScenarioError, match=r"run\.until: .*\(override\)"):
        sc.run(until=0)
    with pytest.raises(ScenarioError, match=r"run\.seed: must be an integer"):
        sc.build(seed="zero")


def test_failures_are_drawn_per_consumer_from_the_runs_seed():
    c = ConsumerDef("x", fail=0.5, poison_every=3)
    assert ConsumerDef("quiet").handler(0) is None

    def outcomes(seed):
        fn, out = c.handler(seed), []
        for seq in range(1, 40):
            try:
                fn({"seq": seq})
                out.append("ok")
            except PoisonRow:
                out.append("poison")
            except TransientFailure:
                out.append("fail")
        return out

    first = outcomes(1)
    assert first == outcomes(1) and first != outcomes(2)
    assert [i + 1 for i, o in enumerate(first) if o == "poison"] == list(range(3, 40, 3))
    assert "fail" in first and "ok" in first


def test_a_late_consumer_can_start_at_a_seq(tmp_path):
    text = MINIMAL + '\n[[consumers]]\nname = "late"\njoin_at = 30.0\nstart = 10\n'
    sim = load_scenario(write(tmp_path, text)).run()
    t = sim.trace()
    handled = t.loc[(t["kind"] == "handled") & (t["consumer"] == "late"), "seq"]
    assert handled.min() == 11
    assert check_outbox(sim).valid


def test_a_seq_start_outside_the_log_when_joining_is_a_scenario_error(tmp_path):
    text = MINIMAL + '\n[[consumers]]\nname = "late"\njoin_at = 5.0\nstart = 100000\n'
    sc = load_scenario(write(tmp_path, text))
    with pytest.raises(ScenarioError, match=r"consumers\[1\]\.start: at t=5: .*past the end of the log"):
        sc.run()


def test_duckdb_store_runs_the_same(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL))
    mem, duck = sc.run(until=30.0), sc.run(until=30.0, store="duckdb")
    assert duck.outbox()["seq"].tolist() == mem.outbox()["seq"].tolist()
    assert duck.cursors().equals(mem.cursors())


# -- errors ---------------------------------------------------------------------
# (a change to MINIMAL, the key path the error must name, fragments it must contain)
ERRORS = [
    pytest.param(
        "bogus = 1\n" + MINIMAL,
        "bogus",
        ["unknown key", "design, name, description, run, outbox, consumers, workload, faults"],
        id="unknown-top-level-key",
    ),
    pytest.param(
        MINIMAL + "\n[config]\nreactor_poll_interval = 1\n",
        "config",
        ["unknown key", "[config] belongs to a scenario of the reactor design"],
        id="reactor-table",
    ),
    pytest.param(
        MINIMAL.replace('design = "outbox"', 'design = "outbx"'),
        "design",
        ["'reactor', 'outbox'", "'outbx'"],
        id="design-typo",
    ),
    pytest.param(
        MINIMAL.replace('design = "outbox"', ""),
        "consumers",
        ["unknown key", "[[consumers]] belongs to a scenario of the outbox design", "set design = 'outbox'"],
        id="outbox-tables-without-design",
    ),
    pytest.param(
        MINIMAL + "\n[outbox]\npoll = 1\n",
        "outbox.poll",
        ["unknown key", "[outbox]", "safety_poll_interval, batch_limit"],
        id="outbox-unknown-key",
    ),
    pytest.param(
        MINIMAL + '\n[outbox]\nread_mode = "eventually"\n',
        "outbox.read_mode",
        ["'all', 'settled', 'gap'", "'eventually'"],
        id="outbox-bad-read-mode",
    ),
    pytest.param(
        MINIMAL + "\n[outbox]\nbatch_limit = 0\n", "outbox.batch_limit", [">= 1"], id="outbox-bad-batch-limit"
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\nretries = 3"),
        "consumers[0].retries",
        ["unknown key", "name, duration, timeout", "retry_budget", "poison_every"],
        id="consumer-unknown-key",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\nretry_budget = 0"),
        "consumers[0].retry_budget",
        ["integer >= 1", "0"],
        id="consumer-bad-budget",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = 0.01\ntimeout = "never"'),
        "consumers[0].timeout",
        [">= 1e-06 (1 µs, the clock's unit)", '"none"', "'never'"],
        id="consumer-bad-timeout",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\njitter = 1.5"),
        "consumers[0].jitter",
        ["[0, 1]"],
        id="consumer-bad-jitter",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\nfail = -0.1"),
        "consumers[0].fail",
        ["[0, 1]"],
        id="consumer-bad-fail",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\npoison_every = 0"),
        "consumers[0].poison_every",
        ["integer >= 1"],
        id="consumer-bad-poison",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = 0.01\nstart = "middle"'),
        "consumers[0].start",
        ['"beginning", "end" or a seq', "'middle'"],
        id="consumer-bad-start",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\nstart = 5"),
        "consumers[0].start",
        ["log is empty", "join_at"],
        id="consumer-seq-start-at-0",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", "duration = 0.01\njoin_at = 60"),
        "consumers[0].join_at",
        ["before run.until (60)"],
        id="consumer-joins-too-late",
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "normal", mean = 1}'),
        "consumers[0].duration.dist",
        ["'exponential', 'uniform'", "'normal'"],
        id="consumer-bad-dist",
    ),
    pytest.param(
        MINIMAL.replace('name = "indexer"\n', ""), "consumers[0].name", ["required"], id="consumer-without-name"
    ),
    pytest.param(
        MINIMAL + '\n[[consumers]]\nname = "indexer"\n',
        "consumers[1].name",
        ["already declared at consumers[0]"],
        id="duplicate-consumer",
    ),
    pytest.param(
        MINIMAL.replace('[[consumers]]\nname = "indexer"\nduration = 0.01\n', ""),
        "consumers",
        ["required", "[[consumers]]"],
        id="no-consumers",
    ),
    pytest.param(MINIMAL.replace("rate = 2.0", "rate = 0"), "workload[0].rate", ["> 0"], id="rate-zero"),
    pytest.param(
        MINIMAL.replace("rate = 2.0", 'rate = 2.0\nreactor = "r"'),
        "workload[0].reactor",
        ["unknown key", "rate, pages, start, stop, topic"],
        id="workload-reactor-key",
    ),
    pytest.param(
        MINIMAL.replace("rate = 2.0", "rate = 2.0\npages = 0"),
        "workload[0].pages",
        ["integer >= 1"],
        id="workload-no-pages",
    ),
    pytest.param(
        MINIMAL.replace("rate = 2.0", "rate = 2.0\nstart = 10\nstop = 5"),
        "workload[0].stop",
        ["after start (10)"],
        id="workload-stop-before-start",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "fail_inserts"\n',
        "faults[0].kind",
        [
            "'fail_inserts' is a fault of the reactor design",
            "crash_at, crash_randomly, crash_at_point, notifications, late_commit, slow_workflow",
        ],
        id="reactor-only-fault",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "stall"\nworkflow = "indexer"\nwindow = [0, 5]\n',
        "faults[0].kind",
        ["'stall' is a fault of the reactor design", "slow_workflow"],
        id="reactor-only-stall",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "meteor"\n',
        "faults[0].kind",
        ["'meteor'", "an outbox scenario accepts: crash_at"],
        id="unknown-fault-kind",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "crash_at_point"\npoint = "poll.after_fetch"\n',
        "faults[0].point",
        ["crash point of the reactor design", "dispatch.after_handle_before_cursor"],
        id="reactor-crash-point",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "late_commit"\nprobability = 0.1\ndelay = 1\nreactor = "r"\n',
        "faults[0].reactor",
        ["unknown key", "write topic = ..."],
        id="late-commit-reactor-key",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "slow_workflow"\nconsumer = "nope"\nduration = 1\n',
        "faults[0].consumer",
        ["'nope'", "declared: indexer"],
        id="slow-unknown-consumer",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "crash_randomly"\n',
        "faults[0].mean_gap",
        ["required for 'crash_randomly'"],
        id="fault-missing-field",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "notifications"\ndrop = 1.5\n',
        "faults[0].drop",
        ["<= 1", "1.5"],
        id="fault-bad-value",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "notifications"\n\n[[faults]]\nkind = "notifications"\n',
        "faults",
        ["more than one 'notifications'"],
        id="two-notification-faults",
    ),
    pytest.param(
        MINIMAL.replace("until = 60.0", "until = -1"),
        "run.until",
        [">= 1e-06 (1 µs, the clock's unit)"],
        id="run-until",
    ),
]


@pytest.mark.parametrize("text, key, fragments", ERRORS)
def test_each_class_of_error_names_file_key_and_what_is_allowed(tmp_path, text, key, fragments):
    path = write(tmp_path, text, "broken.toml")
    err = error_of(path)
    msg = str(err)
    assert msg.startswith(str(path))
    assert key in [p for p, _ in err.problems], err.problems
    assert f"{key}:" in msg
    for fragment in fragments:
        assert fragment in msg, msg


def test_all_problems_are_reported_at_once(tmp_path):
    text = MINIMAL.replace('design = "outbox"', 'design = "outbx"\ncolour = "red"').replace(
        "duration = 0.01", "duration = 0.01\nretry_budget = -1"
    ) + textwrap.dedent("""
        [[consumers]]
        name = "second"
        backoff = "slow"

        [[faults]]
        kind = "ties"

        [[faults]]
        kind = "crash_at_point"
        point = "dispatch.after_handle_before_cursor"
        nth = 0
        """)
    err = error_of(write(tmp_path, text))
    assert [p for p, _ in err.problems] == [
        "design",
        "colour",
        "consumers[0].retry_budget",
        "consumers[1].backoff",
        "faults[0].kind",
        "faults[1].nth",
    ]
    assert str(err).startswith(f"{tmp_path / 'scn.toml'}: 6 problems:\n")
    assert "checked as the outbox design" in str(err)


def test_a_caller_needing_a_reactor_scenario_refuses_an_outbox_one():
    with pytest.raises(ScenarioError, match=r"design: this needs a scenario of the reactor design"):
        load_scenario(OUTBOX, design="reactor")
    with pytest.raises(ScenarioError, match=r"design: .*outbox design"):
        load_scenario(SCENARIOS / "default.toml", design="outbox")


def test_parse_scenario_dispatches_on_design():
    import tomllib

    assert isinstance(parse_scenario(tomllib.loads(MINIMAL)), OutboxScenario)


# -- the CLI ------------------------------------------------------------------------
def test_cli_run_writes_everything_and_prints_the_outbox_report(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(CRASHES), "--until", "300", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert {p.name for p in out.iterdir()} == {"report.json", ".fanoutsim-outputs.json"} | TABLES | FIGURES
    for name in FIGURES:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sim = load_scenario(CRASHES).run(until=300.0)
    report, checked = full_report(sim, "outbox-crashes", load_scenario(CRASHES).description)
    assert json.loads((out / "report.json").read_text()) == report
    why = f"\n{format_causes(report['causes'])}" if report["causes"] else ""  # each cause, in plain words
    assert captured.out == (
        format_outbox_report(report) + "\n" + format_outbox_check(checked) + "\n" + why + f"\nwrote 7 files to {out}\n"
    )
    assert "outbox check: VALID" in captured.out and "Topic bus" in captured.out
    assert captured.err == ""
    # the tables as Parquet
    assert pd.read_parquet(out / "outbox.parquet")["seq"].tolist() == sim.outbox()["seq"].tolist()
    cursors = pd.read_parquet(out / "cursors.parquet")
    assert cursors.to_dict("records") == sim.cursors().to_dict("records")
    assert list(pd.read_parquet(out / "parked.parquet").columns) == [
        "consumer",
        "seq",
        "error",
        "attempts",
        "parked_at",
    ]


def test_cli_json_prints_only_the_report(tmp_path, capsys):
    out = tmp_path / "j"
    assert main(["run", str(OUTBOX), "--until", "120", "--seed", "3", "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["design"] == "outbox" and report["seed"] == 3 and report["time_span_s"] == 120.0
    assert report["check"]["valid"] is True
    scenario = load_scenario(OUTBOX)
    assert report == full_report(scenario.run(seed=3, until=120.0), "outbox", scenario.description)[0]
    assert captured.err.strip() == f"wrote 7 files to {out}"


def test_cli_bad_outbox_file_exits_2(tmp_path, capsys):
    bad = write(tmp_path, MINIMAL + '\n[[faults]]\nkind = "pollers"\ncount = 2\n', "bad.toml")
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fanoutsim: error: ")
    assert f"{bad}: faults[0].kind: 'pollers' is a fault of the reactor design" in captured.err
    assert not (tmp_path / "o").exists()
