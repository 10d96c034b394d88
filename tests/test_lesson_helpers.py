"""What the lessons are built with: fanoutsim.lesson (controls with their kernel
note, Explorer over a grid run once, tables, take-aways) and notebooks/build.py
(cell markers as tags and metadata, the saved note's words, each control's still, Run
All's time)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from matplotlib.figure import Figure

from fanoutsim import lesson

ROOT = Path(__file__).resolve().parents[1]


def _build():
    spec = importlib.util.spec_from_file_location("notebook_build", ROOT / "notebooks" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cell_markers_become_tags_and_metadata_never_comments():
    build = _build()
    source = "# %% [markdown]\n# # Title\n# %% ignore-output\nx = 1\n# %% solution\ny = 2\n# %% hidden skip\nz = 3\n"
    md, ignored, solution, hidden = build.cells_of(source)
    assert md.cell_type == "markdown" and md.source == "# Title"
    assert ignored.metadata == {"tags": ["nbval-ignore-output"]} and ignored.source == "x = 1"
    assert solution.metadata["tags"] == ["solution", "hide-cell"]  # the site folds it too
    assert solution.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    # what JupyterLab shows of a collapsed cell is its first line; the site's toggle says the same
    assert solution.source == "# Solution (open after trying)\ny = 2"
    assert solution.metadata["mystnb"]["code_prompt_show"] == "Solution (open after trying)"
    assert hidden.metadata == {"jupyter": {"source_hidden": True}, "tags": ["nbval-skip"]}
    with pytest.raises(ValueError, match="unknown cell marker 'secret'.*allowed: ignore-output"):
        build.cells_of("# %% secret\nx = 1\n")


def test_a_saved_control_keeps_the_words_for_a_reader_without_a_kernel():
    build = _build()
    import ipywidgets

    box = lesson.needs_kernel(ipywidgets.IntSlider(), "move it")
    note = box.children[0]
    assert "Live" in note.value and "needs a running kernel" in note.placeholder and "move it" in note.placeholder
    assert lesson.NOTE_CLASS in note._dom_classes == (build.NOTE_CLASS,)
    assert repr(box) == "A control that needs a running kernel: run its cell to move it."
    nb = nbformat.v4.new_notebook()
    state = {
        "a": {"state": {"_dom_classes": [build.NOTE_CLASS], "value": note.value, "placeholder": note.placeholder}},
        "b": {"state": {"_dom_classes": [], "value": "a summary", "placeholder": "not a note"}},
    }
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    assert build.offline_notes(nb) == 1
    saved = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert saved["a"]["state"]["value"] == note.placeholder and saved["b"]["state"]["value"] == "a summary"


def _png(width: int, height: int, colour: str, mode: str = "RGB") -> str:
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    image = Image.new(mode, (width, height), colour)
    if mode == "RGBA":
        image.putpixel((width - 1, 0), (0, 0, 0, 0))  # one transparent pixel: white in the still
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def test_a_saved_control_carries_a_still_of_the_figures_it_shows():
    """The still is the control's figures as saved (its Output widgets' PNGs, in
    the order the control shows them, one above the other); a widget that shows
    no figure gets none, and nothing else in the output changes."""
    import base64
    import io

    from PIL import Image

    build = _build()
    wide, tall = _png(6, 3, "red"), _png(4, 5, "blue", "RGBA")
    shown = lambda png: {"outputs": [{"output_type": "display_data", "data": {"image/png": png, "text/plain": "F"}}]}  # noqa: E731
    state = {
        "control": {"state": {"children": ["IPY_MODEL_note", "IPY_MODEL_body"]}},
        "note": {"state": {"value": "needs a running kernel"}},
        "body": {"state": {"children": ["IPY_MODEL_top", "IPY_MODEL_bottom"]}},
        "top": {"state": shown(wide)},
        "bottom": {"state": shown(tall)},
        "one": {"state": {"children": ["IPY_MODEL_bottom"]}},
        "button": {"state": {"description": "no figure"}},
    }
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}

    def view(model_id: str):
        data = {build.VIEW: {"model_id": model_id, "version_major": 2, "version_minor": 0}, "text/plain": "a control"}
        return nbformat.v4.new_output("display_data", data=data)

    nb.cells = [nbformat.v4.new_code_cell("c", outputs=[view("control"), view("one"), view("button")])]
    assert build.control_stills(nb) == 2
    stacked, single, none = (o["data"] for o in nb.cells[0].outputs)
    assert "image/png" not in none and set(none) == {build.VIEW, "text/plain"}
    assert single["image/png"] == tall and single["text/plain"] == "a control"
    still = Image.open(io.BytesIO(base64.b64decode(stacked["image/png"]))).convert("RGB")
    assert still.size == (6, 8)
    assert still.getpixel((0, 0)) == (255, 0, 0) and still.getpixel((0, 7)) == (0, 0, 255)
    assert still.getpixel((5, 7)) == (255, 255, 255)  # beside the narrower figure: white
    assert still.getpixel((3, 3)) == (255, 255, 255)  # where the figure is transparent: white


def test_run_all_is_timed_from_the_first_cell_to_the_last():
    build = _build()
    nb = nbformat.v4.new_notebook()

    def ran(start: str, end: str) -> dict:
        return {
            "execution": {
                "iopub.execute_input": f"2026-01-01T00:00:{start}Z",
                "shell.execute_reply": f"2026-01-01T00:00:{end}Z",
            }
        }

    nb.cells = [
        nbformat.v4.new_code_cell("1", metadata=ran("01.000000", "03.000000")),
        nbformat.v4.new_markdown_cell("x"),
        nbformat.v4.new_code_cell("2", metadata=ran("03.500000", "08.250000")),
    ]
    assert build.run_all_seconds(nb) == 7.25
    assert build.run_all_seconds(nbformat.v4.new_notebook()) == 0.0


def test_an_explorer_runs_each_setting_once_and_only_redraws_after():
    runs = []

    def run(a, b):
        runs.append((a, b))
        return a * b

    def draw(result, a, b):
        fig = Figure()
        fig.add_subplot().plot([0, 1], [0, result])
        return f"{a} x {b} = {result}", fig

    e = lesson.Explorer(run, draw, {"a": [1, 2, 3], "b": ["x", "y"]}, value={"a": 2})
    assert sorted(runs) == sorted((a, b) for a in (1, 2, 3) for b in ("x", "y"))  # the grid, once
    assert e.setting == {"a": 2, "b": "x"} and e.summary.value == "2 x x = xx"
    first = e.figure
    e.set(a=3, b="y")
    assert e.summary.value == "3 x y = yyy" and e.figure is not first and len(runs) == 6
    e.controls["a"].value = 1  # a learner's move
    assert e.summary.value == "1 x y = y" and len(runs) == 6
    with pytest.raises(ValueError, match="a must be one of \\[1, 2, 3\\], got 4"):
        e.set(a=4)
    assert lesson.NOTE_CLASS in e.widget.children[0]._dom_classes


def test_a_control_shows_a_still_of_its_figure_beside_its_view():
    """A viewer that draws no widgets (a notebook re-run with nbconvert, read in a
    plain viewer) shows the figure the control drew, not only its note: the
    control's bundle carries the figure's PNG beside the widget view and the
    text, and the still follows the figure drawn when it is shown."""
    import base64

    def draw(result, a):
        fig = Figure(figsize=(2, 1 + a))  # each setting its own size: a still tells them apart
        fig.add_subplot().plot([0, 1], [0, result])
        return str(result), fig

    e = lesson.Explorer(lambda a: a, draw, {"a": [1, 2]})
    bundle = e.widget._repr_mimebundle_()
    assert bundle["text/plain"].startswith("A control that needs a running kernel")
    assert "application/vnd.jupyter.widget-view+json" in bundle
    first = base64.b64decode(bundle["image/png"])
    assert first.startswith(b"\x89PNG") and first == base64.b64decode(e.out.outputs[0]["data"]["image/png"])
    e.set(a=2)
    assert base64.b64decode(e.widget._repr_mimebundle_()["image/png"]) != first
    bare = lesson.needs_kernel(_empty_box())
    assert "image/png" not in bare._repr_mimebundle_()  # nothing drawn: no still


def _empty_box():
    import ipywidgets as widgets

    return widgets.VBox([])


def test_a_table_rounds_wraps_and_keeps_one_style_id_for_one_content():
    df = pd.DataFrame({"a_long_column_name": [1.23456, 2.0], "n": [1000, 2]})
    html = lesson.table(df, digits=2).to_html()
    assert "1.23" in html and "1,000" in html
    assert lesson.table(df, digits=2).to_html() == html  # the saved notebook does not move
    assert lesson.table(df.assign(n=[1, 2]), digits=2).to_html() != html


def _cells(html: str, tag: str) -> list[str]:
    return [re.sub(r"<(?!wbr>)[^>]*>", "", c).strip() for c in re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", html)]


def test_a_header_wraps_at_underscores_and_dots_never_inside_a_word():
    df = pd.DataFrame(
        {"dead_lettered": [1], "acks_per_s": [2.0], "duplicates": [3]},
        index=pd.Index(["poll.after_dispatch_before_watermark"], name="crash_point"),
    )
    html = lesson.table(df).to_html()
    th_rule = re.search(r"th \{([^}]*)\}", html).group(1)
    assert "word-break: keep-all" in th_rule and "overflow-wrap: normal" in th_rule
    assert "anywhere" not in html and "break-all" not in html
    headers = _cells(html, "th")
    assert "dead_<wbr>lettered" in headers and "acks_<wbr>per_s" in headers and "duplicates" in headers
    assert "crash_<wbr>point" in headers and "poll.<wbr>after_<wbr>dispatch_<wbr>before_<wbr>watermark" in headers


def test_a_table_puts_units_and_percentages_in_its_cells():
    df = pd.DataFrame(
        {"p50 (ms)": [512.34], "hold_max_s": [1.5], "acks_per_s": [2.0], "peak_kb": [3.0], "share": [0.05]},
        index=pd.MultiIndex.from_tuples([(0.05, 15.0)], names=["dropped", "poll (s)"]),
    )
    html = lesson.table(df, digits=1, percent=["share", "dropped"]).to_html()
    nbsp = "\u00a0"
    assert _cells(html, "td") == [f"512.3{nbsp}ms", f"1.5{nbsp}s", f"2.0{nbsp}/s", f"3.0{nbsp}kB", f"5{nbsp}%"]
    headers = _cells(html, "th")
    assert "p50" in headers and "hold_<wbr>max_s" in headers, "a unit in parentheses moves to the cells"
    assert f"5{nbsp}%" in headers and f"15{nbsp}s" in headers and "poll" in headers, "the index too"
    assert "0.050000" not in html and "15.000000" not in html
    index = lesson.table(pd.DataFrame({"x": [1, 2]}, index=pd.Index([0.1, 2.5], name="P"))).to_html()
    assert ["0.1", "2.5"] == [h for h in _cells(index, "th") if h[0].isdigit()], "a float index in its shortest form"


def test_a_missing_value_is_shown_as_a_dash_and_left_unshaded():
    df = pd.DataFrame({"per_batch": [0.0, float("nan"), 20.0, 8.0], "n": [1, 2, 3, 4]})
    html = lesson.table(df, digits=2, highlight=["per_batch"]).to_html()
    uuid = re.search(r'<table id="T_(\w+)"', html).group(1)
    assert _cells(html, "td")[2] == "–"
    shaded = re.findall(rf"#T_{uuid}_row(\d)_col0\b", html)
    assert sorted(set(shaded)) == ["0", "2", "3"], "the missing value is not painted as a value"
    darkest = re.search(rf"#T_{uuid}_row2_col0 \{{\s*background-color: (#\w+)", html).group(1)
    assert darkest == "#7f2704", "the largest known value takes the darkest shade"
    assert "background-color: #000000" not in html, "no cell is painted black (the colour map's 'bad')"


def test_a_takeaway_has_three_to_five_bullets():
    assert lesson.takeaway("a", "b", "c")._repr_markdown_() == "- a\n- b\n- c"
    with pytest.raises(ValueError, match="3 to 5 bullets, got 2"):
        lesson.takeaway("a", "b")
    assert (
        "def test_a_takeaway_has_three_to_five_bullets"
        in lesson.show_source(test_a_takeaway_has_three_to_five_bullets)._repr_markdown_()
    )
