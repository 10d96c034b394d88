"""The outbox model on a real run's load, and the comparison of the two.

:func:`model_run` runs :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`
with a library's preset (:mod:`fanoutsim.designs.outbox.presets`) and the real
run's poll interval, one consumer that takes no time, and commits each job at
the real run's commit time (virtual seconds = seconds after the producer
started). The hints the real worker lost are lost in the model too, commit by
commit (``NotificationChannel.lose_hints``); the others arrive after a delay
drawn from the preset's measured hint latency. A job's model latency runs from
its commit to its ``delivered`` event — the consumer's function ran, as the
real handler began.

:func:`compare` puts both side by side: percentiles, and the two-sample KS
statistic with its 5% critical value.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.presets import Preset, preset
from fanoutsim.designs.outbox.realqueues.record import RealRun, ks_2samp, ks_critical, percentiles
from fanoutsim.kernel.faults import FaultPlan
from fanoutsim.kernel.timeutil import US

# the preset of each library the harness drives
PRESET_OF = {"procrastinate": "procrastinate-3.10", "pgqueuer": "pgqueuer-1.6"}
CONSUMER = "worker"


def model_run(real: RealRun, *, seed: int = 0, using: Preset | None = None):
    """The model's run of ``real``'s commits and hint losses; the finished simulation."""
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    p = using or preset(PRESET_OF[real.library])
    config = OutboxConfig.preset(p.name, safety_poll_interval=real.poll_interval)
    sim = OutboxSimulation(config, seed=seed, faults=FaultPlan([p.notifications()]))
    sim.register_consumer(CONSUMER)
    losing = [False]
    sim.channel.lose_hints(lambda seq: losing[0])  # the commit being made: was its real hint lost?
    for t, lost in zip(real.commits, real.hint_lost):
        sim.run(until=t)
        losing[0] = lost
        sim.commit("page")
    losing[0] = False
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
    real_ms: dict[int, float]    # p50 / p90 / p99
    model_ms: dict[int, float]
    ks: float                    # two-sample KS statistic, real vs model
    critical: float              # its 5% critical value
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
        return (f"| {self.library} | {self.case} | {fmt(self.real_ms)} | {fmt(self.model_ms)} | "
                f"{self.ks:.2f} (critical {self.critical:.2f}){' agrees' if self.agrees else ''} |")


TABLE_HEAD = ("| library | case | real p50 / p90 / p99 (ms) | model p50 / p90 / p99 (ms) | KS (5% critical) |\n"
              "|---|---|---|---|---|")


def compare(real: RealRun, *, seed: int = 0, using: Preset | None = None) -> Comparison:
    """The real run against the model's run of the same commits and losses."""
    r = real.latencies()
    m = model_latencies(model_run(real, seed=seed, using=using))
    return Comparison(real.library, real.case, percentiles(r * 1000), percentiles(m * 1000), ks_2samp(r, m),
                      ks_critical(len(r), len(m)), len(r), len(m), sum(real.hint_lost))
