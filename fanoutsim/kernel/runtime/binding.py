"""The binding: how one runtime per clock drives any design.

A clock's runtime — :class:`~.virtual.VirtualRuntime` (SimPy) or
:class:`~.wallclock.SteppedWallRuntime` (threads) — owns the clock, the store,
the metrics, the trace, the bound fault plan and the process's life cycle:
start, crash (the engine and every loop die; the open transaction rolls back),
restart after a downtime, and the guarded engine step. A design's runtime class
(``OutboxSimulation``, ``LeaseRealtime``, ...) subclasses one of them and
implements three hooks, its :class:`Binding`:

``_new_engine(incarnation)``
    The engine of a new incarnation of the process (0 first, then 1, 2, ...
    after each crash): everything it holds in memory dies with it.
``_start_loops(engine)``
    Start that incarnation's loops with ``_spawn`` (SimPy processes or
    threads) and run what a start runs first (a recovery pass). The runtime
    has already counted the incarnation and traced the restart.
``_crashed()``
    What else dies with the process (a listener's connection, hints in
    flight, replicas); called as the engine is thrown away.

On the wall clock a design may also implement ``_wake_loops()`` (wake its
loops' own sleeps — a consumer's wake event, a work queue — so that they see
the incarnation's ``_stop`` event) and ``_started(start_us)`` (at ``start()``,
before anything runs); it makes incarnation 0's engine in its ``__init__``, so
that its API works before ``start()``.

The design's loops use the other side, :class:`Runtime`: ``now_us()``, the
guarded step ``_call(engine.fetch, sub)`` — a *bound* engine step, run now
unless its incarnation is dead (then None), a
:class:`~fanoutsim.kernel.faults.Crash` raised inside it taking the process
down (then None too) — ``_api(Engine.step, ...)`` for calls from outside the
loops (the step of the live engine; an error while the process is down),
``_spawn``, ``crash`` and ``restart``. Engine steps are named by the callable,
never by a string.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from fanoutsim.kernel.validate import is_real

T = TypeVar("T")


class Binding(Protocol):
    """What a design implements for a clock's runtime (hooks of its runtime class)."""

    def _new_engine(self, incarnation: int) -> Any:
        """The engine of incarnation ``incarnation`` (0, 1, ...)."""

    def _start_loops(self, engine: Any) -> None:
        """Start ``engine``'s loops (``self._spawn(...)``) and its first steps."""

    def _crashed(self) -> None:
        """Drop what dies with the process besides the engine and its loops."""


class Runtime(Protocol):
    """What a clock's runtime gives a design's loops and its public API."""

    engine: Any  # the live incarnation's engine; None while the process is down
    incarnation: int

    def now_us(self) -> int:
        """The clock: epoch microseconds."""

    def _call(self, step: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """``step(now_us, *args, **kwargs)`` now, ``step`` a bound method of an
        engine; None if that engine is not the live incarnation, or if a Crash
        inside the step took the process down."""

    def _api(self, step: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """``step`` (an engine class's function, ``Engine.commit``) on the live
        engine now; an error while the process is down."""

    def _spawn(self, *loop: Any) -> Any:
        """A loop of the live incarnation (a SimPy generator, or a thread's
        name, target and arguments); a crash stops it."""

    def crash(self, point: str = "manual", downtime: float | None = None) -> None:
        """The process dies now; it restarts after ``downtime`` seconds (None: at restart())."""

    def restart(self) -> None:
        """A new incarnation over the same tables, now (a no-op while up)."""


def check_downtime(downtime: Any) -> None:
    """Check ``crash(downtime=...)``: None (restart by hand) or a finite number
    of seconds >= 0, refused before anything crashes."""
    if downtime is None:
        return
    if not is_real(downtime) or not math.isfinite(downtime) or downtime < 0:
        raise ValueError(
            f"downtime must be None (restart() by hand) or a finite number of seconds >= 0, got {downtime!r}"
        )
