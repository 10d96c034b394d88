"""Progress for long command-line steps, on stderr, shown only once a step is slow.

``fanoutsim run`` on a long scenario (a virtual day of bench traffic) runs for
most of a minute: :func:`run_virtual` shows a bar of virtual time against the
run's end, and :func:`step` a timer for a step of unknown length (the checker),
each only if it lasts over ``delay`` seconds, so a quick run prints nothing.
The bar reads the clock from a side thread and never steps the simulation
itself: the run, its trace and its ids are those of a run without it.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
from collections.abc import Iterator

DELAY = 2.0  # seconds before anything is shown
TICK = 0.25  # seconds between reads of the clock


def _bar(**kwargs):
    from tqdm import tqdm

    size = shutil.get_terminal_size((80, 24))  # a terminal that says 0 x 0 (tqdm would draw nothing) gets 80 x 24
    return tqdm(
        file=sys.stderr,
        delay=DELAY,
        leave=False,
        ncols=min(size.columns or 80, 100),
        nrows=size.lines or 24,
        mininterval=TICK,
        **kwargs,
    )


def run_virtual(sim, until: float, *, enabled: bool = True) -> None:
    """``sim.run(until)``, with a bar of virtual seconds on stderr when it takes a while."""
    if not enabled:
        sim.run(until)
        return
    start = float(sim.now)
    total = max(0.0, float(until) - start)
    bar = _bar(
        total=round(total),
        unit="s",
        desc="virtual time",
        unit_scale=True,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} s [{elapsed}<{remaining}]",
    )
    done = threading.Event()

    def watch() -> None:
        shown = 0
        while not done.wait(TICK):
            now = min(round(float(sim.now) - start), round(total))
            if now > shown:
                bar.update(now - shown)
                shown = now

    watcher = threading.Thread(target=watch, name="fanoutsim-progress", daemon=True)
    watcher.start()
    try:
        sim.run(until)
    finally:
        done.set()
        watcher.join()
        bar.close()


@contextlib.contextmanager
def step(desc: str, *, enabled: bool = True) -> Iterator[None]:
    """A timer on stderr (``checking: 5s``) for a step that takes a while."""
    if not enabled:
        yield
        return
    bar = _bar(total=None, desc=desc, bar_format="{desc}: {elapsed}")
    done = threading.Event()

    def tick() -> None:
        while not done.wait(TICK):
            bar.update(1)  # a tick past the delay draws it; the count is not shown

    watcher = threading.Thread(target=tick, name="fanoutsim-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        bar.close()
