"""The house style and the helpers every figure shares: ``style()``,
``new_figure``, ``figure_axes`` (a new figure, or the caller's axes),
``one_axes`` (a figure's whole frame: style, axes, :class:`Labels` and the empty case),
``mark_empty``, ``time_unit``, ``steps_over_time`` (a table's rows over
virtual time, one step line per run), ``downtimes``, ``run_downtimes`` and
``mark_downtimes`` (a run's crashes, read from its trace and drawn on a time axis),
``extra_deliveries`` and ``mark_duplicates`` (when each duplicate a checker
found happened, and a marker there per cause), ``save_figures``,
``sweep_lines`` (any sweep column against a grid key) and the shared colours
and limits."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, Unpack, overload

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.rcsetup import cycler  # what mpl.cycler is: the validating one, typed here
from matplotlib.typing import RcKeyType

from fanoutsim.kernel.sweeppick import grid_keys  # noqa: F401  (a name of this module too, as before)

#: The house style: the Matplotlib settings every figure is drawn with (:func:`style`).
STYLE: dict[RcKeyType, Any] = {
    "figure.figsize": (8.0, 4.5),
    "figure.dpi": 100,
    "savefig.dpi": 120,
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.grid": True,
    "axes.axisbelow": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "grid.alpha": 0.35,
    "grid.linestyle": "-",
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.prop_cycle": cycler(
        color=[
            "#1f77b4",
            "#ff7f0e",
            "#2ca02c",
            "#d62728",
            "#9467bd",
            "#8c564b",
            "#e377c2",
            "#7f7f7f",
            "#bcbd22",
            "#17becf",
        ]
    ),
}
THEORY_COLOR = "#333333"
LATENCY_LABELS = {
    "fire_to_dispatch": "fire \u2192 dispatch",
    "fire_to_claim": "fire \u2192 claim",
}
MAX_SERIES = 8


@contextmanager
def style() -> Iterator[None]:
    """The house rcParams, for the duration of a ``with`` block."""
    with mpl.rc_context(STYLE):
        yield


def new_figure(figsize: tuple[float, float] | None = None) -> Figure:
    """A figure in the house size (or ``figsize``) and resolution, laid out
    by matplotlib's constrained layout; its axes take the house style when
    they are added inside :func:`style`."""
    return Figure(figsize=figsize or STYLE["figure.figsize"], dpi=STYLE["figure.dpi"], layout="constrained")


class _LabelKeywords(TypedDict, total=False):
    """:func:`figure_axes`'s title and axis labels: the same in both overloads."""

    title: str | None
    xlabel: str | None
    ylabel: str | None


# the overloads differ in ``ax`` alone: a new figure is a Figure, a caller's axes may be a subfigure's
@overload
def figure_axes(
    ax: None, figsize: tuple[float, float] | None = None, **labels: Unpack[_LabelKeywords]
) -> tuple[Figure, Axes]: ...
@overload
def figure_axes(
    ax: Axes | None, figsize: tuple[float, float] | None = None, **labels: Unpack[_LabelKeywords]
) -> tuple[Figure | SubFigure, Axes]: ...


def figure_axes(
    ax: Axes | None,
    figsize: tuple[float, float] | None = None,
    *,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
) -> tuple[Figure | SubFigure, Axes]:
    """``(figure, axes)``: the caller's ``ax`` and its figure, or a new figure
    in the house size with one axes; with the title and axis labels given."""
    if ax is None:
        ax = new_figure(figsize).add_subplot()
    for text, setter in ((title, ax.set_title), (xlabel, ax.set_xlabel), (ylabel, ax.set_ylabel)):
        if text is not None:
            setter(text)
    return ax.figure, ax


class Labels(NamedTuple):
    """A figure's title and axis labels, as data (None: that one left unset)."""

    title: str | None = None
    xlabel: str | None = None
    ylabel: str | None = None


NO_LABELS = Labels()


def one_axes(
    ax: Axes | None,
    draw: Callable[[Axes], object] | None,
    labels: Labels = NO_LABELS,
    *,
    none_of: str = "runs",
    figsize: tuple[float, float] | None = None,
) -> Figure | SubFigure:
    """A figure of one axes, in the house style: :func:`figure_axes`'s (the
    caller's ``ax`` or a new figure, with the ``labels``), drawn by
    ``draw(ax)``; ``draw`` None means there is nothing to show, and the axes
    say "no <none_of>" instead. The figure (``ax``'s, when given)."""
    with style():
        fig, ax = figure_axes(ax, figsize, title=labels.title, xlabel=labels.xlabel, ylabel=labels.ylabel)
        if draw is None:
            mark_empty(ax, none_of)
        else:
            draw(ax)
    return fig


def need_columns(df: pd.DataFrame, columns: Iterable[str], source: str) -> None:
    """Refuse, naming the first missing column and where a right frame comes
    from (``source``), a frame a figure cannot draw."""
    for column in columns:
        if column not in df.columns:
            raise KeyError(f"no column {column!r}: pass the DataFrame of {source}")


def mark_empty(ax: Axes, what: str) -> None:
    """Say "no <what>" in the middle of an axes that has nothing to show."""
    ax.text(0.5, 0.5, f"no {what}", transform=ax.transAxes, ha="center", va="center", color="#777777")


def time_unit(span_s: float) -> tuple[float, str]:
    """Seconds per unit and its name, for an x axis of virtual time."""
    if span_s > 3 * 3600:
        return 3600.0, "h"
    if span_s > 300:
        return 60.0, "min"
    return 1.0, "s"


def time_span(frames: Iterable[pd.DataFrame]) -> float:
    """The longest of the frames' last ``t_s`` (virtual seconds); 1.0 when
    there is no frame or every one ends at 0."""
    return max([float(f["t_s"].iloc[-1]) for f in frames] or [1.0]) or 1.0


def steps_over_time(
    frames: Mapping[str, pd.DataFrame],
    column: str,
    *,
    title: str,
    ylabel: str,
    ax: Axes | None = None,
    linewidth: float = 1.5,
    first_on_top: bool = False,
    marks: Iterable[tuple[float, str, str]] = (),
    spans: Iterable[tuple[float, float, str]] = (),
) -> Figure | SubFigure:
    """One step line of ``column`` against ``t_s`` per ``{label: frame}``, on
    an x axis of virtual time in the unit :func:`time_unit` picks for the
    longest (from 0 to its end), the y axis from 0. Frames with the same steps
    share one line, labelled ``a = b (identical)``: one drawn over the other
    would hide it. ``first_on_top`` draws the first frame's line over the
    later ones'. ``marks``: ``(seconds, linestyle, label)`` vertical lines in
    the theory colour; ``spans``: ``(from, to, label)`` shaded stretches of time."""
    span = time_span(frames.values())
    unit, uname = time_unit(span)

    def draw(ax: Axes) -> None:
        for start, end, label in spans:
            ax.axvspan(start / unit, end / unit, color=THEORY_COLOR, alpha=0.12, linewidth=0, label=label)
        for i, (labels, f) in enumerate(_identical_steps(frames, column)):
            # "C<i>": the house colour cycle's i-th, as rc_context(STYLE) has it
            label = " = ".join(labels) + (" (identical)" if len(labels) > 1 else "")
            line: dict[str, Any] = {"color": f"C{i}", "label": label, "linewidth": linewidth}
            if first_on_top:
                line["zorder"] = 3 - i * 0.1
            ax.step(f["t_s"] / unit, f[column], where="post", **line)
        for at, linestyle, label in marks:
            ax.axvline(at / unit, color=THEORY_COLOR, linestyle=linestyle, linewidth=1.0, label=label)
        ax.set_xlim(0, span / unit)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left")

    return one_axes(ax, draw if frames else None, Labels(title, f"virtual time ({uname})", ylabel))


def _identical_steps(frames: Mapping[str, pd.DataFrame], column: str) -> list[tuple[list[str], pd.DataFrame]]:
    """The frames by their steps (``t_s`` and ``column``), in order: the labels of
    those whose steps are the same, and the first of them."""
    groups: list[tuple[list[str], pd.DataFrame]] = []
    for label, f in frames.items():
        for labels, first in groups:
            if first["t_s"].equals(f["t_s"]) and first[column].equals(f[column]):
                labels.append(label)
                break
        else:
            groups.append(([label], f))
    return groups


class Downtime(NamedTuple):
    """One crash of a run's process, in virtual seconds since the run's start:
    when it died, when it came back (None: still down at the end) and why
    (the crash point, or ``random``, ``time``, ``manual``)."""

    crashed_s: float
    restarted_s: float | None
    why: str

    @property
    def seconds(self) -> float | None:
        """How long the process stayed down (None: it never came back)."""
        return None if self.restarted_s is None else self.restarted_s - self.crashed_s


def downtimes(trace: Any, start_us: int) -> list[Downtime]:
    """The crashes of a run, from its trace: a frame, or the recorder's columns
    (``{name: list}``), with ``t`` (epoch microseconds), ``kind`` and ``detail``:
    the ``crashed`` and ``restarted`` events every driver writes, each crash
    with the first restart after it, in time order."""
    import numpy as np

    if "kind" not in trace or not len(trace["kind"]):
        return []
    kinds = np.asarray(trace["kind"], dtype=object)
    rows = np.flatnonzero((kinds == "crashed") | (kinds == "restarted"))
    times, details = np.asarray(trace["t"], dtype=object)[rows], np.asarray(trace["detail"], dtype=object)[rows]
    out: list[Downtime] = []
    open_at: tuple[float, str] | None = None
    for t, kind, detail in zip(times, kinds[rows], details):
        at = (int(t) - start_us) / 1e6
        if kind == "crashed":
            if open_at is not None:  # down again before any restart: the first crash holds
                continue
            open_at = (at, str(detail or "crash"))
        elif open_at is not None:
            out.append(Downtime(open_at[0], at, open_at[1]))
            open_at = None
    if open_at is not None:
        out.append(Downtime(open_at[0], None, open_at[1]))
    return out


def run_downtimes(run: Any) -> list[Downtime]:
    """:func:`downtimes` of a run (a simulation, or what offers ``trace()`` and
    ``start_us``), read from the recorder's own columns when the run offers
    them (``trace_columns()``: no frame of a day's million events is built for
    a handful of crashes), else from its trace frame."""
    read = getattr(run, "trace_columns", None)
    return downtimes(read()[0] if read is not None else run.trace(), run.start_us)


CRASH_COLOR = "#d62728"


def extra_deliveries(
    trace: pd.DataFrame, duplicates: pd.DataFrame, on: list[str], start_us: int, kind: str = "delivered"
) -> pd.DataFrame:
    """When each extra delivery a checker found happened: ``duplicates`` (the
    checker's frame, one row per extra delivery: the columns ``on`` say who got
    what, ``cause`` why) against the trace's ``kind`` events of the same who and
    what: a pair's deliveries after its first, in time order, matched to its
    rows in order. Columns ``on``, ``cause`` and ``t_s`` (virtual seconds since
    the start; NaN where the trace holds no such delivery)."""
    columns = [*on, "cause", "t_s"]
    if duplicates.empty or trace.empty:
        return pd.DataFrame(columns=columns)

    def spelled(values: pd.Series) -> pd.Series:
        # one spelling of a key: a trace column of mixed rows holds objects (or floats, NaN
        # where a row has none), a checker's ints; whole floats are written as ints
        if pd.api.types.is_float_dtype(values) and (values.dropna() % 1 == 0).all():
            values = values.astype("Int64")
        return values.astype(str)

    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(**{f"_{c}": spelled(frame[c]) for c in on})

    keys = [f"_{c}" for c in on]
    dups = keyed(duplicates[[*on, "cause"]].reset_index(drop=True))
    dups["_n"] = dups.groupby(keys, sort=False).cumcount() + 1  # the 1st extra is the 2nd delivery
    events = keyed(trace.loc[trace["kind"] == kind, ["t", *on]])
    events = events[pd.MultiIndex.from_frame(events[keys]).isin(pd.MultiIndex.from_frame(dups[keys]))]
    events = events.sort_values("t", kind="stable")
    events["_n"] = events.groupby(keys, sort=False).cumcount()
    out = dups.merge(events[[*keys, "_n", "t"]], on=[*keys, "_n"], how="left", sort=False)
    out["t_s"] = (out["t"].astype(float) - start_us) / 1e6
    return out[columns]


def mark_downtimes(
    ax: Axes, downs: Iterable[Downtime], unit: float = 1.0, *, who: str = "process", legend: bool = True
) -> None:
    """Each crash on an x axis of virtual time (``unit`` seconds per tick unit):
    a dotted line at the instant it died, its downtime shaded (to the right edge
    when it never came back: set the x limits first), one legend entry
    for them all (how many, the shortest and longest downtime). The longest
    downtime, when it is at least a second, is written at the top beside its
    line: what a step or spike near it waited for. ``legend`` False: the lines
    and shades only (the later panels of small multiples)."""
    downs = list(downs)
    if not downs:
        return
    spans = [d.seconds for d in downs if d.seconds is not None]
    label: str | None = f"{who} crash ({len(downs)})"
    if spans:
        lo, hi = min(spans), max(spans)
        label = f"{label}, down {_secs(lo)}" + (f"\u2013{_secs(hi)}" if hi > lo else "")
    if not legend:
        label = None
    _, right = ax.get_xlim()
    for i, d in enumerate(downs):
        ax.axvline(d.crashed_s / unit, color=CRASH_COLOR, linestyle=":", linewidth=1.2, label=None if i else label)
        end = right if d.restarted_s is None else d.restarted_s / unit  # never back: down to the end
        if end > d.crashed_s / unit:
            ax.axvspan(d.crashed_s / unit, end, color=CRASH_COLOR, alpha=0.18, linewidth=0)
    longest = max((d for d in downs if d.seconds is not None), key=lambda d: d.seconds or 0.0, default=None)
    if legend and longest is not None and (longest.seconds or 0.0) >= 1.0:
        at = longest.crashed_s / unit
        left_side = at > 0.75 * right  # near the right edge: write it to the left of the line
        ax.annotate(
            f"longest down: {_secs(longest.seconds or 0.0)}\nfrom {_clock(longest.crashed_s)}",
            (at, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-4 if left_side else 4, -4),
            textcoords="offset points",
            ha="right" if left_side else "left",
            va="top",
            fontsize=7,
            color=CRASH_COLOR,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.0},  # over the lines it meets
        )


# a duplicate's marker: a crash's in the crash colour, each other cause in its own dark shape
_CRASH_MARKER = ("v", CRASH_COLOR)
_CAUSE_MARKERS = (("x", "#222222"), ("D", "#222222"), ("s", "#555555"), ("^", "#555555"), ("P", "#222222"))


def mark_duplicates(
    ax: Axes, x: Any, y: Any, causes: Any, unit: float = 1.0, *, every: Iterable[str] = (), legend: bool = True
) -> None:
    """Each extra delivery as a marker at ``(x / unit, y)``, one shape per
    cause (a crash's a red triangle, the others dark shapes in the order of
    their names among ``every``, the figure's causes, so that a cause keeps its
    shape from panel to panel) and a legend entry per cause with its count
    (``legend`` False: none). NaN positions are left out."""
    import numpy as np

    x, y, causes = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(causes, dtype=object)
    seen = ~(np.isnan(x) | np.isnan(y))
    names = sorted({str(c) for c in causes[seen]}, key=lambda c: (c != "crash", c))
    shapes = sorted({*every, *names} - {"crash"})
    for cause in names:
        mine = seen & (causes == cause)
        marker, color = _CRASH_MARKER if cause == "crash" else _CAUSE_MARKERS[shapes.index(cause) % len(_CAUSE_MARKERS)]
        ax.scatter(
            x[mine] / unit,
            y[mine],
            marker=marker,
            s=26 if marker == "x" else 36,
            color=color,
            linewidths=1.2,
            zorder=4,
            label=f"duplicate: {cause} ({int(mine.sum())})" if legend else None,
        )


def _secs(s: float) -> str:
    """A downtime, short: 40 ms, 0.3 s, 6.9 s, 12 s, 2.5 min."""
    if s < 0.1:
        return f"{s * 1000:.0f} ms"
    if s >= 120:
        return f"{s / 60:.1f} min"
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def _clock(s: float) -> str:
    """A virtual instant as the run's clock reads it: 26:32 (min:s), or 1:02:05 past an hour."""
    whole = int(s)
    h, rest = divmod(whole, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def plain_number(value: float, _pos: int | None = None) -> str:
    """A tick label in plain numbers: 0.05, 0.5, 2, 10, 1,000 (never 2×10⁰)."""
    if value == 0:
        return "0"
    if abs(value) >= 1:
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"
    return f"{value:.10f}".rstrip("0").rstrip(".")


def plain_log(ax: Axes, which: str = "y") -> None:
    """Label the log (or symlog) axis ``which`` ("x", "y" or "both") of ``ax``
    in plain numbers: ticks at 1, 2 and 5 times the powers of ten across a
    span of two decades or less, at the powers of ten across a wider one, and
    every other power of ten beyond six decades; minor ticks, unlabelled, at 2
    and 5 times them (a tick for each of 2-9 took a lesson's control a fifth
    of its redraw).
    Call it after the data is drawn (it reads the limits)."""
    import math

    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    for name in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if name == "x" else ax.yaxis
        lo, hi = ax.get_xlim() if name == "x" else ax.get_ylim()
        scale = axis.get_scale()
        if scale not in ("log", "symlog"):
            continue
        lo = max(min(lo, hi), 1e-12) if scale == "log" else max(min(lo, hi), 0.0)
        hi = max(lo, hi)
        floor = lo if lo > 0 else 1.0
        decades = math.log10(hi / floor) if hi > 0 else 0.0
        subs = (1.0, 2.0, 5.0) if decades <= 2.0 else (1.0,)
        if scale == "symlog":
            ticks = [0.0] if lo <= 0 else []
            first = 0 if lo <= 0 else math.floor(math.log10(floor))
            step = 1 if decades <= 6 else 2
            ticks += [
                s * 10.0**k
                for k in range(first, math.ceil(math.log10(max(hi, 1.0))) + 1, step)
                for s in subs
                if lo <= s * 10.0**k <= hi * 1.0001
            ]
            axis.set_major_locator(FixedLocator(ticks))
        else:
            locator = LogLocator(base=10.0, subs=subs, numticks=12 if decades <= 6 else 6)
            axis.set_major_locator(locator)
            axis.set_minor_locator(LogLocator(base=10.0, subs=(2.0, 5.0), numticks=12))
        axis.set_major_formatter(FuncFormatter(plain_number))
        axis.set_minor_formatter(NullFormatter())


def save_figures(figures: Mapping[str, Figure], out: str | Path) -> list[Path]:
    """Write ``{file name: Figure}`` as PNGs into the folder ``out`` (made,
    with its parents, if missing); the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures.items():
        path = out / name
        fig.savefig(path, dpi=STYLE["savefig.dpi"], metadata={"Software": None})
        fig.clear()  # these figures belong to no pyplot manager: dropping them frees them
        paths.append(path)
    return paths


class _SweepLinesOptions(TypedDict, total=False):
    """:func:`sweep_lines`'s keywords but ``ax``: the same in both overloads."""

    x: str | None
    by: str | None
    title: str | None
    bar: tuple[float, str] | None


# the overloads differ in ``ax`` alone: a new figure is a Figure, a caller's axes may be a subfigure's
@overload
def sweep_lines(df: pd.DataFrame, column: str, *, ax: None = None, **options: Unpack[_SweepLinesOptions]) -> Figure: ...
@overload
def sweep_lines(
    df: pd.DataFrame, column: str, *, ax: Axes | None = None, **options: Unpack[_SweepLinesOptions]
) -> Figure | SubFigure: ...


def sweep_lines(
    df: pd.DataFrame,
    column: str,
    *,
    x: str | None = None,
    by: str | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    bar: tuple[float, str] | None = None,
) -> Figure | SubFigure:
    """A sweep's ``column`` against the grid key ``x`` (default: the first
    numeric one), one line per value of the grid key ``by`` (default: the next
    grid key, if any): the mean over seeds, shaded from the lowest to the
    highest seed. A log x axis when ``x`` spans a factor of 10 or more.
    ``bar``: ``(value, label)`` of a dotted line across, the bar a
    recommendation held the column to."""
    keys = grid_keys(df)
    # pandas's own test: a grid key of text (pandas 3's str dtype) or of nullable
    # ints is an extension dtype, which np.issubdtype refuses with a TypeError
    numeric = [k for k in keys if pd.api.types.is_numeric_dtype(df[k]) and not pd.api.types.is_bool_dtype(df[k])]
    x = x or (numeric[0] if numeric else None)
    if x is None or x not in df.columns or column not in df.columns:
        raise KeyError(
            f"sweep_lines needs a numeric grid key and the column {column!r}; the table's grid "
            f"keys: {', '.join(keys) or 'none'}"
        )
    if by is None:
        rest = [k for k in keys if k != x]
        by = rest[0] if rest else None
    data = df[[c for c in (x, by, column) if c is not None]].dropna()
    draw = partial(_sweep_lines, data=data, column=column, x=x, by=by, bar=bar)
    return one_axes(ax, None if data.empty else draw, Labels(title or f"{column} vs {x}", x, column))


def _sweep_lines(
    ax: Axes, *, data: pd.DataFrame, column: str, x: str, by: str | None, bar: tuple[float, str] | None = None
) -> None:
    """:func:`sweep_lines`'s drawing, of its non-empty ``data``."""
    import numpy as np

    if bar is not None:
        ax.axhline(bar[0], color=THEORY_COLOR, linestyle=":", linewidth=1.2, label=bar[1])

    groups = data.groupby(by, sort=True) if by is not None else [(None, data)]
    colors = STYLE["axes.prop_cycle"].by_key()["color"]
    for i, (value, g) in enumerate(list(groups)[:MAX_SERIES]):
        stats = g.groupby(x, sort=True)[column].agg(["mean", "min", "max"])
        c = colors[i % len(colors)]
        ax.plot(
            stats.index,
            stats["mean"],
            marker="o",
            markersize=3.5,
            color=c,
            label=f"{by} = {value!s}" if by is not None else "mean over seeds",
        )
        ax.fill_between(stats.index, stats["min"], stats["max"], color=c, alpha=0.15, linewidth=0)
    xs = np.unique(data[x].to_numpy(dtype=float))
    if xs.min() > 0 and xs.max() / xs.min() >= 10:
        from matplotlib.ticker import NullLocator

        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{v:g}" for v in xs])  # ticked at the swept values, written plainly
        ax.xaxis.set_minor_locator(NullLocator())
    ax.legend(loc="best")


def save_sweep_lines(
    df: pd.DataFrame,
    columns: Iterable[str],
    out: Path,
    prefix: str = "sweep",
    bars: Mapping[str, tuple[float, str]] | None = None,
) -> list[Path]:
    """:func:`sweep_lines` of each of ``columns`` the table has, saved into
    ``out`` as ``<prefix>_<column>.png``; nothing when the table has no numeric
    grid key (a sweep of seeds only). ``bars``: a column's ``bar`` line."""
    bars = bars or {}
    try:
        figures = {f"{prefix}_{c}.png": sweep_lines(df, c, bar=bars.get(c)) for c in columns if c in df.columns}
    except KeyError:
        return []
    return save_figures(figures, out)


# the names these had before they were public (code written against them still runs)
_THEORY_COLOR, _LATENCY_LABELS, _MAX_SERIES = THEORY_COLOR, LATENCY_LABELS, MAX_SERIES
_axes, _empty, _time_unit, _save_figures = figure_axes, mark_empty, time_unit, save_figures


def stack_pngs(figures: list[str]) -> str:
    """One PNG (base64) of ``figures`` (PNGs, base64) one above the other, on white."""
    if len(figures) == 1:
        return figures[0]
    import base64
    import io

    from PIL import Image

    images = [Image.open(io.BytesIO(base64.b64decode(f))).convert("RGBA") for f in figures]
    still = Image.new("RGB", (max(i.width for i in images), sum(i.height for i in images)), "white")
    top = 0
    for image in images:
        still.paste(image, (0, top), image)  # through its alpha: a transparent figure on white
        top += image.height
    buffer = io.BytesIO()
    still.save(buffer, format="PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def show_in(out: Any, fig: Figure) -> None:
    """Make ``fig`` the content of ``out`` (an ipywidgets Output), in its state
    (its ``outputs``), not through a display message captured by ``with out:``:
    a front end draws it from there, saved or live, and a cell that merely
    builds a control prints nothing. The PNG is rendered once, at the figure's
    own size (the figures lay themselves out): the inline backend's tight
    bounding box would draw every figure twice, and a control would answer in
    twice the time."""
    import base64
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, metadata={"Software": None})
    width, height = fig.get_size_inches() * fig.dpi
    data = {
        "image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
        "text/plain": f"<Figure size {width:.0f}x{height:.0f}>",
    }
    out.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
