"""Every dotted name the documentation gives a reader (``fanoutsim.x.y`` in a code
span of the README, the docs or a lesson's source) works as written after
``import fanoutsim``: by attribute, importing a submodule where Python would.
A module a package rebinds to a function of the same name (``fanoutsim.sweep``)
hides its other members from such a name, so they must be named as imports."""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import pytest

import fanoutsim

ROOT = Path(__file__).resolve().parents[1]
_NAME = re.compile(r"`[^`\n]*?\b(fanoutsim(?:\.[A-Za-z_]\w*)+)")


def resolves(name: str) -> bool:
    """Whether ``name`` reaches an object from the package, as a reader's code would."""
    obj: object = fanoutsim
    for part in name.split(".")[1:]:
        if not hasattr(obj, part) and isinstance(obj, types.ModuleType):
            try:
                importlib.import_module(f"{obj.__name__}.{part}")  # `import a.b` binds b on a
            except ImportError:
                return False
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _sources() -> list[Path]:
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if not {"_build", "_generated"} & set(p.parts)]
    return [ROOT / "README.md", *docs, *sorted((ROOT / "notebooks" / "src").glob("*.py"))]


def test_every_dotted_name_in_the_docs_works_after_import_fanoutsim():
    broken = {
        f"{path.relative_to(ROOT)}: {m.group(1)}"
        for path in _sources()
        for m in _NAME.finditer(path.read_text())
        if not resolves(m.group(1))
    }
    assert not broken, sorted(broken)


@pytest.mark.parametrize(
    ("name", "works"),
    [
        ("fanoutsim.sweep", True),
        ("fanoutsim.designs.reactor.analysis", True),
        ("fanoutsim.sweep.recommend", False),  # fanoutsim.sweep is the function
        ("fanoutsim.no_such_thing", False),
    ],
)
def test_a_name_is_resolved_as_a_reader_would(name, works):
    assert resolves(name) is works
