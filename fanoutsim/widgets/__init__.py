"""Interactive controls for the notebooks (ipywidgets).

Each control re-runs a seeded simulation and redraws; its bounds are the
values the engine accepts, so a slider cannot be set to something that would
raise. Executed headless (as nbval does), a control shows its default state.
One module per notebook subject; import the builders from here.
"""

from fanoutsim.designs.reactor.widgets.latency import LatencyExplorer, latency_explorer  # noqa: E402
from fanoutsim.designs.reactor.widgets.sweep import SweepExplorer, sweep_explorer  # noqa: E402

__all__ = ["LatencyExplorer", "latency_explorer", "SweepExplorer", "sweep_explorer"]
from fanoutsim.designs.reactor.widgets.prune import PruneControl, prune_control  # noqa: E402

__all__ += ["PruneControl", "prune_control"]
from fanoutsim.designs.reactor.widgets.live import LiveView  # noqa: E402

__all__ += ["LiveView"]
