"""A live view of a running wall-clock runtime, for notebooks.

``LiveView(rt)`` shows what a :class:`~fanoutsim.Realtime` in this kernel is
doing — firings, executions by status, watermark lag per subscription and
fire-to-dispatch latency — and redraws every ``every`` seconds from a
background thread, so the notebook stays responsive. ``LiveView("run.duckdb")``
watches a ``fanoutsim serve`` process instead, through its status endpoint
(the server owns the file; numbers only, no tables)::

    view = LiveView(rt, every=1.0)
    view.start()     # display(view.widget) to see it; view.stop() when done
"""

from __future__ import annotations

import html
import threading

import ipywidgets as widgets
from matplotlib.figure import Figure

from fanoutsim.designs.reactor.analysis.delivery import latency_frame, watermarks
from fanoutsim.designs.reactor.analysis.lag import WATERMARK_LAG
from fanoutsim.designs.reactor.widgets.latency import _show
from fanoutsim.kernel.plotting import figure_axes, style
from fanoutsim.kernel.validate import is_real


class LiveView:
    """A live view of ``source`` — a :class:`~fanoutsim.Realtime` in this kernel,
    or the path of a database a ``fanoutsim serve`` process owns (read through its
    status endpoint: numbers only) — redrawn every ``every`` seconds by a
    background thread once started. ``widget`` is what to display; ``last`` the
    last numbers drawn and ``history`` the ``(seconds, firings, executions)`` seen.
    An ``every`` that is not a positive number of seconds raises ValueError."""

    def __init__(self, source, every: float = 1.0) -> None:
        if not is_real(every) or not every > 0:
            raise ValueError(f"every must be a positive number of seconds, got {every!r}")
        self.source = source
        self.every = float(every)
        self.summary = widgets.HTML()
        self.plot = widgets.Output()
        self.widget = widgets.VBox([self.summary, self.plot])
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.history: list[tuple[float, int, int]] = []  # (seconds, firings, executions)
        self.last: dict = {}

    def snapshot(self) -> dict:
        """The numbers the view shows, now."""
        if isinstance(self.source, str):
            from fanoutsim.designs.reactor.serve import status

            st = status(self.source)
            fired = sum(v for k, v in st["metrics"].items() if k.startswith("fanoutsim_reactor_firings_total"))
            return {
                "seconds": None,
                "firings": int(fired),
                "executions": st["executions"],
                "lag": st["watermark_lag_s"],
                "p50_ms": None,
            }
        rt = self.source
        ex = rt.executions()
        lat = latency_frame(rt)["fire_to_dispatch"] if len(ex) else []
        lag = {f"{w['reactor']}->{w['workflow']}@{w['tenant']}": w["watermark_lag_s"] for w in watermarks(rt)}
        return {
            "seconds": rt.now,
            "firings": len(rt.firings()),
            "executions": ex["status"].value_counts().to_dict() if len(ex) else {},
            "lag": lag,
            "p50_ms": float(lat.median() * 1e3) if len(lat) else None,
        }

    def refresh(self) -> dict:
        """Redraw once; returns the snapshot drawn."""
        snap = self.snapshot()
        self.last = snap
        total = sum(snap["executions"].values())
        if snap["seconds"] is not None:
            self.history.append((snap["seconds"], snap["firings"], total))
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{'-' if v is None else f'{v:.2f} s'}</td></tr>"
            for k, v in snap["lag"].items()
        )
        p50 = "-" if snap["p50_ms"] is None else f"{snap['p50_ms']:.0f} ms"
        self.summary.value = (
            f"<b>firings</b> {snap['firings']} &nbsp; <b>executions</b> "
            + ", ".join(f"{k} {v}" for k, v in sorted(snap["executions"].items()))
            + f" &nbsp; <b>fire&rarr;dispatch p50</b> {p50}"
            + f"<table><tr><th>subscription</th><th>watermark lag</th></tr>{rows}</table>"
            + f"<small>watermark lag: {html.escape(WATERMARK_LAG)}</small>"
        )
        if len(self.history) > 1:
            # into the widget's state; with no IPython (a script) kept there only, never printed
            _show(self.plot, self.figure())
        return snap

    def figure(self) -> Figure:
        """Firings and executions over the wall time seen so far, one line each."""
        with style():
            fig, ax = figure_axes(None, figsize=(7.0, 3.0))
            t = [h[0] for h in self.history]
            ax.plot(t, [h[1] for h in self.history], label="firings")
            ax.plot(t, [h[2] for h in self.history], label="executions")
            ax.set_xlabel("wall time since start (s)")
            ax.set_ylabel("rows")
            ax.set_title("a running engine, live")
            ax.legend(loc="upper left")
        return fig

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.refresh()
            except Exception as exc:  # the runtime closed under us: say so and stop
                self.summary.value = f"<i>live view stopped: {html.escape(str(exc))}</i>"
                return

    def start(self) -> LiveView:
        """Draw once now, then redraw every ``every`` seconds in a background thread
        (a second start while it runs does nothing); returns the view. If the source
        goes away (a closed runtime), the view says so and stops redrawing."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self.refresh()
            self._thread = threading.Thread(target=self._loop, name="fanoutsim-live", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop redrawing, and wait (at most ``every`` + 5 seconds) for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.every + 5)
