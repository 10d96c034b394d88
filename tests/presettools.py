"""What the presets' tests check of a preset's scenario file, written once."""

from __future__ import annotations

import tomllib
from pathlib import Path

import jsonschema

from fanoutsim.scenario import json_schema, load_scenario

ROOT = Path(__file__).resolve().parents[1]


def generated_scenario(path: Path, text: str, design: str):
    """The scenario of a preset's file ``path``, after checking that it is the
    generated ``text`` (else: the command that writes it again) and that the
    design's JSON Schema takes it."""
    assert path.read_text(encoding="utf-8") == text, (
        f"{path} is out of date: run python -m fanoutsim.designs.{design}.presets {path.parent.relative_to(ROOT)}"
    )
    jsonschema.Draft7Validator(json_schema(design)).validate(tomllib.loads(text))
    return load_scenario(path)
