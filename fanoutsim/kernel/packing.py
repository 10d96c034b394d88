"""Packing what a long run keeps but seldom reads: values pickled, then compressed.

A day's run keeps millions of values no step reads again — the trace's events,
the writers' history, a finished row's context — and each held as a Python
object costs its header and a reference in a list that the cyclic collector
walks on every full collection. Packed, a chunk of them is one bytes object: a
tenth of the memory, and nothing for the collector to walk. A reader gets
them back, as new lists, in order. :class:`HashedStrs` keeps which strs a
set holds as their hashes, for a primary key over such rows.
"""

from __future__ import annotations

import functools
import io
import pickle
import threading
import zlib
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any


@functools.cache
def _codec() -> Any:
    """zstd, as pyarrow (a dependency) bundles it, at its fastest level; None
    where a build of pyarrow lacks it (then zlib)."""
    import pyarrow as pa

    return pa.Codec("zstd", compression_level=1) if pa.Codec.is_available("zstd") else None


class Packed:
    """Columns (lists of one length) packed into one bytes object: pickled, then
    compressed. A day's trace events take about 11 bytes each this way, where
    the lists' references (and the ints of their times) took about 75."""

    __slots__ = ("rows", "size", "blob")

    def __init__(self, cols: tuple[list[Any], ...]) -> None:
        self.rows = len(cols[0])
        codec = _codec()
        with _pickled(cols) as raw:
            self.size = len(raw)
            self.blob: bytes = zlib.compress(raw, 1) if codec is None else codec.compress(raw, asbytes=True)

    def columns(self) -> tuple[list[Any], ...]:
        """The columns packed: the same values, in new lists."""
        codec = _codec()
        raw = (
            zlib.decompress(self.blob)
            if codec is None
            else codec.decompress(self.blob, decompressed_size=self.size, asbytes=True)
        )
        cols: tuple[list[Any], ...] = pickle.loads(raw)
        return cols


# Each thread pickles into a buffer of its own, kept for its next pack: a
# pickle made anew each time (a megabyte, for a pack of trace events) is a
# block glibc's malloc serves from its heap once a freed one has raised its
# mmap threshold, and the long-lived blocks allocated around it then keep
# the freed space from going back: a tenth of a long run's memory, measured.
_buffers = threading.local()


@contextmanager
def _pickled(value: object) -> Iterator[memoryview]:
    """``value`` pickled, as a view of this thread's buffer (valid inside the block)."""
    buf: io.BytesIO | None = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = io.BytesIO()
    buf.seek(0)  # no truncate: shrinking would free the buffer
    pickle.dump(value, buf, protocol=pickle.HIGHEST_PROTOCOL)
    view = buf.getbuffer()
    try:
        with view[: buf.tell()] as raw:
            yield raw
    finally:
        view.release()


class Kept:
    """Columns with a value pickle cannot take (a lock, a lambda, an object of
    a class defined in a function): kept as their lists, in a pack's place."""

    __slots__ = ("rows", "cols")

    def __init__(self, cols: tuple[list[Any], ...]) -> None:
        self.rows, self.cols = len(cols[0]), cols

    def columns(self) -> tuple[list[Any], ...]:
        return self.cols


def joined(packs: list[Packed | Kept], cols: tuple[list[Any], ...]) -> tuple[list[Any], ...]:
    """The packs' columns, then ``cols``: ``cols`` themselves when nothing is
    packed, else new lists."""
    if not packs:
        return cols
    out: tuple[list[Any], ...] = tuple([] for _ in cols)
    for packed in packs:
        for col, values in zip(out, packed.columns()):
            col += values
    for col, values in zip(out, cols):
        col += values
    return out


def pack(cols: tuple[list[Any], ...]) -> Packed | Kept:
    """``cols`` packed, or kept as they are where pickle refuses a value
    (tried once: the caller packs the next values afresh)."""
    try:
        return Packed(cols)
    except (pickle.PicklingError, TypeError, AttributeError):
        return Kept(cols)


_EMPTY, _GONE = 0, 1  # a free slot, and one whose hash was removed (a probe goes on past it)
_PARTS = 256  # the tables a hash's top byte chooses among


class HashedStrs:
    """Which strs a set holds, kept as their hashes: one int64 slot each in
    arrays a quarter to a half full (open addressing, linear probing), where a
    dict of a million UUID strs took about 120 bytes an id, the str included.
    A hash's top byte chooses one of 256 tables, and each grows on its own: a
    growth copies a 256th of the set, where one table's would copy all of it
    beside its new array of twice the size (the peak of a long run).

    A hash says only *maybe*: :meth:`might_hold` is True for every str added
    (and not removed), and for another whose hash is the same; the caller's
    exact test decides then. Two strs of one hash take a slot each, so that
    removing one leaves the other. Python's hash of a str differs between
    processes: a set built in one means nothing in another (a store is never
    pickled: it holds a lock)."""

    __slots__ = ("tables", "held", "filled")

    def __init__(self, size: int = 16) -> None:
        self.tables = [array("q", [_EMPTY]) * size for _ in range(_PARTS)]  # size: a power of two
        self.held = [0] * _PARTS  # hashes each table holds
        self.filled = [0] * _PARTS  # slots not free in each: hashes held, and removed ones

    def __len__(self) -> int:
        return sum(self.held)

    @staticmethod
    def _hash(s: str) -> int:
        h = hash(s)
        return h + 2 if h == _EMPTY or h == _GONE else h  # the two marks: such a hash is kept moved

    def add(self, s: str) -> None:
        """Hold ``s`` (once more, if its hash is held already)."""
        h = self._hash(s)
        k = (h >> 56) & 0xFF
        slots = self.tables[k]
        if 2 * (self.filled[k] + 1) > len(slots):
            slots = self._grow(k)
        mask = len(slots) - 1
        i = h & mask
        while slots[i] != _EMPTY:
            i = (i + 1) & mask
        slots[i] = h
        self.held[k] += 1
        self.filled[k] += 1

    def update(self, strs: Iterable[str]) -> None:
        """:meth:`add` each of ``strs``."""
        for s in strs:
            self.add(s)

    def _find(self, h: int) -> tuple[array[int], int]:
        """The table of ``h`` and the index of its first slot (-1: none)."""
        slots = self.tables[(h >> 56) & 0xFF]
        mask = len(slots) - 1
        i = h & mask
        while (v := slots[i]) != _EMPTY:
            if v == h:
                return slots, i
            i = (i + 1) & mask
        return slots, -1

    def might_hold(self, s: str) -> bool:
        h = self._hash(s)  # (_find inline: every insert of a new id asks)
        slots = self.tables[(h >> 56) & 0xFF]
        mask = len(slots) - 1
        i = h & mask
        while (v := slots[i]) != _EMPTY:
            if v == h:
                return True
            i = (i + 1) & mask
        return False

    def remove(self, s: str) -> None:
        """Let go of ``s`` (one of its hash's slots); KeyError if its hash is not held."""
        h = self._hash(s)
        slots, i = self._find(h)
        if i < 0:
            raise KeyError(s)
        slots[i] = _GONE
        self.held[(h >> 56) & 0xFF] -= 1

    def _grow(self, k: int) -> array[int]:
        """Table ``k`` anew, with room for as many again as it holds (removed slots freed)."""
        size = 16
        while 2 * size < 5 * (self.held[k] + 1):  # a quarter to two-fifths full, once copied
            size *= 2
        slots = array("q", [_EMPTY]) * size
        mask = size - 1
        for h in self.tables[k]:
            if h != _EMPTY and h != _GONE:
                i = h & mask
                while slots[i] != _EMPTY:
                    i = (i + 1) & mask
                slots[i] = h
        self.tables[k] = slots
        self.filled[k] = self.held[k]
        return slots
