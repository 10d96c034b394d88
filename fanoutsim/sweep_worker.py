"""Where a sweep's worker processes start: the fork server's preload.

:func:`fanoutsim.sweep.sweep` runs its local workers from multiprocessing's
fork server and has the server import this module first. Every worker is then
a fork of a process that has fanoutsim, its built-in designs and pandas
imported already, so a sweep's workers start in milliseconds rather than
importing them again (about a second each, more where Python writes no
bytecode cache), and the next sweep of a notebook session starts as fast.

Last, the server freezes what it has imported (:func:`gc.freeze`): those
objects live as long as any worker, so the full collections a run triggers
need not scan them again. This is what CPython documents ``gc.freeze`` for,
in a process that forks workers.
"""

from __future__ import annotations

import gc
from importlib import import_module

import pandas  # noqa: F401  (imported for its workers)

import fanoutsim.sweep  # noqa: F401
from fanoutsim import designs

for _module in designs.BUILTIN.values():
    import_module(_module)

gc.collect()
gc.freeze()
