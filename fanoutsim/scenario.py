"""Scenario files of every design: ``load_scenario(path)`` reads a TOML file and
returns the scenario of the design it names (``design = "reactor" | "outbox" |
"leases"``; no ``design`` key: the reactor).

The frame every file shares (``design``, ``name``, ``description``, ``[run]``,
``[[faults]]``) is :mod:`fanoutsim.kernel.scenario`; each design declares the
rest of its files once, as the ``scenario_schema`` of its
:class:`~fanoutsim.kernel.design.Design` (the file format's docs are its
scenario module: :mod:`fanoutsim.designs.reactor.scenario`,
:mod:`fanoutsim.designs.outbox.scenario`, :mod:`fanoutsim.designs.leases.scenario`).
This module reads the ``design`` key, finds the design in the registry
(:mod:`fanoutsim.designs`) and hands the document to its ``parse_scenario``;
no design's parser knows another's.

A mistyped ``design`` is reported, and the rest of the file is then checked as
the design whose tables it has (most of them; the first registered design on a
tie), so every problem shows at once. A table of another design is reported
with the design it belongs to (``[outbox]`` in a reactor file: set design =
'outbox' to use it).

:func:`json_schema` gives a design's schema as JSON Schema, for an editor's
completion and checks of TOML files; ``data/schemas/<design>.schema.json`` are
those files, written by :func:`write_schemas` (``python data/make_schemas.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fanoutsim import designs
from fanoutsim.kernel.scenario import ScenarioError, hint_other_designs, read_scenario_file
from fanoutsim.kernel.validate import kind, show

__all__ = [
    "ScenarioError",
    "load_scenario",
    "parse_scenario",
    "which_design",
    "json_schema",
    "json_schema_text",
    "write_schemas",
    "DEFAULT_DESIGN",
]

#: The design of a scenario file without a ``design`` key.
DEFAULT_DESIGN = "reactor"  # the design of a file without a ``design`` key


def load_scenario(path: str | os.PathLike, *, design: str | None = None):
    """Read and check a scenario file; raises :class:`ScenarioError`.

    Returns the scenario of the design the file names (a
    :class:`~fanoutsim.designs.reactor.scenario.Scenario`, an
    :class:`~fanoutsim.designs.outbox.scenario.OutboxScenario`, a
    :class:`~fanoutsim.designs.leases.scenario.LeaseScenario`, ...).
    ``design``: the design the caller needs; a file of another design is
    refused with an error naming its ``design`` key."""
    source = os.fspath(path)
    data = read_scenario_file(source)
    return parse_scenario(data, source=source, default_name=Path(source).stem, design=design)


def parse_scenario(
    data: dict, *, source: str = "<scenario>", default_name: str = "scenario", design: str | None = None
):
    """Check an already-parsed TOML document (a dict) and make the scenario of
    the design it names (see :func:`load_scenario`)."""
    if design is not None and design not in designs.names():
        raise ValueError(f"no design named {design!r}; designs: {', '.join(map(repr, designs.names()))}")
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", f"a scenario must be a TOML document (table), got {kind(data)}")])
    name, problems = which_design(data)
    if design is not None and not problems and name != design:
        raise ScenarioError(
            source,
            [
                (
                    "design",
                    (
                        f"this needs a scenario of the {design} design (design = {design!r}); "
                        f"the file describes the {name} design (design = {name!r})"
                    ),
                )
            ],
        )
    chosen = designs.get(name)
    # a mistyped design key is reported here; the design's parser reads the rest
    document = {k: v for k, v in data.items() if k != "design"} if problems else data
    try:
        scenario = chosen.parse_scenario(document, source=source, default_name=default_name)
    except ScenarioError as exc:
        raise ScenarioError(
            source, problems + hint_other_designs(exc.problems, data, _keys(chosen), _owners(exclude=name))
        ) from None
    if problems:
        raise ScenarioError(source, problems)
    return scenario


def which_design(data: dict) -> tuple[str, list[tuple[str, str]]]:
    """The design a document names, and ``[]``; for a bad ``design`` the design
    its tables suggest, and the problem."""
    if "design" not in data:
        return DEFAULT_DESIGN, []
    value = data["design"]
    names = designs.names()
    if isinstance(value, str) and value in names:
        return value, []
    score = {n: sum(k in data for k in _tables(n)) for n in names}
    best = max(score.values(), default=0)
    guess = (
        DEFAULT_DESIGN if best == 0 or score.get(DEFAULT_DESIGN) == best else next(n for n in names if score[n] == best)
    )
    return guess, [
        (
            "design",
            f"must be one of {', '.join(map(repr, names))}, got {show(value)} "
            f"(the rest of the file is checked as the {guess} design)",
        )
    ]


def _schema(name: str):
    return getattr(designs.get(name), "scenario_schema", None)


def _tables(name: str) -> tuple[str, ...]:
    schema = _schema(name)
    return schema.tables() if schema is not None else ()


def _keys(design) -> tuple[str, ...]:
    schema = getattr(design, "scenario_schema", None)
    return schema.keys() if schema is not None else ()


def _owners(exclude: str) -> dict[str, str]:
    """Each top-level table of the designs other than ``exclude``: the first design that has it."""
    owners: dict[str, str] = {}
    for name in designs.names():
        if name != exclude:
            for table in _tables(name):
                owners.setdefault(table, name)
    return owners


# -- JSON Schema ---------------------------------------------------------------------
def json_schema(design: str) -> dict:
    """The JSON Schema (draft 7) of a design's scenario files, from the same
    declaration that checks them: keys, what each allows, defaults and docs."""
    schema = _schema(design)
    if schema is None:
        raise ValueError(f"the {design} design declares no scenario schema")
    return schema.json_schema()


def json_schema_text(design: str) -> str:
    """:func:`json_schema` as the text of ``data/schemas/<design>.schema.json``."""
    return json.dumps(json_schema(design), indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: str | os.PathLike) -> list[Path]:
    """Write ``<design>.schema.json`` of every registered design into ``folder``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in designs.names():
        if _schema(name) is not None:
            path = out / f"{name}.schema.json"
            path.write_text(json_schema_text(name), encoding="utf-8")
            paths.append(path)
    return paths
