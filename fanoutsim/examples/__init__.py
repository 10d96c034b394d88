"""The scenario files that ship inside the package, one per thing worth seeing.

They are package data, so an installed fanoutsim (a wheel, ``pip install`` from
a git URL) has them too: ``fanoutsim example`` lists them, ``fanoutsim example
NAME --out FILE`` writes one where you can edit it, and :func:`path` gives the
file itself to :func:`fanoutsim.load_scenario` or :func:`fanoutsim.sweep`.

>>> from fanoutsim import examples, load_scenario
>>> sorted(examples.names())[:3]
['bench-day', 'crashes', 'default']
>>> load_scenario(examples.path("outbox")).design
'outbox'

A scenario that replays a recording (``quotes-day``) names it relative to
itself; :func:`write` copies the recording beside the file it writes.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

__all__ = ["names", "path", "summary", "replays", "write", "FOLDER"]

#: The folder of the shipped scenarios and recordings (the package's ``examples``).
FOLDER = Path(__file__).resolve().parent


def names() -> list[str]:
    """The shipped scenarios' names, sorted (``default``, ``outbox``, ``leases``, ...)."""
    return sorted(p.stem for p in FOLDER.glob("*.toml"))


def path(name: str) -> Path:
    """The file of the shipped scenario ``name``; a ValueError names the ones there are."""
    if not isinstance(name, str) or name not in names():
        raise ValueError(f"no example scenario named {name!r}; examples: {', '.join(names())}")
    return FOLDER / f"{name}.toml"


def summary(name: str) -> dict[str, str]:
    """``{"name", "design", "description"}`` of the shipped scenario ``name``."""
    data = tomllib.loads(path(name).read_text(encoding="utf-8"))
    return {"name": name, "design": str(data.get("design", "reactor")), "description": str(data.get("description", ""))}


def replays(name: str) -> list[str]:
    """The recordings the scenario ``name`` replays, as it names them (relative to its file)."""
    data = tomllib.loads(path(name).read_text(encoding="utf-8"))
    return [w["replay"] for w in data.get("workload", []) if isinstance(w, dict) and isinstance(w.get("replay"), str)]


def write(name: str, out: str | os.PathLike) -> list[Path]:
    """Write the shipped scenario ``name`` to ``out`` (a new file) and each
    recording it replays beside it; returns the paths written.

    An existing ``out`` (or recording) is refused, naming it, before anything
    is written: an example never overwrites your edits."""
    source = path(name)
    written_as = os.fspath(out)
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"{out} is a folder: give the file to write, e.g. {out / source.name}")
    if written_as.endswith(("/", os.sep)):  # Path drops the slash, which names a folder: not a file to write
        raise ValueError(
            f"{written_as} names a folder (it ends in /), and there is none: give the file to write, in a "
            f"folder that exists (e.g. mkdir {out}, then --out {out / source.name})"
        )
    targets = [(source, out)] + [(FOLDER / r, out.parent / r) for r in replays(name)]
    taken = [str(t) for _, t in targets if t.exists()]
    if taken:
        raise ValueError(f"{taken[0]} exists already; give another --out or remove it first")
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {out}: no folder {out.parent}")
    written: list[Path] = []
    try:
        for src, target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
            written.append(target)
    except BaseException:  # nothing half-written: what was copied goes again
        for done in written:
            done.unlink(missing_ok=True)
        raise
    return written
