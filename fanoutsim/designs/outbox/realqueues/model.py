"""The outbox model on a real run's load, and the comparison of the two.

:func:`model_run` runs :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`
with a library's preset (:mod:`fanoutsim.designs.outbox.presets`: its poll, wake,
fetch and self-wake rules) and the real run's poll interval, one consumer that
takes no time, and commits each job at the real run's commit time (virtual
seconds = seconds after the producer started). The hints the real worker lost
are lost in the model too, commit by commit (``NotificationChannel.lose_hints``);
the others arrive after a delay drawn from the measured hint latency. The
worker's own hints (pgqueuer's status writes) are lost as the case loses hints
in the worker: with its drop probability (all of them with LISTEN off). A job's
model latency runs from its commit to its ``delivered`` event — the consumer's
function ran, as the real handler began.

The costs — the hint latency, the read cost of a round a hint began, the cost
of an empty fetch — are the preset's (``hint_cost.json``), or a
:class:`~fanoutsim.designs.outbox.presets.Measured` given: :func:`session_costs`
pools what the real runs of one library measured, so that the model of a run
draws the costs of the machine as it was during that run, not as it was when
``hint_cost.json`` was written (under another load they move by tens of
percent, and KS on millisecond latencies sees that).

:func:`compare` puts both side by side: percentiles, and the two-sample KS
statistic with its 5% critical value.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.presets import Measured, Preset, preset
from fanoutsim.designs.outbox.realqueues.load import CASES
from fanoutsim.designs.outbox.realqueues.record import RealRun, ks_2samp, ks_critical, percentiles
from fanoutsim.kernel.faults import FaultPlan
from fanoutsim.kernel.timeutil import US

# the preset of each library the harness drives
PRESET_OF = {"procrastinate": "procrastinate-3.10", "pgqueuer": "pgqueuer-1.6"}
CONSUMER = "worker"


def session_costs(runs: Iterable[RealRun]) -> Measured:
    """The costs the real ``runs`` measured, pooled (one library's runs of one session):
    every kept hint's latency, every read a hint began, every empty fetch."""
    runs = list(runs)
    if len({r.library for r in runs}) != 1:
        raise ValueError(f"session_costs pools the runs of one library, got {sorted({r.library for r in runs})}")
    samples = [
        np.concatenate([getattr(r, what)(*args) for r in runs]).tolist()
        for what, args in (("hint_latencies", ()), ("read_costs", ()), ("fetch_costs", (False,)))
    ]
    for name, values in zip(("hint latencies", "read costs", "empty fetches"), samples):
        if not values:
            raise ValueError(f"the runs measured no {name}: give runs with hints on")
    return Measured.of(*samples)


def model_run(real: RealRun, *, seed: int = 0, using: Preset | None = None, measured: Measured | None = None):
    """The model's run of ``real``'s commits and hint losses; the finished simulation.
    ``measured``: the costs to draw (default: the preset's, from ``hint_cost.json``)."""
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    p = using or preset(PRESET_OF[real.library])
    measured = measured or p.measured()
    config = OutboxConfig(**{**p.config_values(measured), "safety_poll_interval": real.poll_interval})
    sim = OutboxSimulation(config, seed=seed, faults=FaultPlan([p.notifications(measured=measured)]))
    sim.register_consumer(CONSUMER)
    case = CASES.get(real.case)
    drop = 0.0 if case is None else (1.0 if not case.listen else case.drop)
    own = random.Random(f"fanoutsim:realqueues:model-drop:{real.case}:{seed}")
    losing: list[bool | None] = [None]  # the commit being made: was its real hint lost? (None: no commit)
    sim.channel.lose_hints(lambda seq: own.random() < drop if losing[0] is None else losing[0])
    for t, lost in zip(real.commits, real.hint_lost):
        sim.run(until=t)
        losing[0] = lost
        sim.commit("page")
        losing[0] = None
    sim.run(until=(real.commits[-1] if real.commits else 0.0) + 3 * real.poll_interval)
    return sim


def model_latencies(sim) -> np.ndarray:
    """Commit -> delivered, seconds, per seq in commit order (the first delivery of each)."""
    t = sim.trace()
    committed = t[t["kind"] == "committed"].drop_duplicates("seq").set_index("seq")["t"]
    delivered = t[(t["kind"] == "delivered") & (t["consumer"] == CONSUMER)].drop_duplicates("seq").set_index("seq")["t"]
    both = delivered.index.intersection(committed.index)
    return ((delivered.loc[both] - committed.loc[both]).to_numpy(dtype=np.int64) / US).astype(float)


@dataclass(frozen=True)
class Comparison:
    library: str
    case: str
    real_ms: dict[int, float]  # p50 / p90 / p99
    model_ms: dict[int, float]
    ks: float  # two-sample KS statistic, real vs model
    critical: float  # its 5% critical value
    n_real: int
    n_model: int
    hints_lost: int

    @property
    def agrees(self) -> bool:
        """KS cannot tell the two apart at 5%."""
        return self.ks <= self.critical

    def row(self) -> str:
        def fmt(p: dict[int, float]) -> str:
            return " / ".join(f"{p[q]:.3g}" for q in (50, 90, 99))

        return (
            f"| {self.library} | {self.case} | {fmt(self.real_ms)} | {fmt(self.model_ms)} | "
            f"{self.ks:.2f} (critical {self.critical:.2f}){' agrees' if self.agrees else ''} |"
        )


TABLE_HEAD = (
    "| library | case | real p50 / p90 / p99 (ms) | model p50 / p90 / p99 (ms) | KS (5% critical) |\n"
    "|---|---|---|---|---|"
)


def compare(
    real: RealRun, *, seed: int = 0, using: Preset | None = None, measured: Measured | None = None
) -> Comparison:
    """The real run against the model's run of the same commits and losses."""
    r = real.latencies()
    m = model_latencies(model_run(real, seed=seed, using=using, measured=measured))
    return Comparison(
        real.library,
        real.case,
        percentiles(r * 1000),
        percentiles(m * 1000),
        ks_2samp(r, m),
        ks_critical(len(r), len(m)),
        len(r),
        len(m),
        sum(real.hint_lost),
    )
