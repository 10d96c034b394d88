"""The live view outside a notebook: it draws into its widget only, and prints nothing."""

from __future__ import annotations

import fanoutsim as fs
from fanoutsim.widgets import LiveView


def test_a_live_view_outside_a_notebook_prints_nothing(capfd):
    rt = fs.Realtime(store="memory")
    try:
        view = LiveView(rt, every=60.0)
        view.start()
        view.refresh()  # a second point: the figure is drawn
        view.stop()
        assert capfd.readouterr().out == ""
        assert len(view.history) == 2 and view.figure().axes[0].get_title() == "a running engine, live"
    finally:
        rt.close()
