"""A control for notebook 3: retention, pause length and prune policy.

:class:`PruneControl` re-runs :func:`fanoutsim.analysis.retention_run` (seeded,
five virtual minutes: a live subscription and one paused from t = 25 s) and
redraws the firings table over time, with the cost of the choice written
above it. Its bounds are values the engine accepts: a retention from 0 s (the
config allows 0), a pause from 0 s (no pause) to the end of the run, and the
prune policies :class:`~fanoutsim.SchedulerConfig` knows.

Headless (a test, or nbval), build it and call :meth:`PruneControl.update`;
the figure and the numbers are attributes.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w
from IPython.display import display

from fanoutsim.designs.reactor.analysis.faults import retention_cost, retention_run
from fanoutsim.designs.reactor.config import POLICIES
from fanoutsim.designs.reactor.plots.faults import table_size_over_time
from fanoutsim.designs.reactor.widgets.latency import _show, _slider

__all__ = ["PruneControl", "prune_control", "RETENTION_BOUNDS", "PAUSE_BOUNDS"]

UNTIL = 300.0
PRUNE_INTERVAL = 10.0
PAUSE_START = 25.0  # off the prune ticks (every 10 s): a pause never ends as a prune runs
#: The retention slider's (min, max, step), in seconds.
RETENTION_BOUNDS = (0.0, 240.0, 10.0)  # min, max, step (s); the engine accepts any >= 0
#: The pause slider's (min, max, step), in seconds (0: never paused).
PAUSE_BOUNDS = (0.0, 270.0, 10.0)  # 0: never paused; at most until the run ends (at 300 s)


class PruneControl:
    """Sliders for the retention and the pause, a dropdown for the policy; a
    change re-runs the seeded simulation and redraws."""

    def __init__(self, *, retention: float = 60.0, pause: float = 120.0, policy: str = "ttl", seed: int = 0) -> None:
        self.seed = seed
        wide = {"description_width": "initial"}  # the whole description shown, not cut at the slider
        self.retention = _slider(w.FloatSlider, retention, RETENTION_BOUNDS, "retention (s)", style=wide)
        self.pause = _slider(w.FloatSlider, pause, PAUSE_BOUNDS, "pause (s)", style=wide)
        self.policy = w.Dropdown(
            options=list(POLICIES["prune_policy"]),
            value=policy,
            description="prune_policy",
            style=wide,
        )
        self.summary = w.HTML()
        self.output = w.Output()
        self.widget = w.VBox([w.HBox([self.retention, self.pause, self.policy]), self.summary, self.output])
        self.figure = None
        self.result: dict[str, Any] = {}
        for control in (self.retention, self.pause, self.policy):
            control.observe(self._changed, names="value")
        self.update()

    def _changed(self, change) -> None:
        self.update()

    def run(self):
        """The seeded simulation for the current settings."""
        return retention_run(
            self.policy.value,
            retention=float(self.retention.value),
            pause=float(self.pause.value),
            pause_start=PAUSE_START,
            until=UNTIL,
            prune_interval=PRUNE_INTERVAL,
            seed=self.seed,
        )

    def update(self) -> dict[str, Any]:
        """Re-run, redraw, and return :func:`~fanoutsim.analysis.retention_cost`."""
        sim = self.run()
        self.result = retention_cost(sim)
        r = self.result
        pause = float(self.pause.value)
        title = f"{r['prune_policy']}, retention {r['retention_s']:g} s, " + (
            f"paused {PAUSE_START:g}-{PAUSE_START + pause:g} s" if pause else "no pause"
        )
        paused = (PAUSE_START, PAUSE_START + pause) if pause else None
        self.figure = table_size_over_time(sim, retention=r["retention_s"], title=title, paused=paused)
        self.summary.value = (
            f"peak <b>{r['peak_rows']}</b> rows ({r['peak_kb']} kB of payload), "
            f"<b>{r['pruned']}</b> pruned, the paused subscription lost "
            f"<b>{r.get('lost_paused', 0)}</b> firings"
        )
        _show(self.output, self.figure)  # into the widget's state: drawn from there, saved or live
        return self.result

    def _ipython_display_(self) -> None:
        display(self.widget)


def prune_control(**kwargs) -> PruneControl:
    """Build a :class:`PruneControl` (its keyword arguments are the defaults)."""
    return PruneControl(**kwargs)
