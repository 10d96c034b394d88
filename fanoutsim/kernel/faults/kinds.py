"""Fault kinds: what a plan may say goes wrong (their fields' checks: :mod:`.checks`).

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

from collections.abc import Iterable
from dataclasses import Field, dataclass
from typing import Any, ClassVar

from fanoutsim.kernel.faults import checks
from fanoutsim.kernel.faults.checks import Check, Window
from fanoutsim.kernel.faults.points import POINTS, known_points


def overlap(a: Window, b: Window) -> bool:
    if a is None or b is None:
        return True
    return a[0] < b[1] and b[0] < a[1]


def active(win: Window, t: float) -> bool:
    """Whether ``t`` (seconds since the start) lies in the window."""
    return win is None or win[0] <= t < win[1]


class Fault:
    """A fault kind's base. ``kind``: its TOML name. ``single``: a plan may hold
    one at most. ``order``: at a hook several kinds act at, lower answers
    first (then as the plan lists them)."""

    # each kind is a dataclass (what dataclasses.fields reads its TOML keys from)
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    #: The kind's name in a scenario file's ``[[faults]]`` table (``kind = "crash_at"``).
    kind: ClassVar[str] = "fault"
    #: Whether a plan may hold one fault of this kind at most (a second is refused).
    single: ClassVar[bool] = False
    #: At a hook several kinds answer, the lower order is asked first.
    order: ClassVar[int] = 1

    def check(self) -> None:  # overridden
        """Refuse a field value this kind does not allow, as the fault is made: a
        ValueError naming ``<kind>.<field>`` and what is allowed. Each field is kept
        in its checked form (a window as a tuple, a duration as its distribution)."""

    def check_fields(self, **fields: Check) -> None:
        """Check the named fields in this order, each named ``<kind>.<field>``
        in its error, and keep what each check returns (a window as a tuple, a
        duration parsed into its distribution): ``self.check_fields(at=checks.number(low=0))``."""
        for field, check in fields.items():
            object.__setattr__(self, field, check(getattr(self, field), f"{self.kind}.{field}"))

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


#: Every fault kind by its name in a scenario file, in the order declared.
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
    """The process dies at virtual time ``at`` (seconds since the start), down for
    ``downtime`` (seconds, or a law)."""

    at: float
    downtime: Any = 0.0
    kind = "crash_at"

    def check(self) -> None:
        self.check_fields(at=checks.number(low=0), downtime=checks.dist)


@dataclass(frozen=True)
class CrashRandomly(Fault):
    """The process dies at exponential gaps of mean ``mean_gap`` seconds (within
    ``window``), down for ``downtime`` each time (seconds, or a law)."""

    mean_gap: float
    downtime: Any = 0.0
    window: Window = None
    kind = "crash_randomly"

    def check(self) -> None:
        self.check_fields(mean_gap=checks.number(low=0, strict_low=True), downtime=checks.dist, window=checks.window)


@dataclass(frozen=True)
class CrashAtPoint(Fault):
    """The process dies at the ``nth`` pass through the named ``point``, down for
    ``downtime`` (seconds, or a law). A point no design declared is refused,
    naming the known ones."""

    point: str
    nth: int = 1
    downtime: Any = 0.0
    kind = "crash_at_point"

    def check(self) -> None:
        if self.point not in POINTS:
            raise ValueError(
                f"crash_at_point.point {self.point!r} is not a crash point; known points: {', '.join(known_points())}"
            )
        self.check_fields(nth=checks.number(low=1, integer=True), downtime=checks.dist)


CRASHES = register_kinds((CrashAt, CrashRandomly, CrashAtPoint))
