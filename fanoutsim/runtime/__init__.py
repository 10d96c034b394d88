"""Runtimes decide *when* the engine's steps run; the engine decides *what* they do.

:mod:`.simulation` drives the engine from a SimPy virtual clock: a day passes
in seconds and every run is reproducible from its seed.
"""
from .simulation import Simulation

__all__ = ["Simulation"]
