"""What the notebooks use to teach, beside the simulations themselves.

* :func:`needs_kernel` puts a note beside a control. Saved in a notebook, a
  control is a picture of its default state: it does not move until a running
  kernel runs its cell. The note says so in plain words there (the notebook
  build saves its ``placeholder`` as its text), and once the cell has run it
  says what the control does.
* :class:`Explorer` is a control over a small grid of settings: every setting
  is run once when it is built (or on first use), so a change only redraws.
* :func:`table` shows a DataFrame readable at a glance: rounded, percentages
  and units in the cells, headers that never break inside a word, missing
  values unshaded, and a fixed style id (the saved notebook does not change
  from one run to the next).
* :func:`show_source` prints a function's code, so an experiment a lesson
  calls is never a black box.
* :func:`takeaway` writes a lesson's closing bullets from the run's numbers.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.kernel.plotting import show_in, stack_pngs

__all__ = ["needs_kernel", "Explorer", "table", "show_source", "takeaway", "NOTE_CLASS", "OFFLINE_NOTE"]

NOTE_CLASS = "fanoutsim-kernel-note"  # notebooks/build.py looks for it in the saved widget state
OFFLINE_NOTE = (
    "<b>This control needs a running kernel.</b> Saved in the notebook, it shows its "
    "default setting and does not move. Run this cell (or Run All) to {action}."
)
LIVE_NOTE = "Live: {action}; each change redraws in about a second or less."


def _note(action: str):
    import ipywidgets as widgets

    note = widgets.HTML(value=LIVE_NOTE.format(action=action), placeholder=OFFLINE_NOTE.format(action=action))
    note.add_class(NOTE_CLASS)
    return note


def _pngs(widget: Any) -> Iterator[str]:
    """The PNGs (base64) ``widget`` shows, its children's in order: what its
    Output widgets hold (:func:`~fanoutsim.kernel.plotting.show_in` puts a
    figure there)."""
    for shown in getattr(widget, "outputs", ()):
        png = shown.get("data", {}).get("image/png")
        if png:
            yield png
    for child in getattr(widget, "children", ()):
        yield from _pngs(child)


def needs_kernel(control, action: str = "move the sliders"):
    """``control`` under a note that says it needs a running kernel (see the
    module's docstring); ``action`` is what the reader can then do. Its text
    form is one fixed line (what a test of the saved notebook compares), not
    the widgets' state."""
    import ipywidgets as widgets

    class Control(widgets.VBox):
        def __repr__(self) -> str:
            return f"A control that needs a running kernel: run its cell to {action}."

        def _repr_mimebundle_(self, **kwargs: Any) -> dict:
            # beside the view, a still of the figures it shows now: a viewer that
            # draws no widgets (a re-run notebook in a plain viewer) shows them
            bundle = super()._repr_mimebundle_(**kwargs)
            figures = list(_pngs(self))
            if figures:
                bundle["image/png"] = stack_pngs(figures)
            return bundle

    box = Control([_note(action), control])
    box.control = control
    return box


class Explorer:
    """A control over every combination of ``options`` (``{name: [values]}``):
    ``run(**setting)`` computes a setting's result once (all of them when
    built, with ``precompute``), ``draw(result, **setting)`` returns ``(summary,
    figure)``. ``widget`` is the control with its note; ``figure``, ``summary``
    and ``setting`` are the ones drawn last. Values are chosen from the grid,
    so every setting the control offers is one the engine accepts."""

    def __init__(
        self,
        run: Callable[..., Any],
        draw: Callable[..., tuple[str, Any]],
        options: Mapping[str, Sequence],
        *,
        value: Mapping[str, Any] | None = None,
        precompute: bool = True,
        action: str = "move the sliders",
    ) -> None:
        import ipywidgets as widgets

        self.run, self.draw, self.options = run, draw, {k: list(v) for k, v in options.items()}
        self.results: dict[tuple, Any] = {}
        if precompute:
            for combo in itertools.product(*self.options.values()):
                self._result(dict(zip(self.options, combo)))
        start = {k: v[0] for k, v in self.options.items()} | dict(value or {})
        self.controls = {}
        for name, values in self.options.items():
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                c = widgets.SelectionSlider(
                    options=values,
                    value=start[name],
                    description=name,
                    continuous_update=False,
                    style={"description_width": "initial"},
                )
            else:
                c = widgets.ToggleButtons(
                    options=values,
                    value=start[name],
                    description=name,
                    style={"description_width": "initial", "button_width": "auto"},
                )
            c.observe(self._changed, names="value")
            self.controls[name] = c
        self.summary = widgets.HTML()
        self.out = widgets.Output()
        body = widgets.VBox([*self.controls.values(), self.summary, self.out])
        self.widget = needs_kernel(body, action)
        self.figure = None
        self._quiet = False
        self.update()

    def _changed(self, _change) -> None:
        if not self._quiet:
            self.update()

    def _result(self, setting: dict) -> Any:
        key = tuple(setting[k] for k in self.options)
        if key not in self.results:
            self.results[key] = self.run(**setting)
        return self.results[key]

    @property
    def setting(self) -> dict:
        return {k: c.value for k, c in self.controls.items()}

    def set(self, **setting) -> None:
        """Move the controls to ``setting`` (one redraw)."""
        for name, value in setting.items():
            if value not in self.options[name]:
                raise ValueError(f"{name} must be one of {self.options[name]}, got {value!r}")
        self._quiet = True
        try:
            for name, value in setting.items():
                self.controls[name].value = value
        finally:
            self._quiet = False
        self.update()

    def update(self) -> None:
        """Draw the current setting (the controls call this on every change)."""
        setting = self.setting
        summary, fig = self.draw(self._result(setting), **setting)
        self.summary.value = summary
        self.figure = fig
        show_in(self.out, fig)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


# a unit a name ends in, and what a cell of that column says: `hold_max_s` and
# `p50 (ms)` hold seconds and milliseconds, `acks_per_s` a rate
_UNIT = re.compile(r"(?:_per_s|_s|_ms|_kb| \((s|ms)\))$")
_UNIT_WORDS = {"_per_s": "/s", "_s": "s", "_ms": "ms", "_kb": "kB", " (s)": "s", " (ms)": "ms"}
NBSP, WBR = "\u00a0", "<wbr>"
# a header keeps its words whole and wraps only at spaces and the <wbr> after an
# underscore or a dot; a cell keeps a number and its unit on one line
TABLE_STYLES = [
    {"selector": "th", "props": "white-space: normal; word-break: keep-all; overflow-wrap: normal; max-width: 10em;"},
    {"selector": "td", "props": "white-space: normal; max-width: 32em;"},
]


def unit_of(name: Any) -> str:
    """The unit a column or index level name ends in (``"s"`` for ``hold_max_s`` or
    ``"p50 (s)"``, ``"/s"`` for ``acks_per_s``), or ``""``."""
    m = _UNIT.search(name) if isinstance(name, str) else None
    return _UNIT_WORDS[m.group(0)] if m else ""


def header(name: Any) -> str:
    """A column or index name as a header shows it: a unit in parentheses moves to
    the cells (``"p50 (ms)"`` reads ``p50``), and ``<wbr>`` after an underscore or
    a dot (before a part of two letters or more) lets a long snake_case name wrap
    there, never inside a word."""
    text = str(name)
    if unit_of(name) and text.endswith(")"):
        text = text[: text.rindex(" (")]
    # "per_s" keeps its s, "p99_ms" its ms and "3.10" its 10
    return re.sub(r"_(?=\w\w)(?!(?:ms|kb)$)|\.(?=[^\W\d]\w)", lambda m: m.group(0) + WBR, text)


def _trimmed(value: float, digits: int) -> str:
    """``value`` to ``digits`` decimals, trailing zeros dropped: 0.05, 7.5, 5."""
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _cell(digits: int | None, unit: str, percent: bool) -> Callable[[Any], str]:
    """How one column's (or index level's) values print: ``digits`` fixed decimals
    (None: trimmed, as an index reads), thousands separated, ``percent`` times 100
    with " %", and the ``unit``, kept beside its number."""

    def show(value: Any) -> str:
        if percent:
            return f"{_trimmed(float(value) * 100, 1 if digits is None else digits)}{NBSP}%"
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            text = f"{value:,}" if digits is not None else str(value)  # an index's 1000 may be an id
        elif isinstance(value, (float, np.floating)):
            text = _trimmed(float(value), 6) if digits is None else f"{value:,.{digits}f}"
        else:
            return str(value)
        return f"{text}{NBSP}{unit}" if unit else text

    return show


def table(
    df: pd.DataFrame,
    *,
    digits: int | Mapping[str, int] = 3,
    index: bool = True,
    highlight: Sequence[str] = (),
    percent: Sequence[str] = (),
    caption: str | None = None,
):
    """``df`` to show in a notebook, readable at a glance:

    * floats rounded to ``digits`` (one number, or per column), integers with
      thousands separators, a float index as its shortest number (0.05, not
      0.050000), missing values as "–";
    * the columns and index levels named in ``percent`` as percentages ("5 %");
    * a column or index level whose name ends in a unit (``_s``, ``_ms``,
      ``_kb``, ``_per_s``, `` (s)``, `` (ms)``) with the unit in its cells
      ("0.51 s"); a unit in parentheses leaves the header, a snake_case name
      stays whole (the name code reads);
    * headers that wrap at spaces, underscores and dots, never inside a word;
    * the columns in ``highlight`` shaded by value, a missing value left unshaded;
    * a style id fixed by the content (the saved notebook is the same after every run).
    """
    shown = df.rename_axis(index=_axis_name(df.index), columns=_axis_name(df.columns))
    styler = shown.style.format(_formats(df, digits, percent), na_rep="–").set_table_styles(TABLE_STYLES)
    styler = styler.format_index(header, axis=1, level=list(range(df.columns.nlevels)))
    for level, name in enumerate(df.index.names):
        values = df.index.get_level_values(level)
        show = _cell(None, unit_of(name), name in percent) if values.dtype.kind in "fiu" else header
        styler = styler.format_index(show, axis=0, level=level)
    for col in highlight:
        known = df[col].notna().to_numpy()
        if known.any():  # a missing value is no value: the gradient is over the known ones
            styler = styler.background_gradient(subset=(known, [col]), cmap="Oranges")
    if not index:
        styler = styler.hide(axis="index")
    if caption:
        styler = styler.set_caption(caption)
    digest = hashlib.sha1(df.to_csv().encode() + (caption or "").encode()).hexdigest()[:10]
    return styler.set_uuid(f"t{digest}")


def _name(name: Any) -> Any:
    return None if name is None else header(name)


def _axis_name(axis: pd.Index) -> Any:
    names = [_name(n) for n in axis.names]
    return names if axis.nlevels > 1 else names[0]


def _formats(df: pd.DataFrame, digits: int | Mapping[str, int], percent: Sequence[str]) -> dict:
    """Each numeric column's printer (see :func:`table`)."""
    formats: dict = {}
    for col in df.columns:
        kind = df[col].dtype.kind
        if kind not in "fiu":
            continue
        d = (digits.get(col, 3) if isinstance(digits, Mapping) else digits) if kind == "f" else 0
        formats[col] = _cell(d, unit_of(col), col in percent)
    return formats


class _Markdown:
    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def show_source(obj) -> _Markdown:
    """The source code of a function (or class, or module), to read in the lesson."""
    return _Markdown(f"```python\n{textwrap.dedent(inspect.getsource(obj)).rstrip()}\n```")


def takeaway(*bullets: str) -> _Markdown:
    """A lesson's take-away: one bullet per line, written from the run's numbers."""
    if not 3 <= len(bullets) <= 5:
        raise ValueError(f"a take-away has 3 to 5 bullets, got {len(bullets)}")
    return _Markdown("\n".join(f"- {b}" for b in bullets))
