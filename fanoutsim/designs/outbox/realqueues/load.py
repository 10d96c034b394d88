"""What a comparison run is given: a seeded Poisson load, and a case of hint loss.

The same :class:`PoissonLoad` drives the real worker (a producer thread commits
one job at each offset) and the model (``OutboxSimulation.commit`` at the real
run's recorded commit times), so the two see the same arrivals.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


def _positive(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PoissonLoad:
    """``jobs`` commits at Poisson times, ``rate`` per second, drawn from ``seed``."""

    rate: float = 5.0
    jobs: int = 190
    seed: int = 0

    def __post_init__(self) -> None:
        _positive(self.rate, "rate")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {self.jobs!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an int, got {self.seed!r}")

    def offsets(self) -> list[float]:
        """When each job is due, in seconds after the producer starts (increasing)."""
        rng = random.Random(f"fanoutsim:realqueues:load:{self.seed}")
        t, out = 0.0, []
        for _ in range(self.jobs):
            t += rng.expovariate(self.rate)
            out.append(t)
        return out


@dataclass(frozen=True)
class Case:
    """How hints are lost in a run.

    ``listen``            the worker LISTENs at all (procrastinate's ``listen_notify``);
    ``drop``              each hint that reaches the worker is dropped with this
                          probability, inside the worker (its notification handler
                          is wrapped), drawn from ``seed``;
    ``terminate_every``   mean seconds between two ``pg_terminate_backend`` of the
                          worker's listening connection (exponential gaps, from
                          ``seed``); hints sent while it reconnects are lost by
                          PostgreSQL itself. None: never.
    """

    name: str
    listen: bool = True
    drop: float = 0.0
    terminate_every: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.listen, bool):
            raise ValueError(f"listen must be True or False, got {self.listen!r}")
        if isinstance(self.drop, bool) or not isinstance(self.drop, (int, float)) or not 0 <= self.drop <= 1:
            raise ValueError(f"drop must be a probability in [0, 1], got {self.drop!r}")
        if self.terminate_every is not None:
            _positive(self.terminate_every, "terminate_every")

    def drop_rng(self) -> random.Random:
        return random.Random(f"fanoutsim:realqueues:drop:{self.name}:{self.seed}")

    def terminations(self, horizon: float) -> list[float]:
        """When the listener's backend is terminated, seconds after the producer starts."""
        if self.terminate_every is None:
            return []
        rng = random.Random(f"fanoutsim:realqueues:terminate:{self.name}:{self.seed}")
        t, out = 0.0, []
        while True:
            t += rng.expovariate(1.0 / self.terminate_every)
            if t >= horizon:
                return out
            out.append(t)


# The three cases of the comparison (issue 28's table): hints on; every hint lost
# (LISTEN off); some lost — half dropped in the worker, and the listener's
# connection terminated every ~5 s (procrastinate; pgqueuer LISTENs on its only
# connection, so there a terminated backend ends the worker: only the drops apply).
CASES = {
    "hints": Case("hints"),
    "no_hints": Case("no_hints", listen=False),
    "some_lost": Case("some_lost", drop=0.5, terminate_every=5.0),
}
