"""What one run recorded, job by job, and how two runs' latencies are compared.

A :class:`RealRun` holds, in commit order, each job's commit time (the
server's clock at COMMIT, :mod:`.commitclock`), the time its handler began,
when the worker heard its hint (None: never), and whether that hint was lost
(dropped in the worker or never delivered). Times are seconds after the
producer started, on the machine's wall clock (``time.time()``).

:func:`ks_2samp` is the two-sample Kolmogorov-Smirnov statistic with its
asymptotic critical value (:mod:`fanoutsim.kernel.stats`: two samples of sizes n
and m differ at level alpha when ``D > c(alpha) * sqrt((n + m) / (n * m))``,
``c(alpha) = sqrt(-ln(alpha/2) / 2)``, 1.358 at 5%).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from fanoutsim.kernel.stats import ks_2samp, ks_critical, percentiles

__all__ = ["RealRun", "ks_2samp", "ks_critical", "percentiles"]  # the statistics: the kernel's, named here too


@dataclass
class RealRun:
    library: str  # "procrastinate" | "pgqueuer"
    version: str  # the installed release that ran
    case: str  # a key of load.CASES
    poll_interval: float  # procrastinate's fetch_job_polling_interval / pgqueuer's dequeue_timeout
    fetch_size: int  # jobs one fetch takes (procrastinate: 1; pgqueuer: batch_size)
    commits: list[float]  # per job, commit order
    handled: list[float | None]  # when its handler began (None: never, within the run)
    hint_at: list[float | None]  # when the worker heard its hint
    hint_lost: list[bool]  # its hint never woke the worker (dropped here, or lost in a reconnect)
    returned: list[float] = field(default_factory=list)  # the producer's enqueue call returned (monotonic)
    terminations: list[float] = field(default_factory=list)  # pg_terminate_backend of the listener
    reconnects: int = 0  # times the listener connected again after the first
    wall_seconds: float = 0.0  # how long the run took (set-up included)
    # each fetch of the worker: [called, returned, [the jobs it took, by place in commit order]]
    # (procrastinate's fetch_job, pgqueuer's dequeue)
    fetches: list[list] = field(default_factory=list)
    # each table-changed event the worker heard (pgqueuer): [when, operation, dropped (0/1)]
    events: list[list] = field(default_factory=list)

    def latencies(self) -> np.ndarray:
        """Commit -> handler began, seconds, for every job that was handled."""
        return np.asarray([h - c for c, h in zip(self.commits, self.handled) if h is not None], dtype=float)

    def unhandled(self) -> int:
        return sum(h is None for h in self.handled)

    def hint_latencies(self) -> np.ndarray:
        """Commit -> the worker heard the hint, for the jobs whose hint it heard and kept."""
        return np.asarray(
            [a - c for c, a, lost in zip(self.commits, self.hint_at, self.hint_lost) if a is not None and not lost],
            dtype=float,
        )

    def read_costs(self) -> np.ndarray:
        """Hint heard -> handler began, for each round of reads a job's own hint began: the
        worker was waiting (its last fetch had found nothing and returned before the hint
        came) and the next fetch took that job first. The worker's wake-up, its fetch and
        the dispatch to the handler: what the model's ``read_cost`` is."""
        out, prev_empty_end = [], math.inf
        for called, returned, jobs in self.fetches:
            if jobs:
                first = jobs[0]
                heard, handled = self.hint_at[first], self.handled[first]
                if (
                    heard is not None
                    and handled is not None
                    and not self.hint_lost[first]
                    and prev_empty_end <= heard <= called
                ):
                    out.append(handled - heard)
                prev_empty_end = math.inf
            else:
                prev_empty_end = returned
        return np.asarray(out, dtype=float)

    def fetch_costs(self, found: bool) -> np.ndarray:
        """How long the worker's fetches took (called -> returned), seconds: those that
        took a job (``found``), or those that found none (what the model's
        ``empty_read_cost`` is: with procrastinate, the window of its lost wake-up)."""
        return np.asarray([b - a for a, b, jobs in self.fetches if bool(jobs) == found], dtype=float)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RealRun:
        return cls(**d)
