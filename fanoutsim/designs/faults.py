"""Fault kinds more than one design accepts, and the hook they share.

A kind one design acts on lives in that design's ``faults`` module; these are
accepted by several (each design's ``faults`` module lists them among its own,
so no design imports another and the kernel knows none of their words)::

    SlowWorkflow(workflow, duration, window)  slow_workflow   a worker's steps run for a drawn
                                                              duration (the reactor's workflow bodies,
                                                              the outbox's and leases' consumers)
    LateCommit(probability, delay, reactor, window)
                                              late_commit     a writer stamps its row, commits later
                                                              (the reactor's firings, the outbox's rows)
    Notifications(drop, coalesce, delay, silent)
                                              notifications   lossy wake-up notifications (the outbox's
                                                              hints; a reactor scenario accepts it too)

Their fields keep the names the reactor, the first design, gave them (the
Python API and the error messages say ``workflow`` and ``reactor``); the other
designs' scenario files spell them in their own words through
:attr:`~fanoutsim.kernel.scenario.FaultRules.renames` (the outbox's ``topic``
and ``consumer``, leases' ``consumer``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from fanoutsim.kernel.faults import Fault, Hook, Window, active, checked_window, checks


def _as_it_is(worker: str, now: int, base: float) -> float:
    return base


#: The hook ``run_duration(worker, now, base)``: how long one step of a worker runs
#: (seconds), given ``base``, what it would take healthy.
RUN_DURATION = Hook("run_duration", healthy=_as_it_is)


@dataclass(frozen=True)
class SlowWorkflow(Fault):
    """The steps of ``workflow`` (the outbox and leases: a consumer) run for a
    duration drawn from ``duration`` (within ``window``)."""

    workflow: str
    duration: Any
    window: Window = None
    kind = "slow_workflow"

    def check(self):
        self.check_fields(workflow=checks.name, duration=checks.dist, window=checks.window)

    def run_duration(self, run, worker: str, now: int, base: float) -> float | None:
        """At the ``run_duration`` hook: for a step of ``workflow`` inside the
        window, a duration drawn from ``duration`` (seconds) in place of ``base``;
        None (no say) for any other worker or time."""
        if self.workflow == worker and active(self.window, run.elapsed(now)):
            return self.duration.sample(run.rng(self))
        return None


@dataclass(frozen=True)
class LateCommit(Fault):
    """With ``probability``, a writer to ``reactor`` (the outbox: a topic;
    None: any) stamps its row and commits ``delay`` later (within ``window``)."""

    probability: float
    delay: Any
    reactor: str | None = None
    window: Window = None
    kind = "late_commit"

    def check(self):
        self.check_fields(
            probability=checks.probability, delay=checks.dist, reactor=checks.optional_name, window=checks.window
        )

    def draw(self, stream: str, t: float, rng: random.Random) -> float:
        """How late one writer to ``stream`` (a reactor, a topic) at ``t``
        (seconds since the start) commits: a delay drawn from ``rng``, or 0.0."""
        if self.reactor in (None, stream) and active(self.window, t) and rng.random() < self.probability:
            return self.delay.sample(rng)
        return 0.0


@dataclass(frozen=True)
class Notifications(Fault):
    """Wake-up notifications are lost (``drop``), merged (``coalesce``), late
    (``delay``) or not sent at all during the ``silent`` windows."""

    drop: float = 0.0
    coalesce: bool = False
    delay: Any = 0.0
    silent: tuple = ()
    kind = "notifications"
    single = True

    def check(self):
        self.check_fields(drop=checks.probability, coalesce=checks.flag, delay=checks.dist)
        object.__setattr__(
            self, "silent", tuple(checked_window(w, f"notifications.silent[{i}]") for i, w in enumerate(self.silent))
        )


__all__ = ["SlowWorkflow", "LateCommit", "Notifications", "RUN_DURATION"]
