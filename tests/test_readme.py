"""The README's examples run as written (with the user's own functions stubbed)."""
from __future__ import annotations

import contextlib
import io
import re
import tomllib
from pathlib import Path

from fanoutsim.scenario import parse_scenario

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_outbox_example_runs_and_loses_nothing():
    [code] = [b for b in blocks("python") if "OutboxSimulation(" in b]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"send_mail": lambda row: None})
    assert "outbox check: valid" in out.getvalue() and " 0 lost" in out.getvalue()


def test_the_outbox_scenario_example_is_a_valid_scenario():
    [text] = [b for b in blocks("toml") if 'design = "outbox"' in b]
    scenario = parse_scenario(tomllib.loads(text), source="README")
    assert scenario.design == "outbox"


def test_the_leases_example_runs_and_names_its_duplicates():
    [code] = [b for b in blocks("python") if "LeaseSimulation(" in b]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {})
    text = out.getvalue()
    assert "lease_expired" in text and "INVALID" not in text
