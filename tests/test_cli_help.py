"""The command's help: every command says what it does, fits the terminal's
width, and the error of an ``explain`` of a missing run names the next step."""

from __future__ import annotations

import argparse

import pytest

from fanoutsim.cli import build_parser, main


def _commands() -> list[str]:
    """Every command ``fanoutsim --help`` lists, read from the parser (a new one is covered too)."""
    parser = build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(found[0].choices)


def help_of(argv: list[str], capsys, monkeypatch, columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))  # the terminal's width, as argparse reads it
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_the_commands_are_read_from_the_parser():
    assert {"run", "serve", "write", "fire", "status", "explain"} <= set(_commands())


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("command", [[], *([c] for c in _commands())], ids=lambda argv: " ".join(argv) or "top")
def test_every_help_fits_the_width_argparse_wraps_at(command, columns, capsys, monkeypatch):
    # argparse wraps at the terminal's columns less 2; a description written as one
    # long line (RawDescriptionHelpFormatter) ran past it in serve, write and explain
    text = help_of(command, capsys, monkeypatch, columns)
    long = [line for line in text.splitlines() if len(line) > columns - 2]
    assert long == [], long


@pytest.mark.parametrize("command", ["serve", "write", "explain"])
def test_examples_and_field_tables_keep_their_lines(command, capsys, monkeypatch):
    text = help_of([command], capsys, monkeypatch)
    assert "\ne.g." in text
    assert "\n  fanoutsim " in text or "\ne.g. fanoutsim " in text  # an example on a line of its own


def test_a_field_row_too_long_goes_on_under_its_meaning(capsys, monkeypatch):
    text = help_of(["write"], capsys, monkeypatch)
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.lstrip().startswith("due_in "))
    column = lines[row].index("seconds")
    assert lines[row + 1].startswith(" " * column) and lines[row + 1][column] != " ", lines[row : row + 2]


def test_fire_help_says_what_it_fires_where_and_what_it_prints(capsys, monkeypatch):
    text = " ".join(help_of(["fire"], capsys, monkeypatch).split())
    for fragment in (
        "Fire REACTOR",
        "--payload",
        "server",
        "PostgreSQL",
        "Print the new firing's id",
        "fanoutsim explain",
    ):
        assert fragment in text, fragment
    assert "\ne.g. fanoutsim fire --store " in help_of(["fire"], capsys, monkeypatch)
    assert "--reactor REACTOR the reactor" in text and "--tenant TENANT the tenant" in text


def test_status_help_says_what_it_reports_and_as_of_which_clock(capsys, monkeypatch):
    text = " ".join(help_of(["status"], capsys, monkeypatch).split())
    for fragment in ("JSON", "watermark lag", "cursor", "checkpoints", "clock", "virtual", "wall", "server"):
        assert fragment in text, fragment
    assert "\ne.g. fanoutsim status --store " in help_of(["status"], capsys, monkeypatch)


@pytest.mark.parametrize("command", ["serve", "write", "fire", "status"])
def test_db_is_another_name_for_store_not_an_older_one(command, capsys, monkeypatch):
    text = " ".join(help_of([command], capsys, monkeypatch).split())
    assert "--store FILE|URI, --db FILE|URI" in text
    assert "--db is another name for --store" in text
    assert "older" not in text and "deprecated" not in text


def explain_error(argv: list[str], capsys) -> str:
    assert main(["explain", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fanoutsim: error: "), captured.err
    return lines[0]


@pytest.mark.parametrize("asked", [["--duplicates"], ["--lost"], ["--duplicates", "--lost"]])
def test_explain_of_a_missing_folder_says_so_and_how_one_is_made(tmp_path, capsys, asked):
    missing = tmp_path / "out" / "crashe"
    line = explain_error([str(missing), *asked], capsys)
    assert f"{missing}: the folder does not exist" in line
    assert f"fanoutsim run SCENARIO --out {missing}" in line
    assert "serve" not in line and "no such file" not in line
    assert not missing.exists() and not (tmp_path / "out").exists()


def test_explain_of_a_missing_store_file_says_how_one_is_made(tmp_path, capsys):
    missing = tmp_path / "typo.duckdb"
    line = explain_error([str(missing), "some-firing-id"], capsys)
    assert f"{missing}: no such file" in line
    assert f"fanoutsim run SCENARIO --store {missing}" in line
    assert not missing.exists()


def test_an_items_story_from_a_missing_path_names_the_store_it_needs(tmp_path, capsys):
    # one item's story is read from a store: a folder run --out wrote cannot tell it
    missing = tmp_path / "out" / "crashe"
    line = explain_error([str(missing), "some-firing-id"], capsys)
    assert f"{missing}: no such file or folder" in line
    assert "--store FILE.duckdb" in line and "--duplicates / --lost" in line
    assert "serve --db" not in line
