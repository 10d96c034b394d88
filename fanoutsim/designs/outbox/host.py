"""What the outbox design's two runtimes share: the public API's plumbing,
the views of the outbox tables, its trace names and its hint counters."""

from __future__ import annotations

import pandas as pd

from fanoutsim.designs.outbox.config import OUTBOX_FAULT_KINDS
from fanoutsim.designs.outbox.faults import FAULTS
from fanoutsim.kernel.frames import store_frame
from fanoutsim.kernel.runtime.faces import checked_config
from fanoutsim.kernel.runtime.views import table_view


def checked_outbox_config(config, seed):
    """The outbox runtimes' common arguments: an OutboxConfig (None: the
    defaults) and an int seed; returns the config."""
    from fanoutsim.designs.outbox import OutboxConfig

    return checked_config(config, seed, OutboxConfig)


class OutboxHost:
    """Mixin for the outbox runtimes: needs ``store``, ``_trace``,
    ``metrics_registry``, ``channel``, ``now`` (seconds since start) and, for
    late commits, ``_late`` (the plan's LateCommit specs) and ``_late_rng``."""

    # what a plan may hold, checked as the runtime is made (a fault it would not act on is refused)
    fault_kinds = OUTBOX_FAULT_KINDS
    crash_points = FAULTS.points
    fault_hooks = FAULTS.hook_names

    def _late_delay(self, topic: str) -> float:
        """How late this writer commits (0: at once): the longest delay drawn by
        an active ``LateCommit`` whose ``reactor`` field, if set, is the topic."""
        t, delay = self.now, 0.0
        for f in self._late:
            active = f.window is None or f.window[0] <= t < f.window[1]
            if active and f.reactor in (None, topic) and self._late_rng.random() < f.probability:
                delay = max(delay, f.delay.sample(self._late_rng))
        return delay

    def _frame(self, table: str) -> pd.DataFrame:
        return store_frame(self.store, table)

    outbox = table_view("outbox")
    cursors = table_view("cursors")
    parked = table_view("parked")
    deferred = table_view("deferred")
    pages = table_view("pages")

    def trace(self) -> pd.DataFrame:
        """The trace with the outbox's names: ``consumer`` and ``seq``."""
        return self._trace.frame()

    def metrics(self) -> dict[str, float]:
        """Every metric now, in the Prometheus style (``{'name{label="value"}': number}``):
        the run's counters and histograms, the hint counters and the cursors'
        lags read from the tables now (:mod:`fanoutsim.designs.outbox.metrics`
        says what each means)."""
        from fanoutsim.designs.outbox.metrics import cursor_lags

        out = self.metrics_registry.as_dict()
        ch = self.channel
        out.update(
            {
                "fanoutsim_outbox_hints_sent_total": ch.sent,
                "fanoutsim_outbox_hints_dropped_total": ch.dropped,
                "fanoutsim_outbox_hints_missed_total": ch.missed,
                "fanoutsim_outbox_hints_coalesced_total": ch.coalesced,
            }
        )
        out.update(cursor_lags(self.store.rows("outbox"), self.store.rows("cursors"), self.now_us()))
        return out


# -- the leased-consumer design (seed 003) --------------------------------------
