"""Fault kinds: what a plan may say goes wrong, and the checks they share.

A kind is a frozen dataclass of :class:`Fault` whose ``kind`` is its name in
a scenario's ``[[faults]]`` tables. The kernel has the kinds every design
uses — the process dies at a time, at random or at a named point — and the
registry :data:`KINDS` (TOML name -> kind) that each design adds its own kinds
to (:func:`fanoutsim.kernel.faults.declare`). A kind acts through the hooks
it defines (a method named after the hook, see :mod:`.hooks`) or is read by
the design's runtime (``plan.of(Kind)``).

Times and windows are virtual seconds since the run's start; a window is
``(start, end)`` with end > start >= 0, or None for "always".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import Field, dataclass
from typing import Any, ClassVar

from fanoutsim.kernel.dist import parse_dist
from fanoutsim.kernel.faults.points import POINTS, known_points
from fanoutsim.kernel.validate import is_real, is_whole

Window = tuple[float, float] | None


def checked_number(
    value: Any,
    where: str,
    *,
    low: float | None = None,
    high: float | None = None,
    strict_low: bool = False,
    integer: bool = False,
) -> float:
    """``value`` if it is a finite number within the bounds; a ValueError naming ``where``."""
    if not is_real(value) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    if integer and not is_whole(value):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if low is not None and (value <= low if strict_low else value < low):
        raise ValueError(f"{where} must be {'>' if strict_low else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{where} must be <= {high}, got {value!r}")
    number: float = value  # a real number: checked above
    return number


def checked_window(value: Any, where: str) -> Window:
    """A window ``(start, end)`` in virtual seconds, or None."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{where} must be [start, end] in virtual seconds or omitted, got {value!r}")
    start = checked_number(value[0], f"{where} start", low=0)
    end = checked_number(value[1], f"{where} end", low=0)
    if end <= start:
        raise ValueError(f"{where} must end after it starts, got {list(value)!r}")
    return (float(start), float(end))


def overlap(a: Window, b: Window) -> bool:
    if a is None or b is None:
        return True
    return a[0] < b[1] and b[0] < a[1]


def active(win: Window, t: float) -> bool:
    """Whether ``t`` (seconds since the start) lies in the window."""
    return win is None or win[0] <= t < win[1]


def checked_name(value: Any, where: str, optional: bool = False) -> str | None:
    """A non-empty string (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    name: str = value
    return name


class Fault:
    """A fault kind's base. ``kind``: its TOML name. ``single``: a plan may hold
    one at most. ``order``: at a hook several kinds act at, lower answers
    first (then as the plan lists them)."""

    # each kind is a dataclass (what dataclasses.fields reads its TOML keys from)
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    kind: ClassVar[str] = "fault"
    single: ClassVar[bool] = False
    order: ClassVar[int] = 1

    def check(self) -> None:  # overridden
        pass

    def __post_init__(self) -> None:
        self.check()

    def acts_at(self, hook: str) -> bool:
        """Whether this fault answers ``hook`` (it defines a method of that name)."""
        return callable(getattr(type(self), hook, None))

    @classmethod
    def check_together(cls, faults: list[Fault]) -> None:
        """Refuse what the plan's faults of this kind say together (a ValueError)."""
        if cls.single and len(faults) > 1:
            raise ValueError(f"the plan has more than one {cls.kind!r} fault; combine them into one")


# every kind by its TOML name, in the order declared
KINDS: dict[str, type[Fault]] = {}


def register_kinds(kinds: Iterable[type[Fault]]) -> tuple[type[Fault], ...]:
    """Add kinds to :data:`KINDS`; a name another kind has is refused."""
    kinds = tuple(kinds)
    for k in kinds:
        if not (isinstance(k, type) and issubclass(k, Fault)) or k.kind == Fault.kind:
            raise TypeError(f"a fault kind must be a Fault subclass with its own kind name, got {k!r}")
        known = KINDS.setdefault(k.kind, k)
        if known is not k:
            raise ValueError(f"fault kind {k.kind!r} is already {known.__module__}.{known.__qualname__}")
    return kinds


@dataclass(frozen=True)
class CrashAt(Fault):
    """The process dies at virtual time ``at``, down for ``downtime``."""

    at: float
    downtime: Any = 0.0
    kind = "crash_at"

    def check(self) -> None:
        checked_number(self.at, "crash_at.at", low=0)
        object.__setattr__(self, "downtime", parse_dist(self.downtime, "crash_at.downtime"))


@dataclass(frozen=True)
class CrashRandomly(Fault):
    """The process dies at exponential gaps of mean ``mean_gap`` (within ``window``)."""

    mean_gap: float
    downtime: Any = 0.0
    window: Window = None
    kind = "crash_randomly"

    def check(self) -> None:
        checked_number(self.mean_gap, "crash_randomly.mean_gap", low=0, strict_low=True)
        object.__setattr__(self, "downtime", parse_dist(self.downtime, "crash_randomly.downtime"))
        object.__setattr__(self, "window", checked_window(self.window, "crash_randomly.window"))


@dataclass(frozen=True)
class CrashAtPoint(Fault):
    """The process dies at the ``nth`` pass through the named ``point``."""

    point: str
    nth: int = 1
    downtime: Any = 0.0
    kind = "crash_at_point"

    def check(self) -> None:
        if self.point not in POINTS:
            raise ValueError(
                f"crash_at_point.point {self.point!r} is not a crash point; known points: {', '.join(known_points())}"
            )
        checked_number(self.nth, "crash_at_point.nth", low=1, integer=True)
        object.__setattr__(self, "downtime", parse_dist(self.downtime, "crash_at_point.downtime"))


CRASHES = register_kinds((CrashAt, CrashRandomly, CrashAtPoint))
