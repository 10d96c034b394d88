"""Seeded identifiers: the same seed gives the same UUIDs, run after run.

``uuid4()`` reads the operating system's entropy, which would make two runs of
one scenario differ in every id. A run owns one :class:`IdSource`; it outlives
crashes of the engine (ids are drawn by the process that writes the row, and a
restarted process keeps drawing from the same seeded stream).
"""
from __future__ import annotations

import os
import random
import uuid


class IdSource:
    def __init__(self, seed: int, stream: str = "ids") -> None:
        self._rng = random.Random(f"fanoutsim:{stream}:{seed}")

    def new(self) -> str:
        """A version-4 UUID string drawn from the seeded stream."""
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))


class FreshIdSource(IdSource):
    """Ids for a wall-clock run: a stream seeded from the operating system's
    entropy, so two runs — two processes, two database files — never draw the
    same ids. Wall time is not reproducible anyway; seeded ids belong to the
    virtual clock, where they make a run repeatable."""

    def __init__(self) -> None:
        self._rng = random.Random(int.from_bytes(os.urandom(32), "big"))
