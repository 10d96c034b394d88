"""Build the notebooks from their sources and execute them in place.

Each notebook is written as a percent-format script in ``notebooks/src/``
(``# %%`` starts a code cell, ``# %% [markdown]`` a prose cell whose lines
start with ``# ``), which keeps diffs readable. This script turns each into
``notebooks/NN_name.ipynb`` and executes it, so the committed notebook carries
the outputs that nbval compares in ``make test``.

    .venv/bin/python notebooks/build.py            # every notebook
    .venv/bin/python notebooks/build.py 00_tour    # one
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
# what JupyterLab writes for the ipykernel kernel: any other display name marks
# the notebook modified the moment it is opened, and autosave rewrites it
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def cells_of(source: str) -> list:
    cells, kind, lines = [], None, []

    def flush():
        text = "\n".join(lines).strip("\n")
        if kind == "markdown":
            text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in text.splitlines())
            cells.append(nbformat.v4.new_markdown_cell(text))
        elif kind == "code" and text.strip():
            cells.append(nbformat.v4.new_code_cell(text))

    for line in source.splitlines():
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        else:
            lines.append(line)
    flush()
    return cells


def build(src: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.cells = cells_of(src.read_text())
    out = HERE / f"{src.stem}.ipynb"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(nb, out)
    return out


def main(argv: list[str]) -> None:
    sources = sorted((HERE / "src").glob("*.py"))
    if argv:
        sources = [s for s in sources if s.stem in argv]
    for src in sources:
        started = time.monotonic()
        out = build(src)
        print(f"built {out.relative_to(HERE.parent)} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
