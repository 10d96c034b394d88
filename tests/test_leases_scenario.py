"""Leases scenario files (``design = "leases"``): loading, running, reporting,
every class of error, and ``fanoutsim run`` on them (``serve``: tests/test_serve_designs.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fanoutsim.cli import format_causes, full_report, main
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.designs.leases.scenario import LeaseAction, LeaseConsumerDef, LeaseScenario, LeaseWorkload
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.faults import CrashAtPoint, CrashRandomly, SlowWorkflow
from fanoutsim.kernel.dist import Dist
from fanoutsim.report import format_leases_check, format_leases_report, leases_report
from fanoutsim.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"
LEASES = SCENARIOS / "leases.toml"
CRASHES = SCENARIOS / "leases-crashes.toml"
TABLES = {"events.parquet", "checkpoints.parquet", "dead_letters.parquet", "consumers.parquet"}

MINIMAL = """
design = "leases"

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
    """Each shipped leases scenario, run once as the file says."""
    return {path.name: load_scenario(path).run() for path in (LEASES, CRASHES)}


def _t(sim, rows) -> list[float]:
    return ((rows["t"] - sim.start_us) / 1e6).tolist()


# -- loading ------------------------------------------------------------------------
def test_minimal_file_loads_with_defaults(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL, "tiny.toml"))
    assert isinstance(sc, LeaseScenario) and sc.design == "leases"
    assert (sc.name, sc.seed, sc.until, sc.store, sc.start) == ("tiny", 0, 60.0, "memory", None)
    assert sc.config == LeaseConfig()
    assert sc.consumers == (LeaseConsumerDef("indexer", duration=Dist("fixed", 0.01)),)
    c = sc.consumers[0]
    assert (c.batch_limit, c.in_flight_limit, c.lease_seconds, c.nack_delay, c.poll_interval) == (4, 4, 60.0, 1.0, 0.5)
    assert sc.workloads == (LeaseWorkload(2.0),) and sc.workloads[0].partitions == 4
    assert sc.actions == () and sc.faults is None
    assert parse_scenario({"design": "leases", "run": {"until": 1}, "consumers": [{"name": "a"}]}).design == "leases"


def test_partition_order_loads_from_the_leases_table(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL + '\n[leases]\npartition_order = "head_of_line"\n'))
    assert sc.config.partition_order == "head_of_line" and LeaseConfig().partition_order == "riffdb"
    assert sc.run(until=20.0).config.partition_order == "head_of_line"


def test_the_teaching_default_loads_as_documented():
    sc = load_scenario(LEASES)
    assert (sc.name, sc.until, sc.config.retention, sc.config.retention_interval) == ("leases", 900.0, 120.0, 30.0)
    c = {d.name: d for d in sc.consumers}
    assert set(c) == {"indexer", "enricher", "archiver", "audit"}
    assert c["indexer"].poison_every == 250 and c["indexer"].lease_seconds == 5.0
    assert c["enricher"].duration == Dist("exponential", 1.0) and c["enricher"].lease_seconds == 5.0
    assert c["archiver"].retire_at == 450.0 and c["archiver"].in_flight_limit == 1
    assert (c["audit"].join_at, c["audit"].start) == (300.0, "beginning")
    assert sc.workloads == (LeaseWorkload(2.0, 4, "ticket.changed"),)


def test_the_crash_scenario_loads_with_lease_points_and_a_restore():
    sc = load_scenario(CRASHES)
    assert sc.actions == (LeaseAction("restore", 600.0),)
    assert [f.kind for f in sc.faults.faults] == ["crash_randomly"] + ["crash_at_point"] * 4
    assert sc.faults.of(CrashRandomly)[0].mean_gap == 120.0
    assert {f.point for f in sc.faults.of(CrashAtPoint)} == {
        "worker.after_effect_before_ack",
        "lease.after_commit",
        "ack.before_commit",
        "recover.before_commit",
    }


def test_slow_workflow_names_a_consumer_and_seek_actions_load(tmp_path):
    text = MINIMAL + textwrap.dedent("""
        [[faults]]
        kind = "slow_workflow"
        consumer = "indexer"
        duration = 8.0
        window = [10, 20]

        [[actions]]
        kind = "seek"
        at = 30
        consumer = "indexer"
        position = "end"
        """)
    sc = load_scenario(write(tmp_path, text))
    assert sc.faults.faults == (SlowWorkflow("indexer", 8.0, window=(10.0, 20.0)),)
    assert sc.actions == (LeaseAction("seek", 30.0, "indexer", "end"),)


def test_poison_is_every_nth_seq_deterministically():
    class L:  # what the runtime passes: a Lease, of which poison reads the seq
        def __init__(self, seq):
            self.seq = seq

    poison = LeaseConsumerDef("x", poison_every=3).poison()
    assert [s for s in range(1, 13) if poison(L(s))] == [3, 6, 9, 12]
    assert LeaseConsumerDef("quiet").poison() is None


# -- running ------------------------------------------------------------------------
@pytest.mark.parametrize("name", [LEASES.name, CRASHES.name])
def test_shipped_scenarios_run_valid_and_the_report_agrees_with_the_checker(runs, name):
    sim = runs[name]
    assert isinstance(sim, LeaseSimulation) and sim.now == load_scenario(SCENARIOS / name).until
    checked = check_leases(sim)
    assert checked.valid and checked.total["out_of_order"] == 0
    report = leases_report(sim, name=name, checked=check_leases(sim))  # a fresh check of the same run
    assert report == leases_report(sim, name=name)
    assert report["check"] == json.loads(json.dumps(checked.total))
    pc = checked.per_consumer.set_index("consumer")
    assert [c["consumer"] for c in report["consumers"]] == list(pc.index)
    for c in report["consumers"]:
        row = pc.loc[c["consumer"]]
        for key in ("delivered", "duplicates", "lost", "dead_lettered", "pending", "out_of_order", "retired"):
            assert c[key] == row[key], (c["consumer"], key)
        assert sum(c["duplicates_by_cause"].values()) == c["duplicates"]
        assert sum(c["lost_by_cause"].values()) == c["lost"]
    t = report["totals"]
    for key in ("published", "delivered", "duplicates", "lost", "dead_lettered", "pending", "out_of_order"):
        assert t[key] == checked.total[key]
    assert t["delivered"] == sum(c["delivered"] for c in report["consumers"])
    assert report["events"]["published"] == len(sim.events()) + report["events"]["pruned"]
    assert t["crashes"] == (sim.trace()["kind"] == "crashed").sum()
    json.dumps(report)  # plain data all the way down
    text = format_leases_report(report)
    assert "fanoutsim leases report" in text and "acks failed closed" in text
    assert format_leases_check(checked).startswith("leases check: VALID")


def test_the_teaching_default_shows_poison_slow_work_a_late_joiner_and_the_fence(runs):
    sim = runs[LEASES.name]
    report = leases_report(sim)
    c = {r["consumer"]: r for r in report["consumers"]}
    # indexer dead-letters exactly the seqs that are multiples of 250, after 10 attempts each
    dead = sim.dead_letters()
    published = report["events"]["published"]
    assert sorted(dead["seq"]) == list(range(250, published + 1, 250))
    assert set(dead["consumer"]) == {"indexer"} and set(dead["attempts"]) == {10}
    # enricher's work outlasts its 5 s lease now and then: duplicates, late acks failed closed
    assert c["enricher"]["duplicates"] > 0 and set(c["enricher"]["duplicates_by_cause"]) == {"lease_expired"}
    assert set(c["enricher"]["acks_refused"]) <= {"expired", "wrong_token", "no_lease"}
    assert c["indexer"]["duplicates"] == 0 and c["indexer"]["lost"] == 0
    # audit joined at 300 s and back-filled from the retention horizon then
    t = sim.trace()
    start = t[(t["kind"] == "consumer_start") & (t["consumer"] == "audit")]
    assert _t(sim, start) == [300.0] and int(start["detail"].iloc[0]) > 0
    assert c["audit"]["delivered"] > 0.9 * (published - int(start["detail"].iloc[0]))
    # archiver lags and holds the fence until it is retired at 450 s — refused while its lease in hand is
    # live, applied once that worker acked (within its 2 s of work); then the backlog goes
    refused = t[(t["kind"] == "retire_refused") & (t["consumer"] == "archiver")]
    retired = t[(t["kind"] == "retired") & (t["consumer"] == "archiver")]
    assert _t(sim, refused)[0] == 450.0 and refused["detail"].tolist()[0] == "outstanding_lease"
    assert len(retired) == 1 and 450.0 < _t(sim, retired)[0] <= 452.0
    pruned = t[t["kind"] == "pruned"]
    at = pd.Series(_t(sim, pruned)).value_counts().sort_index()
    assert at[(at.index >= 450) & (at.index <= 480)].sum() > 3 * at[at.index < 450].max()
    assert len(sim.events()) < 0.25 * report["events"]["published"]  # the log is short again
    assert c["archiver"]["retired"] and set(c["archiver"]["lost_by_cause"]) == {"retired"}
    assert report["totals"]["lost_by_cause"] == {"retired": c["archiver"]["lost"]}


def test_the_crash_scenario_redelivers_after_crashes_and_the_restore_and_loses_nothing(runs):
    sim = runs[CRASHES.name]
    checked = check_leases(sim)
    assert checked.total["lost"] == 0
    causes = checked.total["duplicates_by_cause"]
    assert causes.get("crash", 0) >= 1 and causes.get("restore", 0) >= 1 and "unknown" not in causes
    t = sim.trace()
    crashed = t.loc[t["kind"] == "crashed", "detail"].tolist()
    assert len(crashed) > 5
    assert {
        "worker.after_effect_before_ack",
        "lease.after_commit",
        "ack.before_commit",
        "recover.before_commit",
        "random",
    } <= set(crashed)
    assert _t(sim, t[t["kind"] == "restored"]) == [600.0]
    report = leases_report(sim, checked=checked)
    assert report["events"]["incarnation"] == 2 and report["totals"]["restores"] == 1
    assert report["totals"]["acks_refused"].get("stale_incarnation", 0) >= 1


def test_same_seed_same_trace_and_overrides():
    sc = load_scenario(CRASHES)
    a, b = sc.run(until=300.0), sc.run(until=300.0)
    pd.testing.assert_frame_equal(a.trace(), b.trace())
    assert leases_report(a) == leases_report(b)
    c = sc.run(seed=7, until=200.0)
    assert (c.seed, c.now) == (7, 200.0)
    assert not c.trace()["t"].head(200).equals(a.trace()["t"].head(200))
    with pytest.raises(ScenarioError, match=r"run\.until: .*\(override\)"):
        sc.run(until=0)
    with pytest.raises(ScenarioError, match=r"run\.seed: must be an integer"):
        sc.build(seed="zero")


def test_a_seek_back_redelivers_with_cause_seek(tmp_path):
    text = MINIMAL + '\n[[actions]]\nkind = "seek"\nat = 30.0\nconsumer = "indexer"\nposition = "beginning"\n'
    sim = load_scenario(write(tmp_path, text)).run()
    checked = check_leases(sim)
    assert checked.valid and set(checked.total["duplicates_by_cause"]) == {"seek"}
    assert checked.total["duplicates"] > 30


def test_a_late_consumer_can_start_at_a_seq_and_one_outside_the_log_is_refused(tmp_path):
    sim = load_scenario(write(tmp_path, MINIMAL + '\n[[consumers]]\nname = "late"\njoin_at = 30.0\nstart = 10\n')).run()
    t = sim.trace()
    got = t.loc[(t["kind"] == "delivered") & (t["consumer"] == "late"), "event_id"]
    seqs = sim.events().set_index("event_id").loc[got, "seq"]
    assert seqs.min() == 11 and check_leases(sim).valid
    sc = load_scenario(write(tmp_path, MINIMAL + '\n[[consumers]]\nname = "late"\njoin_at = 5.0\nstart = 100000\n'))
    with pytest.raises(ScenarioError, match=r"consumers\[1\]\.start: at t=5: .*past the end of the log"):
        sc.run()


# -- errors ---------------------------------------------------------------------
def _consumer(extra: str) -> str:
    return MINIMAL.replace("duration = 0.01", "duration = 0.01\n" + extra)


# (the file, the key path the error must name, fragments it must contain)
ERRORS = [
    pytest.param(
        "bogus = 1\n" + MINIMAL,
        "bogus",
        ["unknown key", "design, name, description, run, leases, consumers, workload, actions, faults"],
        id="unknown-top-level-key",
    ),
    pytest.param(
        MINIMAL + "\n[config]\nreactor_poll_interval = 1\n",
        "config",
        ["[config] belongs to a scenario of the reactor design"],
        id="reactor-table",
    ),
    pytest.param(
        MINIMAL + "\n[outbox]\nsafety_poll_interval = 1\n",
        "outbox",
        ["[outbox] belongs to a scenario of the outbox design"],
        id="outbox-table",
    ),
    pytest.param(
        MINIMAL.replace('design = "leases"', 'design = "lease"'),
        "design",
        ["'reactor', 'outbox', 'leases'", "'lease'"],
        id="design-typo",
    ),
    pytest.param(
        MINIMAL.replace('design = "leases"', "") + "\n[leases]\nretention = 10\n",
        "leases",
        ["[leases] belongs to a scenario of the leases design", "set design = 'leases'"],
        id="leases-table-without-design",
    ),
    pytest.param(
        MINIMAL + "\n[leases]\nttl = 1\n",
        "leases.ttl",
        ["unknown key", "[leases]", "retention, retention_interval, recovery_interval, max_retry_delay"],
        id="leases-unknown-key",
    ),
    pytest.param(
        MINIMAL + '\n[leases]\npartition_order = "fifo"\n',
        "leases.partition_order",
        ["one of 'riffdb', 'head_of_line'", "'fifo'"],
        id="leases-bad-partition-order",
    ),
    pytest.param(
        MINIMAL + "\n[leases]\nmax_retry_delay = 7200\n",
        "leases.max_retry_delay",
        ["at most 3600 seconds", "7200"],
        id="leases-retry-delay-over-riffdb-bound",
    ),
    pytest.param(
        MINIMAL + "\n[leases]\nretention = -5\n",
        "leases.retention",
        [">= 1e-06 (1 µs, the clock's unit)", "-5"],
        id="leases-bad-retention",
    ),
    pytest.param(
        _consumer("batch_limit = 9"),
        "consumers[0].batch_limit",
        ["must be an integer from 1 through 8, got 9", "RiffDB's range; limits = 'open' allows 1 through 10000"],
        id="batch-limit-range",
    ),
    pytest.param(
        _consumer("in_flight_limit = 0"),
        "consumers[0].in_flight_limit",
        ["from 1 through 8, got 0"],
        id="in-flight-range",
    ),
    pytest.param(
        _consumer("lease_seconds = 1"),
        "consumers[0].lease_seconds",
        ["must be 5 through 900 seconds, got 1"],
        id="lease-too-short",
    ),
    pytest.param(
        _consumer("lease_seconds = 3600"), "consumers[0].lease_seconds", ["5 through 900 seconds"], id="lease-too-long"
    ),
    pytest.param(
        _consumer("retries = 3"),
        "consumers[0].retries",
        ["unknown key", "name, start, batch_limit", "poison_every", "retire_at"],
        id="consumer-unknown-key",
    ),
    pytest.param(_consumer("fail = 2"), "consumers[0].fail", ["[0, 1]"], id="consumer-bad-fail"),
    pytest.param(
        _consumer("poison_every = 0"), "consumers[0].poison_every", ["integer >= 1"], id="consumer-bad-poison"
    ),
    pytest.param(
        _consumer("nack_delay = 4000"),
        "consumers[0].nack_delay",
        ["0 through 3600 seconds (leases.max_retry_delay)"],
        id="nack-delay-over-max",
    ),
    pytest.param(
        _consumer("poll_interval = 0"),
        "consumers[0].poll_interval",
        [">= 1e-06 (1 µs, the clock's unit)"],
        id="poll-interval-zero",
    ),
    pytest.param(
        _consumer('start = "middle"'),
        "consumers[0].start",
        ['"beginning", "end" or a seq', "'middle'"],
        id="consumer-bad-start",
    ),
    pytest.param(
        _consumer("start = 5"), "consumers[0].start", ["log is empty", "join_at"], id="consumer-seq-start-at-0"
    ),
    pytest.param(
        _consumer("join_at = 60"), "consumers[0].join_at", ["before run.until (60)"], id="consumer-joins-too-late"
    ),
    pytest.param(
        _consumer("join_at = 20\nretire_at = 10"),
        "consumers[0].retire_at",
        ["after join_at (20)"],
        id="retire-before-join",
    ),
    pytest.param(
        _consumer("retire_at = 90"), "consumers[0].retire_at", ["before run.until (60)"], id="retire-after-until"
    ),
    pytest.param(
        MINIMAL.replace("duration = 0.01", 'duration = {dist = "normal", mean = 1}'),
        "consumers[0].duration.dist",
        ["'exponential', 'uniform'", "'normal'"],
        id="consumer-bad-dist",
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
        MINIMAL.replace("rate = 2.0", "rate = 2.0\npartitions = 0"),
        "workload[0].partitions",
        ["a count (an integer >= 1", "list of partition names"],
        id="workload-no-partitions",
    ),
    pytest.param(
        MINIMAL.replace("rate = 2.0", 'rate = 2.0\npartitions = ["a", "a"]'),
        "workload[0].partitions",
        ["distinct partitions"],
        id="workload-duplicate-partitions",
    ),
    pytest.param(
        MINIMAL.replace("rate = 2.0", "rate = 2.0\npages = 10"),
        "workload[0].pages",
        ["unknown key", "rate, partitions, kind, start, stop"],
        id="workload-outbox-key",
    ),
    pytest.param(
        MINIMAL.replace("rate = 2.0", "rate = 2.0\nstart = 10\nstop = 5"),
        "workload[0].stop",
        ["after start (10)"],
        id="workload-stop-before-start",
    ),
    pytest.param(
        MINIMAL + '\n[[actions]]\nkind = "explode"\nat = 1\n',
        "actions[0].kind",
        ["restore, seek", "'explode'"],
        id="action-unknown-kind",
    ),
    pytest.param(
        MINIMAL + '\n[[actions]]\nkind = "retire"\nat = 1\n',
        "actions[0].kind",
        ["retire_at"],
        id="action-retire-points-to-retire-at",
    ),
    pytest.param(MINIMAL + '\n[[actions]]\nkind = "restore"\n', "actions[0].at", ["required"], id="action-no-at"),
    pytest.param(
        MINIMAL + '\n[[actions]]\nkind = "restore"\nat = 120\n',
        "actions[0].at",
        ["before run.until (60)"],
        id="action-after-until",
    ),
    pytest.param(
        MINIMAL + '\n[[actions]]\nkind = "restore"\nat = 1\nconsumer = "indexer"\n',
        "actions[0].consumer",
        ["unknown key", "for 'restore'", "kind, at"],
        id="restore-with-consumer",
    ),
    pytest.param(
        MINIMAL + '\n[[actions]]\nkind = "seek"\nat = 1\nconsumer = "nope"\n',
        "actions[0].consumer",
        ["'nope' is not declared", "declared: indexer"],
        id="seek-unknown-consumer",
    ),
    pytest.param(
        MINIMAL + '\n[[actions]]\nkind = "seek"\nat = 1\nconsumer = "indexer"\nposition = -3\n',
        "actions[0].position",
        ['"beginning", "end" or a seq'],
        id="seek-bad-position",
    ),
    pytest.param(
        _consumer("retire_at = 20") + '\n[[actions]]\nkind = "seek"\nat = 30\nconsumer = "indexer"\n',
        "actions[0].at",
        ["retired at 20"],
        id="seek-after-retire",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "fail_inserts"\n',
        "faults[0].kind",
        [
            "'fail_inserts' is a fault of the reactor design",
            "a leases scenario accepts: crash_at, crash_randomly, crash_at_point, slow_workflow",
        ],
        id="reactor-only-fault",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "notifications"\ndrop = 0.5\n',
        "faults[0].kind",
        ["'notifications' is a fault of the outbox design", "crash_at_point"],
        id="outbox-only-fault",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "meteor"\n',
        "faults[0].kind",
        ["'meteor' is not a fault kind", "a leases scenario accepts: crash_at"],
        id="unknown-fault-kind",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "crash_at_point"\npoint = "poll.after_fetch"\n',
        "faults[0].point",
        ["crash point of the reactor design", "worker.after_effect_before_ack"],
        id="reactor-crash-point",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "crash_at_point"\npoint = "dispatch.after_fetch"\n',
        "faults[0].point",
        ["crash point of the outbox design", "ack.before_commit"],
        id="outbox-crash-point",
    ),
    pytest.param(
        MINIMAL + '\n[[faults]]\nkind = "slow_workflow"\nworkflow = "indexer"\nduration = 1\n',
        "faults[0].workflow",
        ["unknown key", "write consumer = ..."],
        id="slow-workflow-key",
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
        MINIMAL + '\n[[faults]]\nkind = "crash_at"\nat = -1\n', "faults[0].at", [">= 0"], id="fault-bad-value"
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
    text = MINIMAL.replace('design = "leases"', 'design = "leeses"\ncolour = "red"').replace(
        "duration = 0.01", "duration = 0.01\nlease_seconds = 2"
    ) + textwrap.dedent("""
        [leases]
        retention = 0

        [[consumers]]
        name = "second"
        batch_limit = 10

        [[actions]]
        kind = "restore"
        at = -1

        [[faults]]
        kind = "ties"

        [[faults]]
        kind = "crash_at_point"
        point = "worker.after_effect_before_ack"
        nth = 0
        """)
    err = error_of(write(tmp_path, text))
    assert [p for p, _ in err.problems] == [
        "design",
        "colour",
        "leases.retention",
        "consumers[0].lease_seconds",
        "consumers[1].batch_limit",
        "actions[0].at",
        "faults[0].kind",
        "faults[1].nth",
    ]
    assert str(err).startswith(f"{tmp_path / 'scn.toml'}: 8 problems:\n")
    assert "checked as the leases design" in str(err)


def test_a_caller_needing_another_design_refuses_a_leases_file():
    with pytest.raises(ScenarioError, match=r"design: this needs a scenario of the reactor design.*leases"):
        load_scenario(LEASES, design="reactor")
    assert isinstance(load_scenario(LEASES, design="leases"), LeaseScenario)


# -- the CLI ------------------------------------------------------------------------
def test_cli_run_writes_everything_and_prints_the_leases_report(tmp_path, capsys, monkeypatch):
    # figures: tested below, on their own
    monkeypatch.setattr("fanoutsim.designs.leases.plots.save_leases_figures", lambda sim, out, checked=None: [])
    out = tmp_path / "out"
    assert main(["run", str(CRASHES), "--until", "300", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert {p.name for p in out.iterdir()} == {"report.json", ".fanoutsim-outputs.json"} | TABLES
    sim = load_scenario(CRASHES).run(until=300.0)
    report, checked = full_report(sim, "leases-crashes", load_scenario(CRASHES).description)
    assert json.loads((out / "report.json").read_text()) == report
    assert report["check"]["valid"] is True
    why = f"\n{format_causes(report['causes'])}" if report["causes"] else ""  # each cause, in plain words
    assert captured.out == (
        format_leases_report(report) + "\n" + format_leases_check(checked) + "\n" + why + f"\nwrote 5 files to {out}\n"
    )
    assert "leases check: VALID" in captured.out and captured.err == ""
    assert pd.read_parquet(out / "events.parquet")["event_id"].tolist() == sim.events()["event_id"].tolist()
    assert pd.read_parquet(out / "checkpoints.parquet").to_dict("records") == sim.checkpoints().to_dict("records")
    assert pd.read_parquet(out / "consumers.parquet")["consumer"].tolist() == ["indexer", "ledger", "mailer"]
    assert list(pd.read_parquet(out / "dead_letters.parquet").columns) == list(sim.dead_letters().columns)


def test_cli_figures_come_from_the_designs_plots(tmp_path, capsys, monkeypatch):
    def fake(sim, out, *, checked=None):
        path = Path(out) / "leases_fake.png"
        path.write_bytes(b"png")
        return [path]

    monkeypatch.setattr("fanoutsim.designs.leases.plots.save_leases_figures", fake)
    out = tmp_path / "f"
    assert main(["run", str(LEASES), "--until", "60", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"report.json", "leases_fake.png", ".fanoutsim-outputs.json"} | TABLES
    assert "wrote 6 files" in capsys.readouterr().out


def test_cli_json_prints_only_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("fanoutsim.designs.leases.plots.save_leases_figures", lambda sim, out, checked=None: [])
    out = tmp_path / "j"
    assert main(["run", str(LEASES), "--until", "120", "--seed", "3", "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["design"] == "leases" and report["seed"] == 3 and report["time_span_s"] == 120.0
    assert report["check"]["valid"] is True
    scenario = load_scenario(LEASES)
    assert report == full_report(scenario.run(seed=3, until=120.0), "leases", scenario.description)[0]
    assert captured.err.strip() == f"wrote 5 files to {out}"


def test_cli_bad_leases_file_exits_2(tmp_path, capsys):
    bad = write(tmp_path, MINIMAL + '\n[[faults]]\nkind = "pollers"\ncount = 2\n', "bad.toml")
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("fanoutsim: error: ")
    assert f"{bad}: faults[0].kind: 'pollers' is a fault of the reactor design" in captured.err
    assert not (tmp_path / "o").exists()


def test_duckdb_store_runs_the_same(tmp_path):
    sc = load_scenario(write(tmp_path, MINIMAL))
    mem, duck = sc.run(until=30.0), sc.run(until=30.0, store="duckdb")
    assert duck.events()["event_id"].tolist() == mem.events()["event_id"].tolist()
    assert duck.checkpoints().equals(mem.checkpoints())


def test_cli_writes_the_real_leases_figures(tmp_path, capsys):
    out = tmp_path / "real"
    assert main(["run", str(LEASES), "--until", "60", "--out", str(out)]) == 0
    pngs = {p.name for p in out.iterdir() if p.suffix == ".png"}
    assert pngs and all((out / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in pngs)
    assert f"wrote {len(pngs) + 5} files to {out}" in capsys.readouterr().out
