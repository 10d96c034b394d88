"""The committed notebooks as JupyterLab meets them: the kernelspec it writes
(so opening one changes nothing), an index that names every notebook, and a
`make lab` that trusts them and hides their sources."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _build():
    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_notebook_saves_the_kernelspec_jupyterlab_writes():
    expected = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    assert _build().KERNELSPEC == expected
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        assert dict(nbformat.read(path, as_version=4).metadata["kernelspec"]) == expected, path.name


def test_every_notebook_has_its_source_and_the_index_names_each_with_its_time():
    built = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    sources = {p.stem for p in (NOTEBOOKS / "src").glob("*.py")}
    assert built == sources
    index = (NOTEBOOKS / "src" / "00_index.py").read_text()
    for stem in sorted(sources - {"00_index"}):
        row = re.search(rf"^# \| \[{stem}\]\({stem}\.ipynb\) \| (.+?) \| (.+?) \|$", index, flags=re.M)
        assert row, f"00_index does not list {stem}"
        assert re.search(r"\d+ s|\d+ min|seconds", row.group(2)), row.group(0)


def test_make_lab_trusts_the_notebooks_hides_their_sources_and_opens_the_index():
    make = (ROOT / "Makefile").read_text()
    lab = make[make.index("\nlab:") :]
    lab = lab[: lab.index("\n\n")]
    assert "jupyter trust $(LAB_DIR)/*.ipynb" in lab
    assert "--ServerApp.root_dir=$(LAB_DIR)" in lab and "default_url=/lab/tree/00_index.ipynb" in lab
    hide = re.search(r"^LAB_HIDE\s*:=\s*(.+)$", make, flags=re.M).group(1).split()
    assert {"src", "build.py"} <= set(hide) and "hide_globs" in lab


def test_the_build_names_an_unknown_notebook_rather_than_building_nothing(capsys):
    import pytest

    build = _build()
    with pytest.raises(SystemExit) as stop:
        build.main(["20_systems_you_run"])
    assert "20_systems_you_run" in str(stop.value) and "14_systems_you_run" in str(stop.value)
    build.main(["--help"])
    assert "notebooks/build.py 00_tour" in capsys.readouterr().out


def test_a_rebuilt_notebook_keeps_its_cell_ids():
    build = _build()
    assert build.cell_id("10_leases", 3) == build.cell_id("10_leases", 3) != build.cell_id("10_leases", 4)
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        assert [c.id for c in cells] == [build.cell_id(path.stem, i) for i in range(len(cells))], path.name


def test_every_saved_control_carries_the_still_of_the_figures_it_shows():
    """A viewer that draws no widgets (the site without JavaScript, a notebook
    viewer) shows a control's ``image/png``: the figures its saved state shows, as
    the build stacks them. Every control of the lessons has one."""
    build = _build()
    controls = 0
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        views = [o for c in nb.cells for o in c.get("outputs", ()) if build.VIEW in o.get("data", {})]
        for output in views:
            assert "image/png" in output["data"], f"{path.name}: a control without its still (rebuild it)"
            expected = list(build._figures(build.widget_state(nb), output["data"][build.VIEW]["model_id"]))
            assert expected, f"{path.name}: a control whose saved state shows no figure"
            assert _pixels(output["data"]["image/png"]) == _pixels(build.stack_pngs(expected)), path.name
        controls += len(views)
    assert controls >= 7  # lessons 1, 2, 3, 6, 7, 8 and 10 have one each


def _pixels(png: str) -> tuple:
    """A PNG's size and pixels (the same picture, whichever encoder wrote it)."""
    import base64
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")
    return image.size, image.tobytes()


def test_a_saved_lesson_keeps_only_the_widgets_an_output_shows():
    """A progress bar its cell cleared keeps no model in the saved lesson (its
    wall-clock rates would change at every build); a control keeps its own
    models and those they refer to. Every committed notebook holds no other."""
    build = _build()
    nb = nbformat.v4.new_notebook()
    view = {build.VIEW: {"model_id": "a1", "version_major": 2, "version_minor": 0}}
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", data=view)])]
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "state": {
                "a1": {"state": {"children": ["IPY_MODEL_b2"], "layout": "IPY_MODEL_c3"}},
                "b2": {"state": {"style": "IPY_MODEL_d4"}},
                "c3": {"state": {}},
                "d4": {"state": {}},
                "e5": {"state": {"description": "54/54 [00:08<00:00, 13.20run/s]"}},  # a cleared bar
            }
        }
    }
    assert build.unshown_widgets(nb) == 1
    assert sorted(build.widget_state(nb)) == ["a1", "b2", "c3", "d4"]
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        saved = nbformat.read(path, as_version=4)
        assert build.unshown_widgets(saved) == 0, f"{path.name}: widget models no output shows (rebuild it)"
