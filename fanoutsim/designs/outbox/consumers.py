"""Consumers and their cursors: register, point, reset (the durable half).

Adding a consumer is registering its code (:class:`OutboxRegistry`, which
survives restarts as a binary's code does) and giving it a cursor row. It
back-fills from wherever the cursor points:

``"end"``        only rows committed from now on;
``"beginning"``  every retained row (the oldest retained seq - 1);
an ``int``       that seq: it must lie between the retention horizon and the
                 end of the log, or rows would be silently skipped or never exist.

A *rebuildable* consumer (one with a ``rebuild`` function) can be reset: its
derived state is rebuilt from the base tables, then the retained log replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from fanoutsim.designs.outbox.config import ConsumerSpec
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.validate import is_whole

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.steps import Engine
    from fanoutsim.designs.outbox.tables.port import OutboxTx

# where a cursor starts: the log's either end, or a seq
Start = Literal["beginning", "end"] | int
# a consumer's function: handed a copy of each outbox row
Handler = Callable[[dict[str, Any]], Any]


@dataclass
class OutboxRegistry:
    consumers: dict[str, ConsumerSpec] = field(default_factory=dict)

    def register(self, name: str, fn: Handler | None = None, **guardrails: Any) -> ConsumerSpec:
        spec = ConsumerSpec(name, fn, **guardrails)
        self.consumers[name] = spec
        return spec

    @contextmanager
    def registering(self, name: str, fn: Handler | None = None, **guardrails: Any) -> Iterator[ConsumerSpec]:
        """``register`` for the with-block, undone if the block raises (its cursor
        refused, the process down): a refused registration leaves no consumer
        that the loops would later find without a cursor."""
        before = self.consumers.get(name)
        spec = self.register(name, fn, **guardrails)
        try:
            yield spec
        except BaseException:
            if before is None:
                del self.consumers[name]
            else:
                self.consumers[name] = before
            raise

    def spec(self, name: str) -> ConsumerSpec:
        spec = self.consumers.get(name) if isinstance(name, str) else None
        if spec is not None:  # the hot path: every step asks
            return spec
        check_name("consumer name", name)
        try:
            return self.consumers[name]
        except KeyError:
            raise KeyError(
                f"unknown consumer {name!r}; registered: {', '.join(sorted(self.consumers)) or 'none'}"
            ) from None


def check_start(name: str, start: object) -> None:
    """What a cursor position may be, whatever the log holds."""
    if start in ("beginning", "end") and isinstance(start, str):
        return
    if not is_whole(start):
        raise ValueError(f"cursor for {name!r} must be 'beginning', 'end' or a seq (int), got {start!r}")
    if cast(int, start) < 0:  # is_whole: an integer, Python's or NumPy's
        raise ValueError(f"cursor {start} for {name!r} is negative; seqs start at 1")


def resolve_start(tx: OutboxTx, name: str, start: Start) -> int:
    """The cursor value ``start`` stands for, checked against the log's bounds."""
    check_start(name, start)
    low, last = tx.outbox_bounds()
    if start == "end":
        return last
    if start == "beginning":
        return last if low is None else low - 1
    if start > last:
        raise ValueError(f"cursor {start} for {name!r} is past the end of the log (last seq {last})")
    horizon = last if low is None else low - 1
    if start < horizon:
        raise ValueError(
            f"cursor {start} for {name!r} is before the retention horizon: seqs "
            f"{start + 1}..{horizon} were pruned (lowest allowed cursor {horizon})"
        )
    return start


def add_consumer(e: Engine, now: int, name: str, start: Start = "beginning") -> int:
    """Give a registered consumer its cursor (kept if it has one); returns it."""
    e.registry.spec(name)
    check_start(name, start)  # a kept cursor ignores start, but a bad one is still refused
    with e.store.transaction() as tx:
        cursor = tx.get_cursor(name)
        if cursor is not None:
            return cursor
        cursor = resolve_start(tx, name, start)
        tx.set_cursor(name, cursor)
    e.trace.add(now, "cursor_start", e.actor, who=name, what=cursor)
    return cursor


def set_cursor(e: Engine, now: int, name: str, seq: Start) -> int:
    """Point an existing consumer's cursor at ``seq`` (checked like a start)."""
    e.registry.spec(name)
    with e.store.transaction() as tx:
        if tx.get_cursor(name) is None:
            raise KeyError(f"consumer {name!r} has no cursor yet; add it first")
        cursor = resolve_start(tx, name, seq)
        tx.set_cursor(name, cursor)
    e.trace.add(now, "reset", e.actor, who=name, what=cursor)
    return cursor


def reset_consumer(e: Engine, now: int, name: str) -> int:
    """Rebuild a rebuildable consumer from base tables, then replay the retained log."""
    spec = e.registry.spec(name)
    if spec.rebuild is None:
        raise ValueError(
            f"consumer {name!r} is not rebuildable (it has no rebuild function); use set_cursor to move it"
        )
    spec.rebuild(e.store.rows("pages"))
    return set_cursor(e, now, name, "beginning")
