"""Named points: the places a design's steps let a fault plan kill the process.

A step calls ``faults.point(name, now, who=..., what=...)`` where its process
could die; :class:`~.plan.CrashAtPoint` raises :class:`Crash` at the nth pass.
The names are the design's: each design declares its points in its own
``faults`` module, and :func:`register_points` records them here with the
design that owns them, so a plan naming another design's point is refused with
that design's name. Because a crash is raised *inside* the open transaction,
the store rolls that transaction back: the duplicates and losses that follow
come from the tables, never from a script.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Every declared crash point -> the design that declared it, in the order declared.
POINTS: dict[str, str] = {}


def register_points(design: str, points: Iterable[str]) -> tuple[str, ...]:
    """Record ``design``'s crash points; a name another design declared is refused."""
    points = tuple(points)
    for name in points:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a crash point's name must be a non-empty string, got {name!r}")
        owner = POINTS.setdefault(name, design)
        if owner != design:
            raise ValueError(f"crash point {name!r} of the {design} design is already one of the {owner} design")
    return points


def known_points() -> list[str]:
    """Every declared point, by design name and then as each design declared
    them: the same list whichever design's module was imported first."""
    order = {design: i for i, design in enumerate(sorted(set(POINTS.values())))}
    return sorted(POINTS, key=lambda name: order[POINTS[name]])


class Crash(BaseException):
    """The process dies here. BaseException: no ``except Exception`` may swallow it.

    ``downtime`` is how long it stays down before the runtime restarts it
    (None: until someone calls ``restart()``)."""

    def __init__(self, point: str, downtime: float | None = None) -> None:
        super().__init__(point)
        self.point = point
        self.downtime = downtime
