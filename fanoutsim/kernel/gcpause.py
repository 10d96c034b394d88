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
cycles it makes must be collected as it goes. A run does leave out what
existed before it (:func:`run_frozen`): the collector's full passes walked
the imports and the set-up, some 90,000 containers, each time, and the run
added only a few hundred (measured on bench-day: 7.8 % of a 12-hour run's
CPU in the collector, 3.3 % with them left out).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_frozen_lock = threading.Lock()
_frozen_depth = 0  # run_frozen blocks open, in any thread: the outermost freezes and unfreezes


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


@contextmanager
def run_frozen() -> Iterator[None]:
    """Inside the block, the objects that existed before it are left out of the
    collector's passes (:func:`gc.freeze`); after it they are collected as
    before (:func:`gc.unfreeze`). What the block makes is collected as it
    goes. Nothing is done where the collector is off or something else froze
    objects already (a process that froze its imports before forking keeps
    them frozen)."""
    global _frozen_depth
    with _frozen_lock:
        outer = _frozen_depth == 0
        freeze = outer and gc.isenabled() and gc.get_freeze_count() == 0
        _frozen_depth += 1
        if freeze:
            gc.freeze()
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen_depth -= 1
            if freeze:
                gc.unfreeze()
