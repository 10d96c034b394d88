"""What the notebooks use to teach, beside the simulations themselves.

* :func:`needs_kernel` puts a note beside a control. Saved in a notebook, a
  control is a picture of its default state: it does not move until a running
  kernel runs its cell. The note says so in plain words there (the notebook
  build saves its ``placeholder`` as its text), and once the cell has run it
  says what the control does.
* :class:`Explorer` is a control over a small grid of settings: every setting
  is run once when it is built (or on first use), so a change only redraws.
* :func:`table` shows a DataFrame rounded, with a fixed style id (the saved
  notebook does not change from one run to the next).
* :func:`show_source` prints a function's code, so an experiment a lesson
  calls is never a black box.
* :func:`takeaway` writes a lesson's closing bullets from the run's numbers.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from fanoutsim.kernel.plotting import show_in

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


def needs_kernel(control, action: str = "move the sliders"):
    """``control`` under a note that says it needs a running kernel (see the
    module's docstring); ``action`` is what the reader can then do. Its text
    form is one fixed line (what a test of the saved notebook compares), not
    the widgets' state."""
    import ipywidgets as widgets

    class Control(widgets.VBox):
        def __repr__(self) -> str:
            return f"A control that needs a running kernel: run its cell to {action}."

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


def table(
    df: pd.DataFrame,
    *,
    digits: int | Mapping[str, int] = 3,
    index: bool = True,
    highlight: Sequence[str] = (),
    caption: str | None = None,
):
    """``df`` to show in a notebook: floats rounded to ``digits`` (one number,
    or per column), integers with thousands separators, the columns in
    ``highlight`` shaded by value, long headers and texts wrapped (a table no
    wider than the page), and a style id fixed by the content (so the saved
    notebook is the same after every run)."""
    fmt: dict = {}
    for col in df.columns:
        kind = df[col].dtype.kind
        if kind == "f":
            d = digits.get(col, 3) if isinstance(digits, Mapping) else digits
            fmt[col] = f"{{:,.{d}f}}"
        elif kind in "iu":
            fmt[col] = "{:,}"
    styler = df.style.format(fmt, na_rep="–").set_table_styles(
        [  # long names wrap: no table wider than the page
            {"selector": "th", "props": "white-space: normal; overflow-wrap: anywhere; max-width: 10em;"},
            {"selector": "td", "props": "white-space: normal; max-width: 32em;"},
        ]
    )
    if highlight:
        styler = styler.background_gradient(subset=list(highlight), cmap="Oranges")
    if not index:
        styler = styler.hide(axis="index")
    if caption:
        styler = styler.set_caption(caption)
    digest = hashlib.sha1(df.to_csv().encode() + (caption or "").encode()).hexdigest()[:10]
    return styler.set_uuid(f"t{digest}")


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
