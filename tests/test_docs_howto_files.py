"""The how-tos write their scenarios to files of their own: a reader who
follows several in one folder meets no ``exists already`` (``fanoutsim
example`` refuses to overwrite a file)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from clitools import cli

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import generate  # noqa: E402  (docs/generate.py: the how-tos' generated commands)

_EXAMPLE = re.compile(r"fanoutsim example (\S+) --out\s+(\S+\.toml)")


def _commands() -> dict[str, list[tuple[str, str]]]:
    """Each how-to's ``fanoutsim example NAME --out FILE``: typed in its page or generated for it."""
    found: dict[str, list[tuple[str, str]]] = {}
    for page in sorted((ROOT / "docs" / "howto").glob("*.md")):
        found[page.stem] = _EXAMPLE.findall(page.read_text())
    for name, sweep in generate.HOWTO_SWEEPS.items():
        found[name] += _EXAMPLE.findall("\n".join(generate._command_lines(sweep)))
    return {name: commands for name, commands in found.items() if commands}


def test_each_howto_writes_its_scenario_to_a_file_of_its_own(tmp_path):
    commands = _commands()
    assert {"poll-interval", "lease-length", "safety-poll"} <= set(commands)
    files = [file for found in commands.values() for file in {f for _, f in found}]
    assert len(files) == len(set(files)), commands  # no two how-tos share a file
    for name in ("poll-interval", "lease-length", "safety-poll"):
        assert {f for _, f in commands[name]} == {f"{name}.toml"}, commands[name]
    pages = "".join(p.read_text() for p in (ROOT / "docs" / "howto").glob("*.md"))
    assert "mine.toml" not in pages and "Run it in a folder of its own" not in pages
    for example, file in {c for found in commands.values() for c in found}:  # followed in one folder
        done = cli("example", example, "--out", file, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
