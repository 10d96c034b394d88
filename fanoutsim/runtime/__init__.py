"""Runtimes decide *when* the engine's steps run; the engine decides *what* they do.

:mod:`.simulation` drives the engine from a SimPy virtual clock: a day passes
in seconds and every run is reproducible from its seed. :mod:`.realtime`
drives the same engine from the wall clock, with threads, over a DuckDB file.
:mod:`.host` is what both share.
"""
from .realtime import Realtime
from .simulation import Simulation

__all__ = ["Simulation", "Realtime"]
