"""What a loop waits for: the requests a design's loops yield to a clock's driver.

A design writes each of its loops once, as a generator — SimPy's own process
style — that calls engine steps through the runtime (``rt._call(engine.step,
...)``) and *yields what it waits for*. The driver of the clock answers: the
virtual driver (:class:`~.virtual.VirtualRuntime`) with SimPy events, the wall
driver (:class:`~.wallclock.SteppedWallRuntime`) with real waits on a thread,
the way :class:`simpy.rt.RealtimeEnvironment` changes only how time passes.

``Sleep(seconds)``   time passes; the loop is idle (a stop ends the wait)
``Until(at)``        idle until ``at``, seconds since the start (``rt.now``'s
                     scale): a schedule of its own that a slow step does not
                     push back, such as a writer's arrivals
``Work(seconds)``    the loop's own busy time, a step's ``duration``: a stop
                     lets it finish, a crash ends it. ``since`` (a mark of
                     :meth:`clock`) counts the time already spent, such as a
                     consumer's own code that ran for real on the wall clock
``Wait(wake, timeout)``
                     a wake (from ``rt.arm(key)`` or ``rt.until_written``) or
                     ``timeout`` seconds, whichever comes first (None: no timeout)

A loop that runs *every* so often keeps its :class:`Ticks` and yields
``ticks.next(rt.now)``: the next tick of its grid.

A loop of an incarnation dies with it: at a crash the driver stops answering
and closes the generator (its ``finally`` blocks run). Crash, restart, the
per-step lock and the fault hooks live in the drivers, once.

Requests are tiny immutable records with ``__slots__``: a loop yields one per
wait, so they are on the hot path.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, fields


class _Request:
    """What the requests share. Each is a slotted dataclass with no ``__eq__`` (a
    request is a record, compared by identity) and this repr: ``Sleep(1.0)``,
    ``Wait(wake, timeout=None)`` (the first field by position, the rest by name)."""

    __slots__ = ()

    def __repr__(self) -> str:
        first, *rest = (f.name for f in fields(self))  # type: ignore[arg-type]  # every request is a dataclass
        named = "".join(f", {name}={getattr(self, name)!r}" for name in rest)
        return f"{type(self).__name__}({getattr(self, first)!r}{named})"


@dataclass(slots=True, eq=False, repr=False)
class Sleep(_Request):
    """Idle for ``seconds`` (a stop on the wall clock ends the wait)."""

    seconds: float


@dataclass(slots=True, eq=False, repr=False)
class Until(_Request):
    """Idle until ``at``, seconds since the start (a stop ends the wait)."""

    at: float


@dataclass(slots=True, eq=False, repr=False)
class Work(_Request):
    """The loop's own busy time: ``seconds`` of work, less what passed since
    ``since`` (a mark of the runtime's ``clock()``; None: nothing yet). A stop
    lets the work finish; a crash ends it."""

    seconds: float
    since: float | None = None


@dataclass(slots=True, eq=False, repr=False)
class Wait(_Request):
    """A wake, or ``timeout`` seconds (None: no timeout), whichever is first."""

    wake: object
    timeout: float | None = None


class Ticks:
    """The ticks of a loop that runs *every* ``interval`` seconds, on a grid from
    ``start`` (seconds since the start): a pass that takes time does not push
    the next tick back, and ticks a slow pass overran are skipped, not bunched.
    Under SimPy a pass takes no time, so the grid is the sum the timeouts would
    make; on the wall clock a loaded machine does not stretch the period.

    >>> ticks = Ticks(0.0, 1.0)
    >>> ticks.next(0.25).at, ticks.next(3.5).at, ticks.at_or_after(5.2).at
    (1.0, 3.5, 5.5)
    """

    __slots__ = ("at", "interval")

    def __init__(self, start: float, interval: float) -> None:
        self.at = start
        self.interval = interval

    def next(self, now: float) -> Until:
        """Until the next tick (now, if the pass overran it)."""
        self.at += self.interval
        if self.at < now:
            self.at = now
        return Until(self.at)

    def at_or_after(self, now: float) -> Until:
        """Until the first tick of the grid at or after ``now`` (after an idle sleep)."""
        at, interval = self.at, self.interval  # locals: this walks every tick the sleep skipped
        while at < now:
            at += interval  # the sum the ticks' timeouts would have made
        self.at = at
        return Until(at)


def arrivals(
    now: Callable[[], float],
    rate: float,
    start: float,
    stop: float | None,
    rng: random.Random,
    arrive: Callable[[float], object],
    origin: float | None = None,
) -> Generator[Sleep | Until, None, None]:
    """A writer's loop: Poisson arrivals, ``rate`` a second from ``start`` until
    ``stop`` (seconds since the start, on ``now()``'s scale; None: no end),
    ``arrive(due)`` at each. The arrivals keep their own schedule: a write that
    waits for the store delays that write, never the next arrival; and an
    arrival counts by its time, not by the wall clock's later reading of it.
    ``origin``: when the workload began (the driver's :meth:`workload_origin`);
    the schedule starts there, or at ``start``, even if the loop first wakes
    later (a thread on a loaded machine); None: at the first wake-up."""
    if start > now():
        yield Sleep(start - now())
    due = now()
    if origin is not None:
        due = min(due, max(start, origin))
    while True:
        due += rng.expovariate(rate)
        yield Until(due)
        if stop is not None and due >= stop:
            return
        arrive(due)


REQUESTS = (Sleep, Until, Work, Wait)
