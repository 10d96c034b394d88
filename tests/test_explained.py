"""What helps a reader start and understand: the shipped examples and their
schemas from the command line, reports that say why, one item's story for
every design, and a predicate error in plain words."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from clitools import cli, one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim import designs, examples
from fanoutsim.cli import cause_rows, main
from fanoutsim.designs.reactor.analysis.sweep import recommendation_line
from fanoutsim.designs.reactor.predicate import activation, compile_predicate, explain_error
from fanoutsim.scenario import json_schema_text, load_scenario


# -- fanoutsim example / schema ------------------------------------------------------
def test_example_lists_every_shipped_scenario_with_its_design_and_description(capsys):
    assert main(["example"]) == 0
    out = capsys.readouterr().out
    for name in examples.names():
        s = examples.summary(name)
        assert any(line.split()[:2] == [name, s["design"]] and s["description"] in line for line in out.splitlines())
    assert "fanoutsim example NAME --out FILE && fanoutsim run FILE" in out


def test_example_out_writes_a_file_that_runs(tmp_path, capsys):
    target = tmp_path / "x.toml"
    assert main(["example", "outbox", "--out", str(target)]) == 0
    assert target.read_text() == examples.path("outbox").read_text()
    assert f"fanoutsim run {target}" in capsys.readouterr().out
    assert main(["run", str(target), "--until", "30", "--out", str(tmp_path / "out")]) == 0
    assert "outbox check: VALID" in capsys.readouterr().out


def test_an_example_that_replays_a_recording_brings_it_along(tmp_path, capsys):
    assert main(["example", "quotes-day", "--out", str(tmp_path / "q.toml")]) == 0
    assert (tmp_path / "quotes-day.parquet").read_bytes() == (examples.FOLDER / "quotes-day.parquet").read_bytes()
    assert load_scenario(tmp_path / "q.toml").replays  # its recording is found beside it


def test_example_refuses_to_overwrite_and_names_what_exists(tmp_path):
    target = tmp_path / "mine.toml"
    target.write_text("# my edits")
    one_error_line(cli("example", "leases", "--out", str(target)), str(target), "exists already")
    assert target.read_text() == "# my edits"
    one_error_line(cli("example", "nope"), "no example scenario named 'nope'", "default", "outbox")


def test_example_without_out_prints_the_toml(capsys):
    assert main(["example", "leases"]) == 0
    assert capsys.readouterr().out == examples.path("leases").read_text()


@pytest.mark.parametrize("design", ["reactor", "outbox", "leases"])
def test_schema_prints_the_designs_json_schema(design, capsys):
    assert main(["schema", design]) == 0
    text = capsys.readouterr().out
    assert text == json_schema_text(design) and json.loads(text)["type"] == "object"


def test_schema_of_an_unknown_design_names_the_designs():
    one_error_line(cli("schema", "nope"), "no design named 'nope'", "reactor, outbox, leases")


# -- reports that explain themselves --------------------------------------------------
def test_the_leases_report_says_the_retired_losses_are_expected_and_why(tmp_path, capsys):
    assert main(["run", str(examples.path("leases")), "--until", "600", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    description = load_scenario(examples.path("leases")).description
    assert description in " ".join(out.splitlines()[:4])
    assert "lost by retired (expected): the consumer was retired on purpose" in out
    report = json.loads((tmp_path / "report.json").read_text())
    [retired] = [c for c in report["causes"] if c["cause"] == "retired"]
    assert retired["kind"] == "lost" and retired["expected"] is True and retired["count"] > 0


@pytest.mark.parametrize("name", ["reactor", "outbox", "leases"])
def test_every_cause_a_checker_names_has_a_sentence(name):
    import importlib

    checker = importlib.import_module(f"fanoutsim.designs.{name}.checker")
    design = designs.get(name)
    assert set(checker.LOSS_CAUSES) <= set(design.causes["lost"])
    assert set(checker.DUPLICATE_CAUSES) <= set(design.causes["duplicates"])
    assert all(text and text[0].islower() for kind in design.causes.values() for text in kind.values())


def test_an_unexpected_cause_is_said_to_be_unexpected():
    sim = load_scenario(examples.path("crashes")).run(until=600)
    checked = fs.check(sim)
    rows = cause_rows(designs.get("reactor"), checked)
    assert rows and all(r["expected"] is (r["cause"] != "unknown") for r in rows if r["kind"] == "duplicates")
    assert designs.get("outbox").expected(None, "lost", "late_commit") is False
    assert designs.get("leases").expected(None, "lost", "pruned") is False


def test_the_recommendation_says_its_rule_and_why_a_tie_went_one_way():
    rows = []
    for interval in (0.5, 1.0):
        for batch in (10, 100):
            rows.append(
                {
                    "reactor_poll_interval": interval,
                    "reactor_poll_batch_limit": batch,
                    "seed": 0,
                    "fire_to_dispatch_p99_s": interval,
                    "polls_per_s": 4 / interval,
                    "backlog": 0,
                    "valid": True,
                }
            )
    line = recommendation_line(pd.DataFrame(rows))
    assert "reactor_poll_interval = 1, reactor_poll_batch_limit = 100" in line
    assert "the rule: of the settings within the budget that keep up and are valid, the fewest poll queries" in line
    assert "reactor_poll_batch_limit 10 gave the same p99 and poll rate here" in line


@pytest.mark.parametrize(
    "name, key, stat, readers",
    [
        ("outbox", "safety_poll_interval", "commit_to_handled_p99_s", {"indexer", "search", "analytics", "triage"}),
        ("leases", "consumers.enricher.lease_seconds", "publish_to_ack_p99_s", {"indexer", "enricher", "archiver"}),
    ],
)
def test_a_sweep_has_each_consumers_own_latency(name, key, stat, readers):
    df = fs.sweep(examples.path(name), grid={key: [5, 30]}, seeds=[0], until=120, cache=None, progress=False)
    own = [c for c in df.columns if c.startswith(f"{stat}[")]
    assert {c[len(stat) + 1 : -1] for c in own} == readers  # audit joins at 300 s: none of its own yet
    assert df.columns[-1] == "wall_s" and all(df[c].notna().all() for c in own)
    # the aggregate is no consumer's own figure: the slowest one's p99 is at least the aggregate's
    assert np.all(df[own].max(axis=1) >= df[stat] - 1e-9)


# -- one item's story ------------------------------------------------------------------
def _stored(tmp_path, name: str):
    """A run of the shipped scenario ``name`` kept in a DuckDB file, and the simulation."""
    path = tmp_path / f"{name}.duckdb"
    sim = load_scenario(examples.path(name)).run(until=120, store=str(path))
    return path, sim


def test_explain_tells_a_firings_story_from_the_file(tmp_path):
    path, sim = _stored(tmp_path, "default")
    firing = sim.firings()["id"].iloc[0]
    expected = designs.get("reactor").explain(sim, firing)
    sim.store.close()
    done = cli("explain", str(path), firing, "--design", "reactor")
    assert done.returncode == 0 and done.stdout == expected
    assert (
        done.stdout.startswith(f"firing {firing}: pricing_reactor@")
        and "-> audit: no filter; dispatched 1" in done.stdout
    )


def test_explain_tells_an_outbox_rows_story(tmp_path):
    path, sim = _stored(tmp_path, "outbox")
    sim.store.close()
    done = cli("explain", str(path), "1", "--design", "outbox")
    assert done.returncode == 0 and done.stdout.startswith("outbox row 1: committed at ")
    assert "-> indexer: handled: its cursor" in done.stdout
    one_error_line(cli("explain", str(path), "abc", "--design", "outbox"), "seq, a whole number", "'abc'")
    one_error_line(cli("explain", str(path), "99999999", "--design", "outbox"), "no outbox row 99999999")


def test_explain_tells_a_leased_events_story(tmp_path):
    path, sim = _stored(tmp_path, "leases")
    event = sim.events()["event_id"].iloc[-1]
    sim.store.close()
    done = cli("explain", str(path), event, "--design", "leases")
    assert done.returncode == 0 and done.stdout.startswith(f"event {event}: partition ")
    assert "-> indexer: " in done.stdout and "-> archiver: " in done.stdout
    one_error_line(cli("explain", str(path), "12", "--design", "leases"), "<commit:ordinal>")


# -- a predicate error in plain words ---------------------------------------------------
@pytest.mark.parametrize(
    "when, quote, words",
    [
        ("payload.quote.price > 100", {"price": None}, "payload.quote.price is null; '>' needs a number"),
        (
            "payload.quote.price > 100",
            {"price": "high"},
            "payload.quote.price is the string \"high\"; '>' needs a number",
        ),
        ("payload.quote.price > 100", {}, "payload.quote.price is missing"),
        ("payload.quote.price + 1 > 2", {"price": None}, "payload.quote.price is null; '+' needs a number"),
        ("payload.quote.price", {"price": 3}, "the filter gives a number, not true or false"),
    ],
)
def test_a_predicate_error_is_told_in_plain_words(when, quote, words):
    sources = {"quote": quote}
    value, error = compile_predicate(when).evaluate(activation(sources, "r", "t"))
    assert value is None and error is not None
    text = explain_error(when, sources, error)
    assert text.startswith(words) and "Token" not in text and "celpy" not in text


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.text(max_size=5),
        st.booleans(),
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(-(2**63), 2**63 - 1), max_size=2),
    )
)
def test_any_failing_comparison_is_told_without_celpys_words(price):
    when, sources = "payload.quote.price > 100", {"quote": {"price": price}}
    value, error = compile_predicate(when).evaluate(activation(sources, "r", "t"))
    if error is None:
        return
    text = explain_error(when, sources, error)
    assert "payload.quote.price" in text and "Token" not in text and "<class" not in text


def test_the_report_names_the_firing_the_filter_and_what_the_policy_did():
    from fanoutsim.analysis import delivery_report
    from fanoutsim.report import format_report

    texts = {}
    for policy in ("skip", "hold"):
        sim = fs.Simulation(config=fs.SchedulerConfig(predicate_error_policy=policy), seed=0)
        sim.runner.register_workflow("w")
        sim.runner.subscribe_workflow_to_reactor("p", "w", "acme", when="payload.quote.price > 100")
        firing = sim.fire("p", {"quote": {"price": None}}, tenant="acme")
        sim.run(until=30)
        texts[policy] = format_report(delivery_report(sim, name="x"))
        assert f"the first on firing {firing}" in texts[policy]
        assert "filter payload.quote.price > 100: payload.quote.price is null; '>' needs a number" in texts[policy]
    assert "skip: counted as false, so not dispatched, and the watermark moved past it" in texts["skip"]
    assert "5th error in a row dead-lettered it" in texts["hold"]


def test_fs_explain_tells_a_filter_error_in_the_reports_words(capsys):
    sim = fs.Simulation(seed=0)
    sim.runner.register_workflow("w")
    sim.runner.subscribe_workflow_to_reactor("p", "w", "acme", when="payload.quote.price > 100")
    firing = sim.fire("p", {"quote": {"price": None}}, tenant="acme")
    sim.run(until=5)
    timeline = fs.explain(sim, firing)
    [said] = timeline.loc[timeline["kind"] == "predicate", "detail"]
    assert said == "error: payload.quote.price is null; '>' needs a number"
    printed = capsys.readouterr().out
    assert said in printed and "Token" not in printed and "celpy" not in printed
    raw = sim.trace().query("kind == 'predicate'")["detail"].iloc[0]
    assert "no matching overload" in raw  # the trace keeps cel-python's message as evaluated
