"""Figures of a sweep (:func:`fanoutsim.sweep`): latency and DB load against the
poll interval, backlog against the firing rate, and a recommendation.

Each takes the sweep's DataFrame; points are means over seeds, shaded with
the seeds' range below five seeds and with 95% confidence intervals from five
on (:func:`fanoutsim.analysis.seed_summary`, ``spread="auto"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from fanoutsim.designs.reactor.analysis.sweep import seed_summary
from fanoutsim.kernel.plotting import STYLE, THEORY_COLOR, Labels, mark_empty, new_figure, one_axes, plain_log, style

__all__ = ["latency_vs_interval", "polls_vs_interval", "backlog_vs_rate", "recommendation_chart", "save_sweep_figures"]

P, B = "reactor_poll_interval", "reactor_poll_batch_limit"
_MARKERS = ("o", "s", "^", "D", "v")
_BEHIND = "#d62728"  # the shade of settings that fall behind


def _colors() -> list[str]:
    return STYLE["axes.prop_cycle"].by_key()["color"]


def _path_label(column: str) -> str:
    """``fire_to_dispatch`` -> ``fire \u2192 dispatch``."""
    return column.replace("_", " ").replace("fire to", "fire \u2192")


def _log_x_ticks(ax: Axes, xs: np.ndarray) -> None:
    """A log x axis ticked at the swept values, written plainly."""
    ax.set_xscale("log")
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.xaxis.set_minor_locator(NullLocator())


def _need(df: pd.DataFrame, *cols: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise KeyError(
            f"the sweep has no column(s) {', '.join(map(repr, missing))}: sweep over "
            f"them (grid keys) first; columns: {', '.join(df.columns)}"
        )


def latency_vs_interval(
    df: pd.DataFrame,
    column: str = "fire_to_dispatch",
    *,
    ax: Axes | None = None,
    theory: bool = True,
    fig=None,
    knees: Mapping[int, float] | None = None,
) -> Figure:
    """p50 (solid) and p99 (dashed) of ``column`` (``fire_to_dispatch`` or
    ``fire_to_claim``) against the poll interval, shaded over seeds (their
    range, or 95% intervals from five seeds on); log-log, labelled in plain numbers. One panel per batch limit
    (small multiples with shared axes: no batch limit's line hides under
    another's), in ``fig`` (a Figure or SubFigure) or a new figure; or, given
    ``ax``, every batch limit in that one axes. ``theory`` draws the uniform
    poll wait's p50 = P/2 and p99 = 0.99 P in every panel. ``knees`` maps a
    batch limit to the poll interval past which the busiest stream outruns it
    (:func:`~fanoutsim.designs.reactor.analysis.sweep.knee_interval`): a
    dashed line in that batch limit's colour, the intervals past it shaded
    (the backlog grows without bound there), and a note saying so; or the
    note alone, saying where it lies, when it is outside the swept intervals."""
    _need(df, P)
    by = [P] + ([B] if B in df.columns else [])
    stats = seed_summary(df, by, [f"{column}_p50_s", f"{column}_p99_s"], spread="auto")
    label = _path_label(column)
    title = f"{label[0].upper()}{label[1:]} latency vs poll interval"
    batches = sorted(stats[B].unique()) if B in stats.columns and len(stats) else [None]
    with style():
        if ax is not None:
            fig, axes = ax.figure, [ax] * len(batches)
            ax.set_title(title)
        else:
            if fig is None:
                fig = new_figure((max(8.0, 3.4 * len(batches)), 4.2))
            axes = list(np.atleast_1d(fig.subplots(1, len(batches), sharex=True, sharey=True, squeeze=False)[0]))
            fig.suptitle(title, fontweight="bold")
        for a in set(axes):
            a.set_xlabel("poll interval P (s)")
        axes[0].set_ylabel(f"{label} (s)")
        if stats.empty:
            mark_empty(axes[0], "runs")
            return fig
        floor = _latency_floor(stats, column)
        for i, (b, a) in enumerate(zip(batches, axes)):
            g = stats if b is None else stats[stats[B] == b]
            if ax is None and b is not None:
                a.set_title(f"batch limit {b}", fontsize=10)
            _latency_lines(a, g, column, b, color=_colors()[i % len(_colors())], floor=floor, band=i == 0 or ax is None)
        xs = np.array(sorted(stats[P].unique()), dtype=float)
        for a in dict.fromkeys(axes):
            if theory:
                a.plot(xs, xs / 2, color=THEORY_COLOR, linestyle=":", linewidth=1.2, label="theory p50 = P/2", zorder=1)
                a.plot(
                    xs,
                    0.99 * xs,
                    color=THEORY_COLOR,
                    linestyle="-.",
                    linewidth=1.0,
                    label="theory p99 = 0.99 P",
                    zorder=1,
                )
            _log_x_ticks(a, xs)
        for i, (b, a) in enumerate(zip(batches, axes)):
            if knees and b in knees:
                _knee(a, float(knees[b]), b, xs, color=_colors()[i % len(_colors())], shade=ax is None)
        for a in dict.fromkeys(axes):
            a.set_yscale("log")
            a.set_ylim(bottom=floor)
            plain_log(a, "y")
            a.legend(loc="upper left", ncols=2 if ax is not None else 1)
    return fig


def _latency_floor(stats: pd.DataFrame, column: str) -> float:
    """Half the smallest positive mean: a log axis shows no interval below 0."""
    means = stats[[f"{column}_p50_s", f"{column}_p99_s"]].to_numpy(dtype=float)
    positive = means[np.isfinite(means) & (means > 0)]
    return float(positive.min()) / 2 if positive.size else 1e-3


def _latency_lines(a: Axes, g: pd.DataFrame, column: str, b, *, color: str, floor: float, band: bool) -> None:
    """One batch limit's p50 and p99 with their seed intervals shaded; ``band``:
    the p99 band carries the legend's entry for every band (after the lines')."""
    name = f"batch {b}" if b is not None else "runs"
    seeds = int(g["seeds"].max()) if "seeds" in g.columns and len(g) else 0
    for q, ls in (("p50", "-"), ("p99", "--")):
        m = f"{column}_{q}_s"
        a.plot(g[P], g[m], linestyle=ls, marker="o", markersize=3.5, color=color, label=f"{name} {q}", zorder=3)
        a.fill_between(
            g[P],
            g[f"{m}_lo"].clip(lower=floor),
            g[f"{m}_hi"].clip(lower=floor),
            color=color,
            alpha=0.15,
            linewidth=0,
            label=_band_label(g, seeds) if band and q == "p99" and seeds > 1 else None,
        )


def _band_label(stats: pd.DataFrame, seeds: int) -> str:
    """What a shaded band is: the seeds' range, or a 95% interval (``seed_summary``'s spread)."""
    if stats.attrs.get("spread") == "range":
        return f"lowest to highest of {seeds} seeds"
    return f"95% interval over {seeds} seeds"


def _knee(a: Axes, knee: float, b, xs: np.ndarray, *, color: str, shade: bool) -> None:
    """Batch limit ``b``'s knee in its panel, said in place (bottom right): when
    it falls among the swept intervals a dashed line, and the intervals past it
    shaded; else where it lies."""
    if not math.isfinite(knee):
        return
    lo, hi = float(xs.min()), float(xs.max())
    if lo <= knee <= hi:
        a.axvline(knee, color=color, linestyle=(0, (5, 3)), linewidth=1.2, gid="knee")
        if shade:
            left, right = a.get_xlim()
            a.axvspan(knee, right, color=_BEHIND, alpha=0.07, linewidth=0, gid="past the knee")
            a.set_xlim(left, right)
        per_poll = f"over {b} firings" if b is not None else "more firings than"
        note = f"knee: past P = {knee:.2g} s,\n{per_poll} a poll:\nthe backlog grows"
    else:
        note = f"knee at P = {knee:.2g} s: every swept interval " + ("keeps up" if knee > hi else "falls behind")
    a.text(0.98, 0.03, note, transform=a.transAxes, ha="right", va="bottom", fontsize=8, color=color)


def polls_vs_interval(df: pd.DataFrame, subscriptions: int | None = None, *, ax: Axes | None = None) -> Figure:
    """Poll queries per second (the poll loop's DB load) against the poll
    interval; with ``subscriptions`` the theory ``subscriptions / P``. Log-log."""
    _need(df, P, "polls_per_s")
    stats = seed_summary(df, [P], ["polls_per_s"])
    return one_axes(
        ax,
        None if stats.empty else partial(_poll_load, stats=stats, subscriptions=subscriptions),
        Labels("DB load of the poll loop vs poll interval", "poll interval P (s)", "poll queries per second (1/s)"),
    )


def _poll_load(ax: Axes, *, stats: pd.DataFrame, subscriptions: int | None) -> None:
    """:func:`polls_vs_interval`'s line and theory, of seed means with rows."""
    ax.plot(stats[P], stats["polls_per_s"], marker="o", color=_colors()[0], label="measured (mean over runs)")
    if subscriptions:
        xs = np.array(sorted(stats[P].unique()), dtype=float)
        ax.plot(
            xs,
            subscriptions / xs,
            color=THEORY_COLOR,
            linestyle="--",
            linewidth=1.2,
            label=f"theory: {subscriptions} subscriptions / P",
        )
    _log_x_ticks(ax, np.array(sorted(stats[P].unique()), dtype=float))
    ax.set_yscale("log")
    plain_log(ax, "y")
    ax.legend(loc="upper right")


def backlog_vs_rate(df: pd.DataFrame, knees: Mapping[int, float] | None = None, *, ax: Axes | None = None) -> Figure:
    """Backlog at the end of the run against the total firing rate, one colour
    per batch limit (mean over seeds, shaded with their range, or a 95%
    interval from five seeds on); ``knees`` maps a batch
    limit to its knee rate (:func:`fanoutsim.analysis.knee_rate`), drawn as a
    dashed vertical line: past it, the backlog grows without bound. The y axis
    is linear up to 10 firings and logarithmic above."""
    _need(df, "rate", "backlog")
    by = ["rate"] + ([B] if B in df.columns else [])
    stats = seed_summary(df, by, ["backlog"], spread="auto")
    title = "Backlog vs firing rate"
    if P in df.columns and df[P].nunique() == 1:
        title += f" at P = {df[P].iloc[0]:g} s"
    return one_axes(
        ax,
        None if stats.empty else partial(_backlog_lines, stats=stats, knees=knees),
        Labels(title, "total firing rate (firings / s)", "backlog at the end (firings)"),
    )


def _backlog_lines(ax: Axes, *, stats: pd.DataFrame, knees: Mapping[int, float] | None) -> None:
    """:func:`backlog_vs_rate`'s lines and knees, of seed means with rows."""
    groups = stats.groupby(B, sort=True) if B in stats.columns else [(None, stats)]
    for i, (b, g) in enumerate(groups):
        c = _colors()[i % len(_colors())]
        ax.plot(
            g["rate"],
            g["backlog"],
            marker="o",
            markersize=3.5,
            color=c,
            label=f"batch {b}" if b is not None else "runs",
        )
        seeds = int(g["seeds"].max())
        band = _band_label(stats, seeds) if i == 0 and seeds > 1 else None
        ax.fill_between(
            g["rate"], g["backlog_lo"].clip(lower=0), g["backlog_hi"], color=c, alpha=0.15, linewidth=0, label=band
        )
        if knees and b in knees and math.isfinite(knees[b]):
            ax.axvline(
                knees[b], color=c, linestyle="--", linewidth=1.0, label=f"knee, batch {b}: {knees[b]:.3g} firings/s"
            )
    _log_x_ticks(ax, np.array(sorted(stats["rate"].unique()), dtype=float))
    ax.set_yscale("symlog", linthresh=10)  # bounded backlogs (a few firings) and runaway ones, together
    ax.set_ylim(bottom=0)
    plain_log(ax, "y")
    top = ax.get_ylim()[1]
    # 0, then the decades from 10: a tick at 1 sits on top of the 0 (symlog is linear below 10)
    ax.set_yticks([0.0, *(10.0**k for k in range(1, 13) if 10.0**k <= top)])
    ax.set_ylim(0, top)
    ax.legend(loc="upper left")


def recommendation_chart(
    df: pd.DataFrame,
    recommended: Mapping | None = None,
    *,
    p99_budget_s: float | None = None,
    max_backlog: float | None = None,
    latency: str = "fire_to_dispatch_p99_s",
    ax: Axes | None = None,
) -> Figure:
    """The trade-off: DB load (poll queries per second) against p99 latency,
    one point per setting (poll interval, and batch limit when swept): the
    mean over seeds, at its worst over any other grid key. Hollow
    markers: a setting whose backlog exceeded ``max_backlog`` in some seed
    (it does not keep up). The dotted line is the latency budget; the star is
    ``recommended`` (:func:`fanoutsim.analysis.recommend`)."""
    from fanoutsim.designs.reactor.analysis.sweep import setting_table

    _need(df, P, "polls_per_s", latency, "backlog", "valid")
    table = setting_table(df, latency=latency)[0]  # each setting at its worst over the other keys, as recommended
    column, stat = latency.removesuffix("_s").rsplit("_", 1)
    draw = partial(
        _recommendation,
        table=table,
        recommended=recommended,
        p99_budget_s=p99_budget_s,
        max_backlog=max_backlog,
        latency=latency,
    )
    return one_axes(
        ax,
        None if table.empty else draw,
        Labels(
            "Which poll interval? DB load against p99 latency",
            "poll queries per second: DB load (1/s)",
            f"{stat} {_path_label(column)} (s)",
        ),
    )


def _recommendation(
    ax: Axes,
    *,
    table: pd.DataFrame,
    recommended: Mapping | None,
    p99_budget_s: float | None,
    max_backlog: float | None,
    latency: str,
) -> None:
    """:func:`recommendation_chart`'s points, budget line and star, of a table with rows."""
    _plot_settings(ax, table, max_backlog)
    for _, row in table.drop_duplicates(P).iterrows():
        ax.annotate(
            f"P={row[P]:g}s",
            (row["polls_per_s"], row["latency"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
            color="#555555",
        )
    if p99_budget_s is not None:
        ax.axhline(
            p99_budget_s, color=THEORY_COLOR, linestyle=":", linewidth=1.2, label=f"p99 budget {p99_budget_s:g} s"
        )
    if recommended is not None:
        ax.scatter(
            [recommended["polls_per_s"]],
            [recommended[latency]],
            marker="*",
            s=420,
            facecolors="none",
            edgecolors="#d62728",
            linewidths=1.6,
            zorder=10,
            label=f"recommended: P = {recommended[P]:g} s" + (f", batch {recommended[B]}" if B in recommended else ""),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax, "both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)  # beside the axes: it covers no point


def _plot_settings(ax: Axes, table: pd.DataFrame, max_backlog: float | None) -> None:
    """One marker shape and colour per batch limit: filled where the setting
    keeps up, hollow where its backlog exceeded ``max_backlog``."""
    batches = sorted(table[B].unique()) if B in table.columns else [None]
    for i, b in enumerate(batches):
        c = _colors()[i % len(_colors())]
        g = table if b is None else table[table[B] == b]
        keeps_up = g["backlog_max"] <= (max_backlog if max_backlog is not None else math.inf)
        name = f"batch {b}" if b is not None else "runs"
        # one marker and size per batch limit, the first drawn largest: where two
        # settings give the same point, the later one shows inside the earlier one
        marker, size = _MARKERS[i % len(_MARKERS)], 150.0 / (1 + i) ** 1.2
        ax.scatter(
            g.loc[keeps_up, "polls_per_s"],
            g.loc[keeps_up, "latency"],
            color=c,
            s=size,
            marker=marker,
            label=f"{name}, keeps up",
            zorder=3 + i,
            edgecolors="white",
            linewidths=0.6,
        )
        if (~keeps_up).any():
            ax.scatter(
                g.loc[~keeps_up, "polls_per_s"],
                g.loc[~keeps_up, "latency"],
                facecolors="none",
                edgecolors=c,
                s=size,
                marker=marker,
                label=f"{name}, backlog grows",
                zorder=3 + i,
            )


def save_sweep_figures(df: pd.DataFrame, scenario, out, p99_budget_s: float | None = None) -> list:
    """The figures of a reactor sweep that its grid allows, written into
    ``out``: with the poll interval, latency and DB load against it, and the
    recommendation chart (the setting
    :func:`~fanoutsim.designs.reactor.analysis.sweep.recommendation_line`
    picks within ``p99_budget_s``, default 1.5 s, starred); with ``rate`` over
    several values, the backlog against it (with the knees when the poll interval
    is one value). The latency panels mark each batch limit's knee when the sweep
    runs at one total rate.
    Otherwise p99 latency and backlog against the first numeric grid key."""
    from fanoutsim.designs.reactor.analysis.sweep import (
        RECOMMEND_MAX_BACKLOG,
        RECOMMEND_P99_BUDGET_S,
        knee_rate,
        recommend,
    )
    from fanoutsim.kernel.plotting import save_figures, save_sweep_lines

    budget = RECOMMEND_P99_BUDGET_S if p99_budget_s is None else p99_budget_s
    figures = {}
    if P in df.columns:
        figures["sweep_latency_vs_interval.png"] = latency_vs_interval(df, knees=_interval_knees(df, scenario))
        subs = len(getattr(scenario, "subscriptions", ()) or ()) or None
        figures["sweep_polls_vs_interval.png"] = polls_vs_interval(df, subscriptions=subs)
        try:
            rec = recommend(df, budget, max_backlog=RECOMMEND_MAX_BACKLOG)
        except ValueError:
            rec = None
        figures["sweep_recommendation.png"] = recommendation_chart(
            df, rec, p99_budget_s=budget, max_backlog=RECOMMEND_MAX_BACKLOG
        )
    if "rate" in df.columns and df["rate"].nunique() > 1:  # one rate: a figure of one point per line
        knees = None
        if (P not in df.columns or df[P].nunique() == 1) and getattr(scenario, "workloads", None):
            p = float(df[P].iloc[0]) if P in df.columns else None
            batches = sorted(df[B].unique()) if B in df.columns else [None]
            try:
                knees = {b: knee_rate(scenario, None if b is None else int(b), p) for b in batches}
            except (ValueError, ZeroDivisionError, AttributeError):
                knees = None
        figures["sweep_backlog_vs_rate.png"] = backlog_vs_rate(df, knees)
    if figures:
        return save_figures(figures, out)
    return save_sweep_lines(df, ("fire_to_dispatch_p99_s", "backlog", "lost"), out)


def _interval_knees(df: pd.DataFrame, scenario) -> dict | None:
    """Each swept batch limit's knee as a poll interval, at the sweep's one
    total rate (its ``rate`` key's one value, or the scenario's own); None
    when the sweep varies the rate or the scenario has no workload to read."""
    from fanoutsim.designs.reactor.analysis.sweep import knee_interval

    if not getattr(scenario, "workloads", None) or ("rate" in df.columns and df["rate"].nunique() != 1):
        return None
    rate = float(df["rate"].iloc[0]) if "rate" in df.columns else None
    batches = sorted(df[B].unique()) if B in df.columns else [None]
    try:
        return {b: knee_interval(scenario, None if b is None else int(b), rate) for b in batches}
    except (ValueError, ZeroDivisionError, AttributeError):
        return None
