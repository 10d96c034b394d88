"""Leased durable consumers, drawn (:mod:`fanoutsim.designs.leases.analysis`): duplicates
against the lease length, what an orphaned lease costs after a crash,
head-of-line against RiffDB's rule side by side, checkpoints per partition,
throughput against the in-flight limit, the events table under the retention
fence, how attempts ended — and the figures ``fanoutsim run`` writes for a
leases run (:func:`save_leases_figures`)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fanoutsim.designs.leases import analysis as _a
from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.kernel.plotting import (
    MAX_SERIES,
    THEORY_COLOR,
    Labels,
    downtimes,
    extra_deliveries,
    figure_axes,
    mark_downtimes,
    mark_duplicates,
    mark_empty,
    need_columns,
    new_figure,
    one_axes,
    plain_log,
    save_figures,
    steps_over_time,
    style,
    time_span,
    time_unit,
)

__all__ = [
    "duplicates_vs_lease",
    "lease_tradeoff",
    "orders_side_by_side",
    "poison_side_by_side",
    "checkpoint_progress",
    "waiting_heatmap",
    "consumers_behind",
    "inflight_throughput",
    "events_table_size",
    "lease_outcomes",
    "delivery_per_consumer",
    "save_leases_figures",
    "LEASES_FIGURES",
]

_DEAD = dict(marker="X", s=80, color="#d62728", zorder=4)
_FAIL = dict(marker="|", s=60, color="#7f7f7f", zorder=3)


def duplicates_vs_lease(summary: pd.DataFrame, *, ax: Axes | None = None, theory: bool = True) -> Figure:
    """Duplicates per 1000 events against ``lease_seconds``, one line per work-time
    law (``lease_sweep`` (``notebooks/experiments/leases.py``)); dashed, what
    P(work > lease) predicts. Symlog y: zero stays on the axis."""
    need_columns(
        summary,
        ("law", "lease_seconds", "dups_per_1000", "theory_per_1000"),
        "lease_sweep or lease_table (the leases lessons' experiments)",
    )
    draw = partial(_lease_lines, summary=summary, theory=theory)
    return one_axes(ax, None if summary.empty else draw, Labels("duplicates fall as the lease outgrows the work"))


def _lease_lines(ax: Axes, *, summary: pd.DataFrame, theory: bool) -> None:
    """:func:`duplicates_vs_lease`'s lines, of a summary with rows."""
    mean = float(summary["mean_work"].iloc[0]) if "mean_work" in summary else None
    for i, (law, g) in enumerate(summary.groupby("law", sort=False)):
        g = g.sort_values("lease_seconds")
        ax.plot(g["lease_seconds"], g["dups_per_1000"], marker="o", color=f"C{i}", label=f"{law} work (run)")
        if theory:
            ax.plot(
                g["lease_seconds"],
                g["theory_per_1000"],
                linestyle="--",
                linewidth=1,
                color=f"C{i}",
                label=f"{law}: expected from P(work > lease)",
            )
    if mean is not None:
        ax.axvline(mean, color=THEORY_COLOR, linestyle=":", linewidth=1, label=f"mean work {mean:g} s")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    plain_log(ax, "y")
    ax.set_xlabel("lease_seconds")
    ax.set_ylabel("duplicates per 1000 events (symlog)")
    ax.legend(loc="upper right", ncol=2)


def lease_tradeoff(crashes: pd.DataFrame, *, ax: Axes | None = None) -> Figure:
    """The price of a long lease, from ``crash_sweep`` (``notebooks/experiments/leases.py``):
    how long a crash's orphaned leases held their events (mean and worst) and
    the worst publish → acknowledged latency, against ``lease_seconds`` (log-log;
    the lease itself dotted), with duplicates per 1000 events on the right axis."""
    need_columns(
        crashes,
        ("lease_seconds", "hold_mean_s", "hold_max_s", "max_s", "dups_per_1000"),
        "crash_sweep (the leases lessons' experiments)",
    )
    title = "a long lease: few duplicates, but a crash stalls leased events until expiry"
    return one_axes(ax, None if crashes.empty else partial(_tradeoff_lines, crashes=crashes), Labels(title))


def _tradeoff_lines(ax: Axes, *, crashes: pd.DataFrame) -> None:
    """:func:`lease_tradeoff`'s lines on two y axes, of crashes with rows."""
    c = crashes.sort_values("lease_seconds")
    x = c["lease_seconds"]
    ax.plot(x, x, color=THEORY_COLOR, linestyle=":", linewidth=1, label="the lease (s)")
    ax.plot(x, c["hold_max_s"], marker="^", color="C3", label="orphaned lease held its event: worst")
    ax.plot(x, c["hold_mean_s"], marker="o", color="C1", label="orphaned lease held its event: mean")
    ax.plot(x, c["max_s"], marker="s", color="C0", label="worst publish \u2192 ack latency")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=float(max(c["max_s"].max(), x.max())) * 8)
    plain_log(ax, "both")
    ax.set_xlabel("lease_seconds (log)")
    ax.set_ylabel("seconds (log)")
    right = ax.twinx()
    right.plot(x, c["dups_per_1000"], marker="D", color="C2", linestyle="--", label="duplicates per 1000 events")
    right.set_yscale("symlog", linthresh=1.0)
    right.set_ylim(0, max(float(c["dups_per_1000"].max()), 1.0) * 8)
    plain_log(right, "y")
    right.set_ylabel("duplicates per 1000 events (symlog)", color="C2")
    right.grid(False)
    right.spines["right"].set_visible(True)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = right.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center", ncol=2)


_ORDER_STYLE = {"head_of_line": dict(color="C1", hatch="//"), "riffdb": dict(color="C0")}


def orders_side_by_side(comparison: pd.DataFrame) -> Figure:
    """Head-of-line against RiffDB's rule, per partition, from
    :func:`~fanoutsim.designs.leases.analysis.order_comparison`: acks per second,
    duplicates, and p99 publish → ack latency (log), one bar per rule."""
    need_columns(
        comparison,
        ("order", "partition", "acks_per_s", "duplicates", "p99_s"),
        "fanoutsim.analysis.leases.order_comparison",
    )
    with style():
        fig = new_figure((12.0, 4.2))
        axes = fig.subplots(1, 3)
        panels = (
            ("acks_per_s", "acks per second"),
            ("duplicates", "duplicates"),
            ("p99_s", "p99 publish \u2192 ack (s, log)"),
        )
        per = comparison[comparison["partition"] != "all"]
        if per.empty:
            for ax in axes:
                mark_empty(ax, "runs")
            return fig
        parts = sorted(per["partition"].unique())
        orders = list(dict.fromkeys(per["order"]))
        x = np.arange(len(parts))
        width = 0.8 / len(orders)
        for ax, (col, label) in zip(axes, panels):
            for j, order in enumerate(orders):
                g = per[per["order"] == order].set_index("partition").reindex(parts)
                vals = g[col].to_numpy(dtype=float)
                bars = ax.bar(
                    x - 0.4 + width * (j + 0.5),
                    vals,
                    width=width,
                    label=order.replace("_", "-"),
                    **_ORDER_STYLE.get(order, {}),
                )
                for b, v in zip(bars, vals):
                    if np.isfinite(v):
                        ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
            ax.set_xticks(x, parts)
            ax.set_title(label)
            if col == "p99_s":
                ax.set_yscale("log")
                plain_log(ax, "y")
            else:
                ax.set_ylim(0, max(float(per[col].max()), 1.0) * 1.25)
        axes[0].legend(loc="upper left")
    return fig


def poison_side_by_side(runs: Mapping, consumer: str = "worker") -> Figure:
    """A poison event under each rule (``{order: sim}`` of
    ``poison_run`` (``notebooks/experiments/leases.py``)), one column per rule: the
    checkpoint per partition on top, the events waiting (published, not yet
    acknowledged or dead-lettered) below."""
    with style():
        fig = new_figure((12.0, 8.0))
        axes = fig.subplots(2, max(len(runs), 1), squeeze=False)
        # one colour scale for every run: the same shade is the same number of events
        top = max([float(_waiting_grid(sim, consumer, 150)[2].max()) for sim in runs.values()] + [1.0])
        for j, (order, sim) in enumerate(runs.items()):
            name = str(order).replace("_", "-")
            checkpoint_progress(sim, consumer, title=f"{name}: checkpoint per partition", ax=axes[0][j])
            waiting_heatmap(sim, consumer, title=f"{name}: events waiting per partition", vmax=top, ax=axes[1][j])
        if not runs:
            mark_empty(axes[0][0], "runs")
    return fig


def _partitions(sim, consumer: str) -> list[str]:
    ev = _a.published_events(sim)
    return sorted(ev["partition"].unique())


# the run's events drawn as vertical lines on a checkpoint figure: a backup (what a
# restore from it goes back to), a restore, a crash
_EVENT_LINES = (
    ("backup", "backup taken", dict(color="#555555", linestyle="-.")),
    ("restored", "restore (new incarnation)", dict(color="C4", linestyle="--")),
    ("crashed", "crash", dict(color="#d62728", linestyle=":")),
)


def checkpoint_progress(
    sim, consumer: str | None = None, *, lag: bool = False, title: str | None = None, ax: Axes | None = None
) -> Figure:
    """One consumer's checkpoint per partition over virtual time (step lines, the
    seq it has moved past), dead letters as red crosses, failed attempts (nacks,
    expiries) as grey ticks, backups, restores and crashes as vertical lines. With
    ``lag=True``: the events of each partition waiting (published, not yet
    acknowledged or dead-lettered) as a heatmap, :func:`waiting_heatmap`."""
    if consumer is None:
        names = sorted(sim.consumers()["consumer"]) if len(sim.consumers()) else []
        consumer = names[0] if names else None
    if lag:
        return waiting_heatmap(sim, consumer, title=title, ax=ax)
    with style():
        fig, ax = figure_axes(
            ax,
            title=title or f"{consumer}: checkpoint per partition",
            xlabel="virtual time (s)",
            ylabel="checkpoint (seq moved past)",
        )
        if consumer is None:
            mark_empty(ax, "consumers")
            return fig
        path = _a.checkpoint_path(sim, consumer)
        if path.empty:
            mark_empty(ax, "checkpoint moves")
            return fig
        pub = _a.published_events(sim)
        t = sim.trace()
        rel = _a._rel(sim, t["t"])
        fails = t[(t["consumer"] == consumer) & t["kind"].isin(["nacked", "expired"])]
        fail_s = _a._rel(sim, fails["t"])
        dead = t[(t["consumer"] == consumer) & (t["kind"] == "dead_lettered")]
        dead = pd.DataFrame(
            {
                "t_s": _a._rel(sim, dead["t"]),
                "partition": dead["partition"].to_numpy(),
                "seq": pub.set_index("event_id")["seq"].reindex(dead["event_id"]).to_numpy(),
            }
        )
        parts = _partitions(sim, consumer)
        shown = parts[:MAX_SERIES]
        end = float(sim.now)
        for i, part in enumerate(shown):
            p = path[path["partition"] == part]
            color = f"C{i % 10}"
            ts = np.concatenate([[0.0], p["t_s"].to_numpy(), [end]])
            ys = np.concatenate([[0], p["seq"].to_numpy(), [p["seq"].iloc[-1] if len(p) else 0]])
            ax.step(ts, ys, where="post", color=color, linewidth=1.3, label=part)
            f = fails[fails["partition"] == part]
            if len(f):
                fs = fail_s[(fails["partition"] == part).to_numpy()]
                k = np.searchsorted(p["t_s"].to_numpy(), fs, side="right") - 1
                level = np.where(k >= 0, p["seq"].to_numpy()[np.maximum(k, 0)], 0)
                ax.scatter(fs, level, **_FAIL, label=f"{part}: failed attempt (nack / expiry)")
            dl = dead[dead["partition"] == part]
            if len(dl):
                ax.scatter(dl["t_s"], dl["seq"], **_DEAD, label=f"{part}: dead letter")
        for kind, label, style_ in _EVENT_LINES:
            when = rel[(t["kind"] == kind).to_numpy()]
            for j, w in enumerate(when):
                ax.axvline(w, linewidth=1.2, label=label if j == 0 else None, **style_)
        if len(parts) > len(shown):
            ax.text(
                0.99,
                0.01,
                f"{len(shown)} of {len(parts)} partitions shown",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                color="#777777",
            )
        last = float(path["t_s"].max())
        ax.set_xlim(0, min(end, last + 0.1 * max(last, 1.0)))
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", ncol=2)
    return fig


def _waiting_grid(sim, consumer: str, bins: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Partitions, bin edges (to a little past the last event done) and, per
    partition and bin, the most events waiting (published, not yet
    acknowledged or dead-lettered, past the checkpoint or not) at any instant
    of the bin: exact, however short a wait."""
    pub = _a.published_events(sim)
    t = sim.trace()
    done = t[(t["consumer"] == consumer) & t["kind"].isin(["acked", "dead_lettered"])].drop_duplicates("event_id")
    done_s, done_part = _a._rel(sim, done["t"]), done["partition"].to_numpy()
    last = float(done_s.max()) if len(done_s) else float(sim.now)
    end = min(float(sim.now), last + 0.1 * max(last, 1.0)) or 1.0
    bins = max(10, min(bins, int(end / 2.0)))  # stretches of 2 s or more: no stripes between arrivals
    edges = np.linspace(0.0, end, bins + 1)
    parts = sorted(pub["partition"].unique())
    high = np.zeros((len(parts), bins))
    for r, part in enumerate(parts):
        ups = pub.loc[pub["partition"] == part, "published_s"].to_numpy()
        downs = done_s[done_part == part]
        ts = np.concatenate([ups, downs])
        step = np.concatenate([np.ones(len(ups)), -np.ones(len(downs))])
        order = np.lexsort((step, ts))  # at one instant, a done before a publish: no spurious peak
        ts, level = ts[order], np.cumsum(step[order])
        inside = ts < end
        k = np.clip(np.searchsorted(edges, ts[inside], side="right") - 1, 0, bins - 1)
        np.maximum.at(high[r], k, level[inside])
        j = np.searchsorted(ts, edges[:-1], side="right") - 1  # the level each bin starts at
        start = np.where(j >= 0, level[np.maximum(j, 0)], 0) if len(level) else np.zeros(bins)
        high[r] = np.maximum(high[r], start)
    return parts, edges, high


def waiting_heatmap(
    sim,
    consumer: str | None = None,
    *,
    bins: int = 150,
    title: str | None = None,
    vmax: float | None = None,
    ax: Axes | None = None,
) -> Figure:
    """One consumer's events waiting per partition (published, not yet
    acknowledged or dead-lettered) over virtual time, as a heatmap: one row per
    partition, one column per stretch of time, coloured by the most events
    waiting in the stretch (white: none; ``vmax`` fixes the darkest, to compare
    runs); dead letters as red crosses. Rows do not hide each other as lines
    do, however many partitions."""
    from matplotlib.colors import LinearSegmentedColormap, PowerNorm
    from matplotlib.ticker import MaxNLocator

    if consumer is None:
        names = sorted(sim.consumers()["consumer"]) if len(sim.consumers()) else []
        consumer = names[0] if names else None
    with style():
        fig, ax = figure_axes(ax)
        ax.set_title(title or f"{consumer}: events waiting per partition")
        ax.set_xlabel("virtual time (s)")
        if consumer is None or _a.published_events(sim).empty:
            mark_empty(ax, "events")
            return fig
        parts, edges, high = _waiting_grid(sim, consumer, bins)
        cmap = LinearSegmentedColormap.from_list("waiting", ["#ffffff", "#9ecae1", "#3182bd", "#08306b"])
        top = vmax if vmax is not None else max(float(high.max()), 1.0)
        image = ax.imshow(
            high,
            aspect="auto",
            cmap=cmap,
            interpolation="nearest",
            norm=PowerNorm(0.5, vmin=0, vmax=top),
            extent=(0.0, edges[-1], len(parts) - 0.5, -0.5),
        )
        t = sim.trace()
        dead = t[(t["consumer"] == consumer) & (t["kind"] == "dead_lettered")]
        if len(dead):
            row = {p: i for i, p in enumerate(parts)}
            ax.scatter(_a._rel(sim, dead["t"]), [row[p] for p in dead["partition"]], **_DEAD, label="dead letter")
            ax.legend(loc="lower right", framealpha=0.8, frameon=True)
        labels = [f"{p} (max {int(h.max())})" for p, h in zip(parts, high)]
        ax.set_yticks(range(len(parts)), labels if len(parts) <= 16 else [""] * len(parts))
        ax.set_ylabel("partition")
        ax.grid(False)
        bar = fig.colorbar(image, ax=ax, label="events waiting (most in the stretch)", pad=0.01)
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    return fig


def _behind_checkpoint(sim, consumer: str, grid: np.ndarray) -> np.ndarray:
    """Events published and not yet passed by ``consumer``'s checkpoint, over
    all partitions, at each time of ``grid``: what its retention fence holds."""
    pub = _a.published_events(sim)
    path = _a.checkpoint_path(sim, consumer)
    total = np.zeros(len(grid))
    for part in pub["partition"].unique():
        seqs = np.sort(pub.loc[pub["partition"] == part, "seq"].to_numpy())
        times = np.sort(pub.loc[pub["partition"] == part, "published_s"].to_numpy())
        p = path[path["partition"] == part]
        k = np.searchsorted(p["t_s"].to_numpy(), grid, side="right") - 1
        checkpoint = np.where(k >= 0, p["seq"].to_numpy()[np.maximum(k, 0)] if len(p) else 0, 0)
        total += np.searchsorted(times, grid, side="right") - np.searchsorted(seqs, checkpoint, side="right")
    return np.maximum(total, 0)


def consumers_behind(sim, consumers=None, *, title: str | None = None, faults: bool = True, report=None) -> Figure:
    """Per consumer, one panel (shared axes: small multiples), the events
    published and not yet passed by its checkpoint over virtual time — what
    holds history back from retention — with when it started and when it was
    retired; dead letters as red crosses. With ``faults``, each crash of the
    node (a dotted line, its downtime shaded) and each duplicate the checker
    finds (a marker on its consumer's line, one shape per cause; ``report``:
    the checker's report of this run, if already at hand)."""
    t = sim.trace()
    if consumers is None:  # in the order they started, the retired ones too
        started = t.loc[t["kind"] == "consumer_start", "consumer"].dropna()
        current = sorted(sim.consumers()["consumer"]) if len(sim.consumers()) else []
        names = list(dict.fromkeys([*started, *current]))[:MAX_SERIES]
    else:
        names = list(consumers)[:MAX_SERIES]
    with style():
        fig = new_figure((8.0, 1.2 + 1.5 * max(len(names), 1)))
        axes = list(fig.subplots(max(len(names), 1), 1, sharex=True, sharey=True, squeeze=False)[:, 0])
        fig.suptitle(
            title or "events past each consumer's checkpoint: the history its retention fence keeps", fontweight="bold"
        )
        axes[-1].set_xlabel("virtual time (s)")
        if not names:
            mark_empty(axes[0], "consumers")
            return fig
        grid = np.linspace(0.0, float(sim.now), 600)
        top = 1.0
        lines = {}
        for i, (name, a) in enumerate(zip(names, axes)):
            mine = t[t["consumer"] == name]
            started = _a._rel(sim, mine.loc[mine["kind"] == "consumer_start", "t"])
            retired = _a._rel(sim, mine.loc[mine["kind"] == "retired", "t"])
            y = lines[name] = _behind_checkpoint(sim, name, grid)
            live = np.ones(len(grid), dtype=bool)
            if len(started):
                live &= grid >= started.min()
            if len(retired):
                live &= grid < retired.min()
            a.fill_between(grid, np.where(live, y, np.nan), step=None, color=f"C{i}", alpha=0.35, linewidth=0)
            a.plot(grid, np.where(live, y, np.nan), color=f"C{i}", linewidth=1.2)
            note = [f"up to {int(np.nanmax(np.where(live, y, np.nan))) if live.any() else 0} events"]
            if len(started) and started.min() > 0:
                a.axvline(started.min(), color="C2", linestyle="--", linewidth=1)
                note.append(f"joined at {started.min():g} s")
            if len(retired):
                a.axvline(retired.min(), color="C3", linestyle="--", linewidth=1)
                note.append(f"retired at {retired.min():g} s: its fence released")
            dead = mine[mine["kind"] == "dead_lettered"]
            if len(dead):
                at = _a._rel(sim, dead["t"])
                a.scatter(at, np.interp(at, grid, y), **{**_DEAD, "s": 40}, label="dead letter")
                a.legend(loc="upper right", fontsize=7)
                note.append(f"{len(dead)} dead letters")
            a.set_title(f"{name}: " + ", ".join(note), fontsize=9, loc="left")
            a.set_ylabel("events")
            top = max(top, float(np.nanmax(np.where(live, y, 0.0))))
        axes[0].set_ylim(0, top * 1.12)
        if faults:
            _mark_faults(sim, t, grid, lines, axes, report)
    return fig


def _mark_faults(sim, t: pd.DataFrame, grid: np.ndarray, lines: dict, axes: list, report) -> None:
    """:func:`consumers_behind`'s crashes (in every panel; in the first one's
    legend) and duplicates (each on its consumer's line); a legend per panel
    that has something to name."""
    downs = downtimes(t, sim.start_us)
    for j, a in enumerate(axes):
        mark_downtimes(a, downs, who="node", legend=j == 0)
    if getattr(sim, "traced", True):
        checked = report if report is not None else _check(sim)
        dups = extra_deliveries(t, checked.duplicates, ["consumer", "event_id"], sim.start_us)
        for (name, y), a in zip(lines.items(), axes):
            mine = dups[dups["consumer"] == name]
            when = mine["t_s"].to_numpy(dtype=float)
            mark_duplicates(a, when, np.interp(when, grid, y), mine["cause"].to_numpy(), every=dups["cause"])
    for a in axes:
        if a.get_legend_handles_labels()[0]:
            a.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)  # beside the panel: over no line


def _check(sim):
    from fanoutsim.designs.leases.checker import check

    return check(sim)


def inflight_throughput(
    summary: pd.DataFrame,
    *,
    latency: pd.DataFrame | None = None,
    title: str | None = None,
    compare: tuple[str, pd.DataFrame] | None = None,
) -> Figure:
    """Two panels from ``inflight_sweep`` (``notebooks/experiments/leases.py``): acks per
    second against the in-flight limit, one line per partition count (counts
    whose runs gave the same numbers share one line, labelled as identical), with
    slots / (work + half a poll) dashed; and p50 publish → ack latency (log) of
    ``latency`` (a sweep at a lower offered rate; by default ``summary``'s own).
    ``title``, if given, heads the figure (say, the leasing rule); ``compare``,
    ``(name, sweep)``: another rule's acks per second on the left, dotted, hollow
    markers, each partition count in its colour."""
    need_columns(
        summary, ("partitions", "in_flight", "throughput", "theory"), "inflight_sweep (the leases lessons' experiments)"
    )
    latency = summary if latency is None else latency
    with style():
        fig = new_figure((11.0, 4.5))
        left, right = fig.subplots(1, 2)
        if title:
            fig.suptitle(title)
        offered = f" ({summary['offered'].iloc[0]:g} events/s offered)" if "offered" in summary and len(summary) else ""
        left.set_title(f"acks per second{offered}")
        right.set_title(
            f"latency at {latency['offered'].iloc[0]:g} events/s offered"
            if "offered" in latency and len(latency)
            else "latency"
        )
        if summary.empty:
            mark_empty(left, "runs")
            mark_empty(right, "runs")
            return fig
        counts = sorted(set(summary["partitions"]) | set(latency["partitions"]))
        if compare is not None:
            _compare_lines(left, *compare, counts)
        for parts, g in _coinciding(summary, ("throughput", "theory")):
            color, name = f"C{counts.index(parts[0]) % 10}", _partitions_label(parts)  # a count's colour in both
            left.plot(g["in_flight"], g["throughput"], marker="o", color=color, label=name)
            left.plot(g["in_flight"], g["theory"], linestyle="--", linewidth=1, color=color)
        shared = _coinciding(latency, ("p50_s", "p99_s"))
        for parts, h in shared:
            color, name = f"C{counts.index(parts[0]) % 10}", _partitions_label(parts)
            right.plot(h["in_flight"], h["p50_s"], marker="o", color=color, label=f"{name}, p50")
            right.plot(h["in_flight"], h["p99_s"], marker="^", linestyle=":", color=color, label=f"{name}, p99")
        left.plot([], [], linestyle="--", color=THEORY_COLOR, linewidth=1, label="slots / (work + poll / 2)")
        left.set_xlabel("in_flight_limit")
        left.set_ylabel("acks per second")
        left.set_ylim(bottom=0)
        left.legend(loc="upper left")
        right.set_xlabel("in_flight_limit")
        right.set_ylabel("publish \u2192 ack latency (s, log)")
        right.set_yscale("log")
        right.set_ylim(top=float(np.nanmax(latency["p99_s"])) * 3)  # room for the legend, not more
        plain_log(right, "y")
        right.legend(loc="upper right", ncol=min(3, len(shared)))
    return fig


def _compare_lines(ax: Axes, name: str, other: pd.DataFrame, counts: list) -> None:
    """Another rule's acks per second: dotted, hollow markers, a partition count's colour."""
    for parts, g in _coinciding(other, ("throughput",)):
        color = f"C{counts.index(parts[0]) % 10}" if parts[0] in counts else THEORY_COLOR
        ax.plot(
            g["in_flight"],
            g["throughput"],
            marker="o",
            markerfacecolor="white",
            linestyle=":",
            color=color,
            label=f"{_partitions_label(parts)}, {name}",
        )


def _coinciding(summary: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple[list, pd.DataFrame]]:
    """The rows of each partition count, by in-flight limit; counts whose
    ``columns`` are the same at every in-flight limit share one entry (their
    counts, and the first one's rows): lines drawn on top of each other would
    show only the last, and a legend naming three would promise three."""
    shared: list[tuple[list, pd.DataFrame]] = []
    for parts, g in summary.groupby("partitions"):
        g = g.sort_values("in_flight")
        values = g[["in_flight", *columns]].to_numpy(dtype=float)
        for counts, first in shared:
            other = first[["in_flight", *columns]].to_numpy(dtype=float)
            if other.shape == values.shape and np.allclose(other, values, rtol=1e-9, atol=0, equal_nan=True):
                counts.append(parts)
                break
        else:
            shared.append(([parts], g))
    return shared


def _partitions_label(counts: list) -> str:
    """``1 partition``, ``4 partitions``, or ``1, 4 and 8 partitions (identical)``."""
    if len(counts) == 1:
        return f"{counts[0]} partition{'s' if counts[0] != 1 else ''}"
    listed = ", ".join(str(c) for c in counts[:-1]) + f" and {counts[-1]}"
    return f"{listed} partitions (identical)"


def events_table_size(
    runs, *, at: float | None = None, retention: float | None = None, title: str | None = None, ax: Axes | None = None
) -> Figure:
    """Rows in the ``events`` table over virtual time
    (:func:`~fanoutsim.designs.leases.analysis.events_size`), one step line per run:
    ``runs`` is a LeaseSimulation or ``{label: LeaseSimulation}``; ``at`` marks
    the retire / resume, ``retention`` the window."""
    if not isinstance(runs, Mapping):
        runs = {"events": runs}
    marks = [(at, "--", f"retire / resume at {at:g} s")] if at is not None else []
    if retention is not None:
        marks.append((retention, ":", f"retention {retention:g} s"))
    return steps_over_time(
        {label: _a.events_size(sim) for label, sim in runs.items()},
        "rows",
        title=title or "rows in the events table: the fence holds history",
        ylabel="events retained (rows)",
        ax=ax,
        first_on_top=True,
        marks=marks,
    )


def lease_outcomes(sim, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """How every attempt ended, per consumer (:func:`~fanoutsim.designs.leases.analysis.ack_outcomes`):
    one horizontal bar per outcome that happened (log counts), one colour per consumer."""
    out = _a.ack_outcomes(sim)
    kinds = [k for k in _a.OUTCOME_KINDS if k in out and out[k].sum() > 0]
    draw = None if out.empty or not kinds else partial(_outcome_bars, out=out, kinds=kinds)
    return one_axes(ax, draw, Labels(title or "how the attempts ended"), none_of="attempts")


def _outcome_bars(ax: Axes, *, out: pd.DataFrame, kinds: list[str]) -> None:
    """:func:`lease_outcomes`'s bars, of outcomes some attempts had (``kinds``)."""
    names = out["consumer"].tolist()[:MAX_SERIES]
    height = min(0.8 / len(names), 0.5)
    y = np.arange(len(kinds))
    counts = {name: out.loc[out["consumer"] == name, kinds].iloc[0].to_numpy(dtype=float) for name in names}
    for k in range(len(kinds)):  # each group centred on its tick: only the bars that are there
        there = [(i, name) for i, name in enumerate(names) if counts[name][k] > 0]
        for j, (i, name) in enumerate(there):
            v = counts[name][k]
            pos = y[k] - height * len(there) / 2 + height * (j + 0.5)
            ax.barh(pos, v, height=height, color=f"C{i}")
            ax.text(v, pos, f" {int(v)}", va="center", fontsize=8)
    for i, name in enumerate(names):  # one legend entry per consumer, in order
        ax.barh([np.nan], [np.nan], color=f"C{i}", label=name)
    ax.set_yticks(y, kinds)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(0.8, float(out[kinds].to_numpy().max()) * 3)
    plain_log(ax, "x")
    ax.set_xlabel("attempts (log)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the axes: it covers no bar


_DELIVERY_COLUMNS = ("delivered", "duplicates", "dead_lettered", "lost", "pending")


def delivery_per_consumer(sim, *, checked=None, ax: Axes | None = None) -> Figure:
    """Per consumer, the checker's verdict (:func:`~fanoutsim.designs.leases.checker.check_leases`):
    events delivered, duplicates split by cause, dead-lettered, lost and pending."""
    checked = check_leases(sim) if checked is None else checked
    per = checked.per_consumer
    draw = None if per.empty else partial(_delivery_bars, checked=checked)
    return one_axes(ax, draw, Labels("delivered, duplicated, dead-lettered and lost per consumer"), none_of="consumers")


def _delivery_bars(ax: Axes, *, checked) -> None:
    """:func:`delivery_per_consumer`'s bars, of a verdict with consumers."""
    per = checked.per_consumer
    dups = checked.duplicates
    causes = sorted(dups["cause"].unique()) if len(dups) else []
    cats = ["delivered", *[f"duplicates: {c}" for c in causes], "dead_lettered", "lost", "pending"]
    names = per["consumer"].tolist()[:MAX_SERIES]
    width = 0.8 / len(cats)
    x = np.arange(len(names))
    for j, cat in enumerate(cats):
        if cat.startswith("duplicates: "):
            cause = cat.split(": ", 1)[1]
            vals = [int(((dups["consumer"] == n) & (dups["cause"] == cause)).sum()) for n in names]
        else:
            vals = [int(per.loc[per["consumer"] == n, cat].iloc[0]) for n in names]
        bars = ax.bar(x - 0.4 + width * (j + 0.5), vals, width=width, color=f"C{j}", label=cat)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, str(v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, names)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(0, max(float(per[list(_DELIVERY_COLUMNS)].to_numpy().max()), 1.0) * 20)
    plain_log(ax, "y")
    ax.set_ylabel("events (symlog)")
    ax.legend(loc="upper right", ncol=2)


#: The file names :func:`save_leases_figures` writes, in order.
LEASES_FIGURES = ("leases_delivery.png", "leases_checkpoints.png", "leases_outcomes.png")


def save_leases_figures(sim, out_dir, *, checked=None) -> list[Path]:
    """Write the standard figures of a leases run as PNGs into ``out_dir``
    (:data:`LEASES_FIGURES`: delivered / duplicates per consumer, the events
    past each consumer's checkpoint — one panel each —, how the attempts
    ended); their paths. ``checked``: the checker's report of this run, if the caller
    has it (else the run is checked here, once for both figures that need it)."""
    checked = check_leases(sim) if checked is None else checked
    figures = (
        delivery_per_consumer(sim, checked=checked),
        consumers_behind(sim, report=checked),
        lease_outcomes(sim),
    )
    return save_figures(dict(zip(LEASES_FIGURES, figures)), out_dir)


def identity_log_growth(
    runs, *, deploy_at: float, retire_at: float | None = None, retention: float | None = None, ax: Axes | None = None
) -> Figure:
    """Rows in the ``events`` table over virtual time for runs of
    ``identity_run`` (``notebooks/experiments/leases.py``) (``{label: sim}``):
    the module change at ``deploy_at``, the old identity's retirement at
    ``retire_at`` (in the runs that retire it) marked."""
    fig = events_table_size(
        runs, retention=retention, ax=ax, title="a forgotten old identity holds history behind its fence"
    )
    ax = fig.axes[0]
    unit, _ = time_unit(time_span(_a.events_size(sim) for sim in runs.values()))
    with style():
        ax.axvline(
            deploy_at / unit, color="C2", linestyle="--", linewidth=1, label=f"module v2 deployed at {deploy_at:g} s"
        )
        if retire_at is not None:
            ax.axvline(
                retire_at / unit,
                color="C3",
                linestyle="--",
                linewidth=1,
                label=f"v1 identity retired at {retire_at:g} s",
            )
        ax.legend(loc="upper left")
    return fig


def save_report_figures(sim, out_dir, *, checked=None) -> list[Path]:
    """A run's figures, under the package template's name: :func:`save_leases_figures`'s,
    looked up when called (so replacing that function replaces these)."""
    return list(save_leases_figures(sim, out_dir, checked=checked))
