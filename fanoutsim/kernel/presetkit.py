"""What the designs' presets (a real system's defaults as a design's options) do the same way.

A design's ``presets`` module holds its records (each value with its source)
and the text of each preset's scenario file; looking a preset up by name, a
value written as TOML and the command that writes the scenario files into a
folder (``python -m fanoutsim.designs.<design>.presets DIR``) are here, once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from fanoutsim.kernel.dist import Dist

T = TypeVar("T")


def preset_named(presets: Mapping[str, T], name: str) -> T:
    """The preset called ``name`` (a key of ``presets``), or a ValueError naming them all."""
    if name not in presets:
        raise ValueError(f"preset must be one of {', '.join(map(repr, presets))}, got {name!r}")
    return presets[name]


def toml_value(value: Any) -> str:
    """A preset's value as TOML: a law as its inline table (an empirical one with
    its samples), a bool, a string, a tuple as an array, a number as Python writes it."""
    if isinstance(value, Dist):
        if value.law == "empirical":
            return '{ dist = "empirical", samples = [' + ", ".join(repr(x) for x in value.samples) + "] }"
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.as_table().items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return repr(value)


def write_scenarios(argv: list[str], design: str, names: Iterable[str], text: Callable[[str], str]) -> int:
    """``python -m fanoutsim.designs.<design>.presets DIR``: write each preset's
    scenario file, ``<design>-<name>.toml`` with ``text(name)``, into DIR; the
    command's exit status."""
    if len(argv) != 2 or not Path(argv[1]).is_dir():
        print(f"usage: python -m fanoutsim.designs.{design}.presets DIR  (an existing folder)", file=sys.stderr)
        return 2
    for name in names:
        path = Path(argv[1]) / f"{design}-{name}.toml"
        path.write_text(text(name), encoding="utf-8")
        print(f"wrote {path}")
    return 0


def scenario_head(
    *,
    design: str,
    name: str,
    title: str,
    costs_file: str,
    sources: Iterable[tuple[str, str]],
    measured: str,
    story: str,
    description: str,
    until: float,
) -> str:
    """The top of a preset's scenario file, down to its ``[run]`` table: what
    wrote it, each value's source (``sources``: (key, where it comes from)),
    ``measured`` (a line on the measured costs), ``story`` (what the run
    shows: comment lines, without the ``#``) and the command that runs it."""
    sources = list(sources)
    width = max(len(k) for k, _ in sources)
    lines = [
        f"# {design}-{name}: the {design} model with {title}.",
        "#",
        f"# Written by python -m fanoutsim.designs.{design}.presets (from presets.py and",
        f"# {costs_file}): edit those, not this file. What each number is:",
        *(f"#   {k:<{width}}  {why}" for k, why in sources),
        f"#   ({measured})",
        *(f"# {line}" for line in story.splitlines()),
        "#",
        f"#   fanoutsim run fanoutsim/examples/presets/{design}-{name}.toml",
        f'design = "{design}"',
        f'name = "{design}-{name}"',
        f'description = "{description}"',
        "",
        "[run]",
        "seed = 0",
        f"until = {until!r}",
        'store = "memory"',
    ]
    return "\n".join(lines) + "\n"
