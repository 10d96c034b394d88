"""Every duplicated and lost item, with the cause the checker named, for every
design: ``fanoutsim run --store FILE`` keeps the verdicts, ``fanoutsim explain
FILE --duplicates / --lost`` (or the ``--out`` folder) lists them, and one
item's story tells the cause in the report's own words; a write forgets them.
Each design runs a small scenario that makes both duplicates and losses."""

from __future__ import annotations

import json

import pytest
from clitools import cli, one_error_line

from fanoutsim import designs
from fanoutsim.cli import main

SCENARIOS = {
    "reactor": """
name = "reactor-faults"
[run]
seed = 0
until = 40.0
[config]
reactor_poll_interval = 1.0
dispatch_failure_policy = "advance"
[[workflows]]
name = "audit"
duration = 0.02
[[subscriptions]]
reactor = "pricing_reactor"
workflow = "audit"
tenant = "acme"
[[workload]]
reactor = "pricing_reactor"
tenant = "acme"
rate = 5.0
[[faults]]
kind = "crash_at_point"
point = "poll.after_dispatch_before_watermark"
nth = 10
downtime = 1.0
[[faults]]
kind = "fail_inserts"
probability = 0.1
""",
    "outbox": """
design = "outbox"
name = "outbox-faults"
[run]
seed = 0
until = 20.0
[outbox]
safety_poll_interval = 1.0
read_mode = "all"
[[consumers]]
name = "indexer"
duration = 0.01
[[workload]]
rate = 20.0
[[faults]]
kind = "crash_at_point"
point = "dispatch.after_handle_before_cursor"
nth = 50
downtime = 1.0
[[faults]]
kind = "late_commit"
probability = 0.1
delay = { dist = "uniform", low = 0.05, high = 0.5 }
""",
    "leases": """
design = "leases"
name = "leases-faults"
[run]
seed = 0
until = 40.0
[[consumers]]
name = "slow"
duration = { dist = "uniform", low = 0.0, high = 12.0 }
lease_seconds = 5.0
[[consumers]]
name = "laggard"
duration = 2.0
in_flight_limit = 1
batch_limit = 1
retire_at = 15.0
[[workload]]
rate = 2.0
partitions = 2
""",
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def stored(request, tmp_path_factory):
    """A run of the design's small scenario, kept in a DuckDB file and an
    ``--out`` folder: (design, file, folder, report.json)."""
    folder = tmp_path_factory.mktemp(request.param)
    scenario = folder / "scenario.toml"
    scenario.write_text(SCENARIOS[request.param])
    db, out = folder / "run.duckdb", folder / "out"
    assert main(["run", str(scenario), "--store", str(db), "--out", str(out)]) == 0
    return request.param, db, out, json.loads((out / "report.json").read_text())


def _meaning(report: dict, kind: str, cause: str) -> str:
    """The plain words the report prints beside a cause."""
    key = "duplicates" if kind == "duplicate" else "lost"
    return next(c["meaning"] for c in report["causes"] if c["kind"] == key and c["cause"] == cause)


def test_the_report_keeps_every_duplicated_and_lost_item_with_its_cause(stored):
    _, _, _, report = stored
    rows = report["verdicts"]
    dups = [r for r in rows if r["kind"] == "duplicate"]
    lost = [r for r in rows if r["kind"] == "lost"]
    assert dups and lost, "the scenario makes both"
    # as many losses as the checker counted, by the same causes
    by_cause = {c["cause"]: c["count"] for c in report["causes"] if c["kind"] == "lost"}
    assert {c: sum(r["cause"] == c for r in lost) for c in by_cause} == by_cause
    # each duplicated item's extra deliveries add up to the checker's count of them
    extra = {(r["reader"], r["item"]): r["deliveries"] - 1 for r in dups}
    assert sum(extra.values()) == sum(c["count"] for c in report["causes"] if c["kind"] == "duplicates")
    assert {r["cause"] for r in dups} == {c["cause"] for c in report["causes"] if c["kind"] == "duplicates"}
    assert all(r["deliveries"] >= 2 for r in dups) and all(r["deliveries"] == 0 for r in lost)


def test_explain_lists_every_item_from_the_file_and_from_the_folder_alike(stored, capsys):
    name, db, out, report = stored
    capsys.readouterr()
    assert main(["explain", str(db), "--duplicates", "--lost"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith(f"{name} run: the checker's verdicts at the end of the run")
    lines = listed.splitlines()
    for r in report["verdicts"]:  # one line each: the item, its reader, its deliveries, its cause
        assert [r["item"], r["reader"], str(r["deliveries"]), r["cause"]] in [line.split() for line in lines], r
    for r in report["verdicts"]:  # each cause in the report's plain words
        assert _meaning(report, r["kind"], r["cause"]) in listed
    assert main(["explain", str(out), "--duplicates", "--lost"]) == 0
    assert capsys.readouterr().out == listed
    assert main(["explain", str(out), "--lost"]) == 0
    only_lost = capsys.readouterr().out
    assert "Lost: " in only_lost and "Duplicated" not in only_lost


def test_a_story_tells_the_cause_the_checker_named_in_the_reports_words(stored, capsys):
    name, db, _, report = stored
    for kind in ("duplicate", "lost"):
        row = next(r for r in report["verdicts"] if r["kind"] == kind)
        capsys.readouterr()
        assert main(["explain", str(db), row["item"]]) == 0
        story = capsys.readouterr().out
        head = f"a duplicate ({row['deliveries']} deliveries)" if kind == "duplicate" else "lost"
        assert f"{head}, by {row['cause']}: {_meaning(report, kind, row['cause'])}" in story, story
        assert "or an ambiguous insert" not in story  # no hedge where the checker decided
        assert "handled: its cursor" not in story or kind != "lost"  # a lost row was never handled


def test_a_write_forgets_the_verdicts_and_the_tables_alone_say_so(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIOS["reactor"])
    db = tmp_path / "run.duckdb"
    assert main(["run", str(scenario), "--store", str(db), "--out", str(tmp_path / "out"), "--until", "20"]) == 0
    done = cli("fire", "--store", str(db), "--reactor", "pricing_reactor", "--tenant", "acme")
    assert done.returncode == 0 and "warning" not in done.stderr  # acme has a subscription
    capsys.readouterr()
    assert main(["explain", str(db), "--duplicates", "--lost"]) == 0
    listed = capsys.readouterr().out
    # the run went on: the check of its end no longer tells it, and the listing says what it rests on
    assert listed.startswith("reactor run: the tables alone (no check kept its verdicts in this file)")
    assert "Duplicated: " in listed and "Lost: " in listed


def test_explain_needs_an_id_or_a_listing_not_both(stored, tmp_path):
    _, db, _, _ = stored
    one_error_line(cli("explain", str(db)), "give an ID", "--duplicates / --lost")
    one_error_line(cli("explain", str(db), "1", "--lost"), "not both")
    (tmp_path / "report.json").write_text(json.dumps({"design": "reactor"}))
    one_error_line(cli("explain", str(tmp_path), "--lost"), "keeps no verdicts item by item", "run the scenario again")
    one_error_line(cli("explain", str(tmp_path / "nope"), "--lost"), "nope")


def test_the_verdicts_name_readers_as_the_checkers_table_does():
    import fanoutsim as fs
    from fanoutsim import examples
    from fanoutsim.scenario import load_scenario

    sim = load_scenario(examples.path("crashes")).run(until=600)
    checked = fs.check(sim)
    rows = designs.get("reactor").verdicts(checked)
    assert {r["reader"] for r in rows} <= {
        f"{r.reactor_name}->{r.workflow_name}@{r.tenant_id}" for r in checked.per_subscription.itertuples()
    }
    assert sum(r["deliveries"] - 1 for r in {(r["reader"], r["item"]): r for r in rows}.values()) == len(
        checked.duplicates
    )
