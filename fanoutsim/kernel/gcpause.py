"""Pausing Python's cyclic garbage collector around a bounded burst of work.

A checker or a sweep row reads a finished run: it allocates tens of
thousands of lists, tuples and frames, and drops them when it returns. Each
allocation counts towards the collector's thresholds, and past them CPython
runs a full collection that walks every container the process holds — the
run's rows and its trace included — over and over while the burst lasts
(about a quarter of a one-hour sweep run's check and row, measured). What such
a burst leaves as cyclic garbage is small, and is collected once the
collector runs again after it.

Not for a simulation's run itself: a run may last a virtual week, and what
cycles it makes must be collected as it goes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic collection off inside the block; as it was after it
    (nested blocks, and a collector already off, are left as they were)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
