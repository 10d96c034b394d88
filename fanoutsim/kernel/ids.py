"""Seeded identifiers: the same seed gives the same UUIDs, run after run.

``uuid4()`` reads the operating system's entropy, which would make two runs of
one scenario differ in every id. A run owns one :class:`IdSource`; it outlives
crashes of the engine (ids are drawn by the process that writes the row, and a
restarted process keeps drawing from the same seeded stream).
"""

from __future__ import annotations

import os
import random


class IdSource:
    def __init__(self, seed: int, stream: str = "ids") -> None:
        self._rng = random.Random(f"fanoutsim:{stream}:{seed}")

    def new(self) -> str:
        """A version-4 UUID string drawn from the seeded stream: what
        ``str(uuid.UUID(int=bits, version=4))`` gives, formatted directly
        (every row the engine writes draws one)."""
        h = "%032x" % ((self._rng.getrandbits(128) & _CLEAR) | _V4)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# uuid.UUID(version=4): the variant bits (RFC 4122) and the version nibble
_CLEAR = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_V4 = (0x8000 << 48) | (4 << 76)


class FreshIdSource(IdSource):
    """Ids for a wall-clock run: a stream seeded from the operating system's
    entropy, so two runs — two processes, two database files — never draw the
    same ids. Wall time is not reproducible anyway; seeded ids belong to the
    virtual clock, where they make a run repeatable."""

    def __init__(self) -> None:
        self._rng = random.Random(int.from_bytes(os.urandom(32), "big"))
