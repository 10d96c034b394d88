"""Figures of faults and what they cost: duplicates per crash, the firings table
under retention, a watermark's path with the firings it lost, and what each
watermark strategy closes and costs (:mod:`fanoutsim.designs.reactor.analysis.faults`)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from fanoutsim.designs.reactor.analysis.faults import CRASH_MODES, firing_outcomes, table_size, watermark_path
from fanoutsim.kernel.plotting import (
    STYLE,
    THEORY_COLOR,
    Labels,
    mark_empty,
    need_columns,
    one_axes,
    plain_log,
    plain_number,
    steps_over_time,
    time_span,
)

__all__ = ["duplicates_per_crash", "table_size_over_time", "firing_timeline", "hole_losses", "strategy_latency"]


def _colors() -> list[str]:
    return STYLE["axes.prop_cycle"].by_key()["color"]


_CRASH_LABELS = Labels(
    "Duplicate deliveries per crash", "reactor_poll_batch_limit L (firings)", "duplicates per crash (executions)"
)


def duplicates_per_crash(df: pd.DataFrame, *, ax: Axes | None = None, theory: bool = True) -> Figure:
    """Duplicates per crash against the batch limit, one line per
    ``watermark_commit`` mode, from :func:`fanoutsim.analysis.crash_sweep`.
    ``theory``: ``(L + 1) / 2`` (a crash at a uniformly random position of a
    full batch) for ``per_batch`` and 1 for ``per_firing``."""
    need_columns(df, ("batch_limit", "watermark_commit", "duplicates_per_crash"), "fanoutsim.analysis.crash_sweep")
    return one_axes(ax, None if df.empty else partial(_crash_lines, df=df, theory=theory), _CRASH_LABELS)


def _crash_lines(ax: Axes, *, df: pd.DataFrame, theory: bool) -> None:
    """:func:`duplicates_per_crash`'s lines, of a frame with rows."""
    modes = [m for m in CRASH_MODES if m in set(df["watermark_commit"])]
    modes += sorted(set(df["watermark_commit"]) - set(modes))
    markers = {"per_firing": "o", "per_batch": "s", "atomic": "^"}
    for i, mode in enumerate(modes):
        g = df[df["watermark_commit"] == mode].sort_values("batch_limit")
        ax.plot(
            g["batch_limit"],
            g["duplicates_per_crash"],
            marker=markers.get(mode, "o"),
            markersize=5,
            color=_colors()[i % len(_colors())],
            label=f"watermark_commit = {mode!r}",
        )
    if theory:
        xs = np.array(sorted(df["batch_limit"].unique()), dtype=float)
        ax.plot(
            xs,
            (xs + 1) / 2,
            color=THEORY_COLOR,
            linestyle=":",
            linewidth=1.2,
            label="theory per_batch: (L + 1) / 2",
        )
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=-0.3)  # a mode at 0 (atomic) drawn above the axis, not on it
    xs = np.array(sorted(df["batch_limit"].unique()), dtype=float)
    ax.set_xticks(xs, [plain_number(x) for x in xs])  # ticked at the batch limits run
    ax.xaxis.set_minor_locator(NullLocator())
    plain_log(ax, "y")
    ax.set_yticks([t for t in ax.get_yticks() if t >= 0])
    crashes = sorted(set(df["crashes"])) if "crashes" in df else []
    # a point is the mean over its crashes: a few, so (L + 1) / 2 is met only roughly
    ax.legend(loc="upper left", title=f"each point: {crashes[0]} crashes" if len(crashes) == 1 else None)


def table_size_over_time(
    runs,
    *,
    ax: Axes | None = None,
    retention: float | None = None,
    title: str | None = None,
    paused: tuple[float, float] | None = None,
) -> Figure:
    """Rows retained in ``reactor_firings`` against virtual time
    (:func:`fanoutsim.analysis.table_size`), one step line per run (runs with
    the same steps share one): ``runs`` is a Simulation or ``{label:
    Simulation}``. ``retention`` (s) marks when the first prune can delete
    anything; ``paused``, ``(from, to)`` seconds, shades a subscription's pause."""
    if not isinstance(runs, Mapping):
        runs = {"reactor_firings": runs}
    sizes = {label: table_size(sim) for label, sim in runs.items()}
    marks = []
    if retention is not None and retention < time_span(sizes.values()):  # a mark past the run's end says nothing
        marks.append((retention, ":", f"t = retention ({retention:g} s): the first rows may go"))
    spans = [(*paused, "subscription paused")] if paused is not None else []
    return steps_over_time(
        sizes,
        "retained",
        title=title or "Rows in reactor_firings over time",
        ylabel="firings retained (rows)",
        ax=ax,
        linewidth=1.4,
        marks=marks,
        spans=spans,
    )


_OUTCOME_STYLE = {
    # hollow circles, so that a lost firing sharing a delivered one's point (a tie) shows inside it
    "delivered": dict(marker="o", facecolors="none", edgecolors="#1f77b4", s=45, label="delivered"),
    "duplicated": dict(marker="D", facecolors="none", edgecolors="#ff7f0e", s=45, label="delivered more than once"),
    "pending": dict(marker="o", facecolors="none", edgecolors="#7f7f7f", s=45, label="pending"),
    "filtered": dict(marker=".", color="#bbbbbb", s=18, label="filtered out"),
    "lost": dict(marker="X", color="#d62728", s=45, label="lost"),
}


def firing_timeline(
    sim,
    subscription: str | None = None,
    *,
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    report=None,
) -> Figure:
    """One subscription's watermark against its stream's firings, in virtual
    seconds: each firing is a point at (when its row became visible, its
    ``fired_at``); the watermark is the step line of its value over time
    (one colour per poller). A firing that becomes visible *below* the line
    (or on it, under the strict ``>``) is read by no later poll: lost, marked
    with a red cross. ``window``: the time range shown; by default 12 s around
    the first lost firing, or the first 20 s."""
    path = watermark_path(sim, subscription)
    out = firing_outcomes(sim, subscription, report=report)
    out = out[out["outcome"] != "never_logged"]
    lost = out[out["outcome"] == "lost"]
    if window is None:
        if len(lost):
            centre = float(lost["visible_s"].iloc[0])
            window = (max(0.0, centre - 6.0), centre + 6.0)
        else:
            window = (0.0, min(20.0, max(float(sim.now), 1.0)))
    return one_axes(
        ax,
        partial(_timeline, path=path, out=out, window=window),
        Labels(
            title or "Watermark and firings",
            "virtual time: when the row became visible (s)",
            "fired_at (s since start)",
        ),
    )


def _timeline(ax: Axes, *, path: pd.DataFrame, out: pd.DataFrame, window: tuple[float, float]) -> None:
    """:func:`firing_timeline`'s drawing: the firings visible in ``window`` and the watermark over it."""
    lo, hi = window
    shown = out[(out["visible_s"] >= lo) & (out["visible_s"] <= hi)]
    _plot_watermark(ax, path, lo, hi)
    if shown.empty:
        mark_empty(ax, "firings in this window")
    _plot_outcomes(ax, shown)
    ax.plot(
        [lo, hi],
        [lo, hi],
        color="#cccccc",
        linewidth=0.8,
        linestyle="--",
        zorder=1,
        label="fired_at = visible time",
    )
    ax.set_xlim(lo, hi)
    ys = pd.concat([shown["fired_s"], path.loc[(path["t_s"] >= lo) & (path["t_s"] <= hi), "watermark_s"]])
    if len(ys):
        pad = max(0.5, 0.05 * float(ys.max() - ys.min()))
        ax.set_ylim(float(ys.min()) - pad, float(ys.max()) + pad)
    ax.legend(loc="upper left", fontsize=7)


def _plot_watermark(ax: Axes, path: pd.DataFrame, lo: float, hi: float) -> None:
    """The watermark's step line over ``[lo, hi]`` (from its value at ``lo``)
    and, when several pollers move it, each one's moves and how often it moved
    back."""
    before = path[path["t_s"] < lo]
    inside = path[(path["t_s"] >= lo) & (path["t_s"] <= hi)]
    xs = ([lo] if len(before) else []) + inside["t_s"].tolist()
    ys = ([float(before["watermark_s"].iloc[-1])] if len(before) else []) + inside["watermark_s"].tolist()
    if ys:
        ax.step(
            xs + [hi],
            ys + [ys[-1]],
            where="post",
            linewidth=1.3,
            color=THEORY_COLOR,
            label="watermark (last_seen_fired_at)",
        )
    actors = sorted(set(path["actor"]))
    if len(actors) > 1:  # several pollers move the same watermark: whose move was which
        for i, actor in enumerate(actors):
            moves = inside[inside["actor"] == actor]
            ax.scatter(
                moves["t_s"],
                moves["watermark_s"],
                marker="_",
                s=60,
                zorder=2,
                color=["#9467bd", "#8c564b", "#e377c2"][i % 3],
                label=f"moved by {actor}",
            )
        rewinds = int(inside["rewind"].sum())
        if rewinds:
            ax.plot([], [], " ", label=f"watermark moved back {rewinds}x")


def _plot_outcomes(ax: Axes, shown: pd.DataFrame) -> None:
    """Each firing as a point (when visible, its ``fired_at``) styled by its
    outcome; the lost ones labelled with their causes."""
    for outcome, kw in _OUTCOME_STYLE.items():
        pts = shown[shown["outcome"] == outcome]
        if len(pts):
            kw = dict(kw)
            label = kw.pop("label")
            if outcome == "lost":
                causes = ", ".join(sorted(set(pts["cause"].dropna())))
                label = f"lost ({causes})" if causes else label
            ax.scatter(
                pts["visible_s"],
                pts["fired_s"],
                label=f"{label}: {len(pts)}",
                zorder=3,
                linewidths=1.2 if outcome != "lost" else 0.3,
                **kw,
            )


def hole_losses(df: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """Firings lost per hole under each watermark strategy, as grouped bars,
    from :func:`fanoutsim.analysis.hole_matrix` (extra deliveries, where any,
    are written on the bar)."""
    need_columns(df, ("hole", "watermark", "lost"), "fanoutsim.analysis.hole_matrix")
    return one_axes(
        ax,
        None if df.empty else partial(_hole_bars, df=df),
        Labels("Firings lost, per hole and watermark strategy", "hole", "firings lost (firings)"),
    )


def _hole_bars(ax: Axes, *, df: pd.DataFrame) -> None:
    """:func:`hole_losses`'s bars, of a frame with rows."""
    holes = list(dict.fromkeys(df["hole"]))
    strategies = list(dict.fromkeys(df["watermark"]))
    width = 0.8 / max(len(strategies), 1)
    x = np.arange(len(holes))
    top = float(df["lost"].max()) or 1.0
    for i, strategy in enumerate(strategies):
        g = df[df["watermark"] == strategy].set_index("hole").reindex(holes)
        xs = x + (i - (len(strategies) - 1) / 2) * width
        ax.bar(
            xs,
            g["lost"].fillna(0),
            width * 0.95,
            color=_colors()[i % len(_colors())],
            label=f"watermark = {strategy!r}",
        )
        for xi, (lost, extra) in zip(xs, zip(g["lost"], g.get("extra_deliveries", pd.Series(0, index=g.index)))):
            text = f"{int(lost)}" + (f"\n(+{int(extra)}\ndup)" if extra and extra > 0 else "")
            ax.text(xi, (lost or 0) + top * 0.02, text, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, holes)
    ax.set_ylim(0, top * 1.3)
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper right")


_STRATEGY_LABELS = Labels(
    "What each watermark strategy costs: fire \u2192 dispatch latency",
    "fire \u2192 dispatch (ms)",
    "watermark strategy",
)


def strategy_latency(df: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """Mean and p99 fire -> dispatch latency per watermark strategy (ms), from
    rows with ``watermark``, ``dispatch_mean_s`` and ``dispatch_p99_s``
    (:func:`fanoutsim.analysis.hole_matrix` over ``["none"]``)."""
    need_columns(df, ("watermark", "dispatch_mean_s", "dispatch_p99_s"), "fanoutsim.analysis.hole_matrix")
    return one_axes(ax, None if df.empty else partial(_strategy_bars, df=df), _STRATEGY_LABELS, figsize=(8.0, 3.2))


def _strategy_bars(ax: Axes, *, df: pd.DataFrame) -> None:
    """:func:`strategy_latency`'s bars, of a frame with rows."""
    y = np.arange(len(df))
    ax.barh(y, df["dispatch_mean_s"] * 1000, color=_colors()[0], alpha=0.85, label="mean")
    ax.scatter(df["dispatch_p99_s"] * 1000, y, color="#d62728", marker="|", s=200, zorder=3, label="p99")
    for yi, m, p in zip(y, df["dispatch_mean_s"], df["dispatch_p99_s"]):
        ax.text(p * 1000 + 60, yi, f"mean {m * 1000:.0f} ms, p99 {p * 1000:.0f} ms", va="center", fontsize=8)
    ax.set_yticks(y, [repr(w) for w in df["watermark"]])
    ax.invert_yaxis()
    ax.set_xlim(0, float(df["dispatch_p99_s"].max()) * 1000 * 1.45)
    ax.grid(axis="y", visible=False)
    ax.legend(loc="upper right")
