"""Build the notebooks from their sources and execute them in place.

Each notebook is written as a percent-format script in ``notebooks/src/``
(``# %%`` starts a code cell, ``# %% [markdown]`` a prose cell whose lines
start with ``# ``), which keeps diffs readable. This script turns each into
``notebooks/NN_name.ipynb`` and executes it, so the committed notebook carries
the outputs that nbval compares in ``make test``.

A code cell's marker may carry words that become cell tags and metadata:

* ``# %% ignore-output``: nbval does not compare its output (the tag
  ``nbval-ignore-output``; a wall-clock run, a progress bar);
* ``# %% skip``: nbval does not run it (``nbval-skip``);
* ``# %% solution``: an exercise's solution, collapsed (its source and output
  hidden until the reader opens them) and tagged ``solution``. Its first line,
  all JupyterLab shows of a collapsed cell, is the label
  ``# Solution (open after trying)`` (the build writes it: no source carries
  it); the site folds it under one toggle of the same words (myst-nb's
  ``hide-cell`` tag and its ``code_prompt_show``);
* ``# %% hidden``: the source collapsed, the output shown (a take-away
  written from the run's numbers).

A learner sees tags only in the property inspector, never as a comment in the
code. After the run, every control's note (:func:`fanoutsim.lesson.needs_kernel`)
is saved in its words for a reader without a running kernel, every control's
output carries a still of the figure it shows (for a viewer that draws no
widgets: the documentation site without JavaScript, a notebook viewer), and the time
Run All took — the cells' run, without the kernel's start — is written to
``run_all_seconds.json`` (the index quotes it).

    .venv/bin/python notebooks/build.py            # every notebook
    .venv/bin/python notebooks/build.py 00_tour    # one
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from fanoutsim.kernel.plotting import stack_pngs

HERE = Path(__file__).resolve().parent
TIMES = HERE / "run_all_seconds.json"
# what JupyterLab writes for the ipykernel kernel: any other display name marks
# the notebook modified the moment it is opened, and autosave rewrites it
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
SOLUTION = "Solution (open after trying)"
MARKERS = {
    "ignore-output": {"tags": ["nbval-ignore-output"]},
    "skip": {"tags": ["nbval-skip"]},
    "solution": {
        "tags": ["solution", "hide-cell"],
        "jupyter": {"source_hidden": True, "outputs_hidden": True},
        "mystnb": {"code_prompt_show": SOLUTION, "code_prompt_hide": "Hide the solution"},
    },
    "hidden": {"jupyter": {"source_hidden": True}},
}
# the first line of every solution cell: what a learner reads of it, collapsed
SOLUTION_LABEL = f"# {SOLUTION}"
# the class and the attribute fanoutsim.lesson.needs_kernel gives a control's note
NOTE_CLASS, OFFLINE = "fanoutsim-kernel-note", "placeholder"
VIEW = "application/vnd.jupyter.widget-view+json"


def marker_metadata(line: str) -> dict:
    """The cell metadata of a ``# %% word ...`` line (see the module's docstring)."""
    words = line.removeprefix("# %%").split()
    unknown = [w for w in words if w not in MARKERS]
    if unknown:
        raise ValueError(f"unknown cell marker {unknown[0]!r} in {line!r}; allowed: {', '.join(MARKERS)}")
    meta: dict = {}
    for word in words:
        for key, value in MARKERS[word].items():
            if key == "tags":
                meta.setdefault("tags", []).extend(value)
            else:
                meta.setdefault(key, {}).update(value)
    return meta


def cells_of(source: str) -> list:
    cells, kind, meta, lines = [], None, {}, []

    def flush():
        text = "\n".join(lines).strip("\n")
        if kind == "markdown":
            text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in text.splitlines())
            cells.append(nbformat.v4.new_markdown_cell(text))
        elif kind == "code" and text.strip():
            if "solution" in meta.get("tags", []):
                text = f"{SOLUTION_LABEL}\n{text}"
            cells.append(nbformat.v4.new_code_cell(text, metadata=meta))

    for line in source.splitlines():
        if line.startswith("# %%"):
            flush()
            lines = []
            if "[markdown]" in line:
                kind, meta = "markdown", {}
            else:
                kind, meta = "code", marker_metadata(line)
        else:
            lines.append(line)
    flush()
    return cells


def widget_state(nb) -> dict:
    """The saved widget models of ``nb``, by model id (empty if it saved none)."""
    return nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})


def offline_notes(nb) -> int:
    """Give every control's note, in the saved widget state, its words for a
    reader whose kernel has not run the cell (a saved control does not move):
    the note's ``placeholder``. The number of notes changed."""
    changed = 0
    for model in widget_state(nb).values():
        s = model.get("state", {})
        if NOTE_CLASS in s.get("_dom_classes", ()) and s.get(OFFLINE):
            s["value"] = s[OFFLINE]
            changed += 1
    return changed


def control_stills(nb) -> int:
    """Give every saved control's output a still: the figures its saved state
    shows (its Output widgets' PNGs, top to bottom, as one PNG) as the output's
    ``image/png``, beside the widget view. A viewer that draws widgets (JupyterLab,
    the site with its widget JavaScript) prefers the view; one that draws none (the
    site without JavaScript, a plain notebook viewer) shows the control's default
    figure rather than nothing. The number of outputs given a still."""
    state = widget_state(nb)
    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            view = output.get("data", {}).get(VIEW)
            figures = list(_figures(state, view["model_id"])) if view else []
            if figures:
                output["data"]["image/png"] = stack_pngs(figures)
                changed += 1
    return changed


def unshown_widgets(nb) -> int:
    """Drop the saved widget models no output shows (a progress bar whose cell
    cleared it, say): kept, they would carry a run's wall-clock rates into the
    saved lesson. A model is shown when an output's view names it, or a shown
    model refers to it (``IPY_MODEL_<id>``: a child, a layout, a style). The
    number dropped."""
    state = widget_state(nb)
    shown: set[str] = set()
    todo = [
        output["data"][VIEW]["model_id"]
        for cell in nb.cells
        for output in cell.get("outputs", ())
        if VIEW in output.get("data", {})
    ]
    while todo:
        model_id = todo.pop()
        if model_id not in shown and model_id in state:
            shown.add(model_id)
            todo += re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state[model_id]))
    gone = [m for m in state if m not in shown]
    for model_id in gone:
        del state[model_id]
    return len(gone)


def _figures(state: dict, model_id: str):
    """The PNGs (base64) the widget ``model_id`` shows, its children's in order."""
    model = state.get(model_id, {}).get("state", {})
    for shown in model.get("outputs", ()):  # an Output widget's content
        png = shown.get("data", {}).get("image/png")
        if png:
            yield png
    for child in model.get("children", ()):
        yield from _figures(state, child.removeprefix("IPY_MODEL_"))


def run_all_seconds(nb) -> float:
    """How long the cells ran, from the first one's start to the last one's end
    (the timings nbclient records in each cell): Run All in a kernel that is
    already up, as a reader's is."""
    from datetime import datetime

    stamps = [c.metadata.get("execution", {}) for c in nb.cells if c.cell_type == "code"]
    starts = [s["iopub.execute_input"] for s in stamps if "iopub.execute_input" in s]
    ends = [s["shell.execute_reply"] for s in stamps if "shell.execute_reply" in s]
    if not starts or not ends:
        return 0.0
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(max(ends)) - parse(min(starts))).total_seconds()


def cell_id(stem: str, index: int) -> str:
    """A cell's id, the same at every build (nbformat draws a random one: every
    rebuild would rewrite every id, and a diff would hide what changed)."""
    return hashlib.sha1(f"{stem}:{index}".encode()).hexdigest()[:8]


def build(src: Path) -> tuple[Path, float]:
    """Build and execute one notebook; its path, and how long Run All took."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.cells = cells_of(src.read_text())
    for i, cell in enumerate(nb.cells):
        cell.id = cell_id(src.stem, i)
    out = HERE / f"{src.stem}.ipynb"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    offline_notes(nb)
    control_stills(nb)
    unshown_widgets(nb)
    nbformat.write(nb, out)
    return out, run_all_seconds(nb)


def record_time(stem: str, seconds: float) -> None:
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    times[stem] = round(seconds, 1)
    sources = {p.stem for p in (HERE / "src").glob("*.py")}
    times = {k: v for k, v in times.items() if k in sources}  # a renamed lesson leaves no stale time
    TIMES.write_text(json.dumps(dict(sorted(times.items())), indent=1) + "\n")


def quote(seconds: float) -> str:
    """How the lessons quote a Run All time: whole seconds under a minute, else
    minutes to the half."""
    if seconds < 59.5:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 30) / 2:g} min"


# a lesson's row of the index's table (in 00_index and on the site's lesson page), and its own quote
ROW = re.compile(r"^(# )?(\| \[(\d\d_\w+)\]\((?:notebooks/)?\3\.ipynb\) \| .+? \| )about [\d.]+ (?:s|min)( \|)$", re.M)
OWN = re.compile(r"^((?:# )?\*\*Run All:\*\* )about [\d.]+ (?:s|min)", re.M)


def quote_times(stems) -> None:
    """Write the measured Run All time of each of ``stems`` where it is quoted:
    its row of the index (and of the site's lesson page) and its own first cell,
    in the sources and in the built notebooks (prose only: nothing is executed
    again). A quote written by hand would drift from what the build measured."""
    times = json.loads(TIMES.read_text())
    said = {stem: quote(times[stem]) for stem in stems if stem != "00_index" and stem in times}

    def row(m: re.Match) -> str:
        stem = m.group(3)
        return f"{m.group(1) or ''}{m.group(2)}{said[stem]}{m.group(4)}" if stem in said else m.group(0)

    _rewrite(HERE / "src" / "00_index.py", HERE / "00_index.ipynb", ROW, row)
    site = HERE.parent / "docs" / "lessons" / "index.md"  # the site's copy of the index's table
    site.write_text(ROW.sub(row, site.read_text()))
    for stem, text in said.items():
        _rewrite(HERE / "src" / f"{stem}.py", HERE / f"{stem}.ipynb", OWN, rf"\g<1>{text}", first=True)


def _rewrite(src: Path, built: Path, pattern: re.Pattern, repl, first: bool = False) -> None:
    src.write_text(pattern.sub(repl, src.read_text(), count=1 if first else 0))
    if built.exists():
        nb = nbformat.read(built, as_version=4)
        for cell in (c for c in nb.cells if c.cell_type == "markdown"):
            cell.source = pattern.sub(repl, cell.source)
        nbformat.write(nb, built)


def main(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return
    sources = sorted((HERE / "src").glob("*.py"))
    unknown = sorted(set(argv) - {s.stem for s in sources})
    if unknown:
        raise SystemExit(
            f"no notebook source {', '.join(unknown)} in notebooks/src/; the notebooks: "
            f"{', '.join(s.stem for s in sources)}"
        )
    if argv:
        sources = [s for s in sources if s.stem in argv]
    for src in sources:
        started = time.monotonic()
        out, run_all = build(src)
        record_time(src.stem, run_all)
        print(f"built {out.relative_to(HERE.parent)} in {time.monotonic() - started:.0f} s (Run All {run_all:.1f} s)")
    quote_times([src.stem for src in sources])


if __name__ == "__main__":
    main(sys.argv[1:])
