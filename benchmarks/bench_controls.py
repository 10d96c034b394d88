"""How long the lessons' controls take to answer: CPU time in the lesson's own kernel.

For each lesson with a control, its notebook's cells run in a Jupyter kernel
(nbclient, as nbval runs them) up to the cell that builds the control; then
each widget of the control is moved (to the next option, or the other end of
a slider) and the kernel's CPU time for the move is taken: the callback, its
re-run if the control re-runs a simulation, and the redraw rendered to PNG, as a
reader's move costs. Each widget goes through every value it offers (a slider
to one end, the other, and back), the others staying where they are; a
widget's figure is the median of its moves. Not counted: the browser's
drawing and the message's trip.

    .venv/bin/python benchmarks/bench_controls.py             # every lesson with a control
    .venv/bin/python benchmarks/bench_controls.py 03 08       # some

Prints, per lesson, the slowest widget's median and the slowest single move. The issue that asked
for it found the controls answering in 80-270 ms and asked that this hold.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

# lesson -> the name its control is bound to (the cell that assigns it is the last one run)
CONTROLS = {
    "01_latency_budget": "explorer",
    "02_duplicate_deliveries": "control",
    "03_prune_and_ttl": "control",
    "06_poll_interval_sweep": "explorer",
    "08_outbox": "control",
    "10_leases": "explorer",
}

# Run in the kernel once the control exists: each widget moved through every value
# (a slider: to one end, the other, and back), each move timed.
_MOVE = """
import json as _json, time as _time
import ipywidgets as _w

def _widgets(c):
    c = getattr(c, "control", c)  # a lesson.needs_kernel box holds the control
    if isinstance(getattr(c, "controls", None), dict):  # a lesson.Explorer
        return dict(c.controls)
    return {k: v for k, v in vars(c).items()
            if isinstance(v, _w.ValueWidget) and not isinstance(v, (_w.HTML, _w.Output))}

def _move(w):
    if isinstance(w, _w.SelectMultiple):
        w.value = w.value[:-1] if len(w.value) > 1 else tuple(w.options)
    elif hasattr(w, "options"):
        w.index = (w.index + 1) % len(w.options)
    else:  # a slider: to the other end of its range
        w.value = w.max if w.value != w.max else w.min

_ms = {}
for _name, _wid in _widgets({name}).items():
    if getattr(_wid, "disabled", False):
        continue
    _times = []
    for _ in range(len(_wid.options) if hasattr(_wid, "options") else 3):  # every value once
        _t = _time.process_time()
        _move(_wid)
        _times.append(round((_time.process_time() - _t) * 1e3, 1))
    _ms[_name] = _times
print("MOVES " + _json.dumps(_ms))
"""


def lesson_cells(lesson: str, name: str) -> list[str]:
    """The lesson's code cells up to the one that binds ``name`` (its control)."""
    nb = json.loads((NOTEBOOKS / f"{lesson}.ipynb").read_text())
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        cells.append(source)
        if any(line.startswith(f"{name} = ") for line in source.splitlines()):
            return cells
    raise ValueError(f"{lesson}: no cell binds {name!r}")


def measure(lesson: str) -> dict[str, list[float]]:
    """Each widget of ``lesson``'s control: the kernel's CPU milliseconds to
    answer each of its moves."""
    import tempfile

    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    name = CONTROLS[lesson]
    cells = [nbformat.v4.new_code_cell(s) for s in lesson_cells(lesson, name)]
    cells.append(nbformat.v4.new_code_cell(_MOVE.replace("{name}", name)))
    nb = nbformat.v4.new_notebook(cells=cells)
    with tempfile.TemporaryDirectory(prefix="fanoutsim-kernel-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=f"{sockets}/kernel")  # as the lessons' tests
        try:
            NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
        finally:
            if km.has_kernel:  # (nbclient stops only a kernel it started itself)
                km.shutdown_kernel(now=True)
    for out in nb.cells[-1].outputs:
        text = out.get("text", "")
        for line in text.splitlines():
            if line.startswith("MOVES "):
                moves: dict[str, list[float]] = json.loads(line[len("MOVES ") :])
                return moves
    raise RuntimeError(f"{lesson}: the timing cell printed nothing: {nb.cells[-1].outputs}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lessons", nargs="*", help="lesson numbers or names (default: every one with a control)")
    args = ap.parse_args()
    chosen = [k for k in CONTROLS if not args.lessons or any(k.startswith(a) for a in args.lessons)]
    for lesson in chosen:
        moves = measure(lesson)
        print(summary(lesson, moves), flush=True)


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def summary(lesson: str, moves: dict[str, list[float]]) -> str:
    """A lesson's line: its slowest widget's median move, each widget's, and its slowest move."""
    widgets = ", ".join(f"{k} {median(v):g}" for k, v in moves.items())
    return f"{lesson}: slowest widget {answer(moves):g} ms ({widgets}); slowest move {slowest_move(moves):g} ms"


def slowest_move(moves: dict[str, list[float]]) -> float:
    """A control's slowest single move, ms."""
    return max(x for v in moves.values() for x in v)


def answer(moves: dict[str, list[float]]) -> float:
    """A control's figure: its slowest widget's median move, ms."""
    return max(median(v) for v in moves.values())


if __name__ == "__main__":
    main()
