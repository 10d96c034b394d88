"""One flag for where a run lives (``--store``, with ``--db`` its older alias), a
design named on the command line checked against the designs there are, a
write's fields given once each, and a store that records its design — so a
file of one design is not served, written or read as another."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fanoutsim.cli import main
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.designs.reactor.simulation import Simulation
from fanoutsim.designs.stores import StoreError, open_store
from fanoutsim.serve import recorded_design

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fanoutsim" / "examples"


def error_line(capsys, *fragments: str) -> str:
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("fanoutsim: error: "), (out, err)
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def reactor_file(tmp_path, capsys) -> Path:
    """A DuckDB file made by ``fanoutsim run --store``: a reactor run."""
    path = tmp_path / "r.duckdb"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "default.toml"),
                "--until",
                "2",
                "--store",
                str(path),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    return path


@pytest.mark.parametrize("command", [["status"], ["write", "x=1"]])
def test_an_unknown_design_is_refused_listing_the_designs(tmp_path, capsys, command):
    assert main([command[0], "--store", str(tmp_path / "f.duckdb"), "--design", "nope", *command[1:]]) == 2
    error_line(capsys, "--design", "'nope'", "reactor, outbox, leases")
    assert not (tmp_path / "f.duckdb").exists()


def test_a_run_made_by_run_records_its_design(reactor_file, capsys):
    assert recorded_design(str(reactor_file)) == "reactor"
    assert main(["status", "--store", str(reactor_file)]) == 0  # no --design needed
    assert json.loads(capsys.readouterr().out)["design"] == "reactor"


def test_db_is_the_older_name_of_store(reactor_file, capsys):
    assert main(["status", "--store", str(reactor_file)]) == 0
    by_store = json.loads(capsys.readouterr().out)
    assert main(["status", "--db", str(reactor_file)]) == 0
    by_db = json.loads(capsys.readouterr().out)
    assert by_db.keys() == by_store.keys() and by_db["design"] == by_store["design"] == "reactor"
    assert main(["status", "--db", str(reactor_file), "--store", str(reactor_file)]) == 2
    error_line(capsys, "--store")


@pytest.mark.parametrize("command", ["run", "serve", "status"])
def test_a_file_name_is_refused_or_accepted_alike_by_every_command(tmp_path, capsys, command):
    bad = str(tmp_path / "x.db")
    argv = {
        "run": ["run", str(SCENARIOS / "default.toml"), "--until", "1", "--out", str(tmp_path / "o")],
        "serve": ["serve"],
        "status": ["status"],
    }[command]
    assert main([*argv, "--store", bad]) == 2
    error_line(capsys, "'" + bad + "'", "a path ending in .duckdb")
    assert not os.path.exists(bad)


def test_a_field_given_twice_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "o.duckdb"
    assert main(["write", "--store", str(path), "--design", "outbox", "page=a", 'page:="b"', "body=x"]) == 2
    error_line(capsys, "field 'page' is given twice")
    assert not path.exists()


def test_serve_refuses_a_scenario_of_another_design_by_name(reactor_file, capsys):
    before = reactor_file.read_bytes()
    assert main(["serve", "--store", str(reactor_file), "--scenario", str(SCENARIOS / "outbox.toml")]) == 2
    error_line(capsys, "reactor design", "outbox design")
    assert reactor_file.read_bytes() == before


def test_a_runtime_of_another_design_is_refused_by_name(reactor_file):
    with pytest.raises(StoreError, match="holds a run of the reactor design, not of the outbox design"):
        OutboxSimulation(store=str(reactor_file))


def test_a_file_that_records_no_design_is_the_design_whose_tables_hold_rows(tmp_path):
    """A file written before designs were recorded: its design is the one whose
    tables hold rows; an empty one is any design's, and records it."""
    old = str(tmp_path / "old.duckdb")
    sim = Simulation(store=old)
    sim.fire("pricing_reactor", {"quote": {"price": 1}})
    sim.store.con.execute("DELETE FROM fanoutsim_meta WHERE key = 'design'")
    sim.store.close()
    assert recorded_design(old) is None
    with pytest.raises(
        StoreError,
        match=(
            "holds a run of the reactor design, not of the outbox design "
            ".it records no design.*its reactor tables hold rows"
        ),
    ):
        OutboxSimulation(store=old)
    Simulation(store=old).store.close()  # the reactor's: taken, and recorded
    assert recorded_design(old) == "reactor"
    empty = str(tmp_path / "empty.duckdb")
    open_store(empty).close()  # tables, no design, no rows
    OutboxSimulation(store=empty).store.close()
    assert recorded_design(empty) == "outbox"
