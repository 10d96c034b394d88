"""Sphinx configuration of fanoutsim's documentation site (``make docs``).

The notebooks are rendered by myst-nb from their stored outputs, never
executed here; the CLI reference is read from the argparse parser
(sphinx-argparse), the scenario reference from ``data/schemas/`` and the
checker's causes from each design's ``Design.causes``, so none of them can
drift from the code. What is generated goes to ``docs/_generated/``. The
lessons' controls need no network (``docs/controls.py``): the widget JavaScript
is served by the site, fetched from the npm registry at pinned versions, and
each control shows its still beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import apiref  # noqa: E402  (docs/apiref.py, beside this file)
import controls  # noqa: E402  (docs/controls.py, beside this file)
import generate  # noqa: E402  (docs/generate.py, beside this file)
import progress  # noqa: E402  (docs/progress.py: a line per stage of the build)

project = "fanoutsim"
author = "the fanoutsim authors"
copyright = "the fanoutsim authors"  # noqa: A001 - Sphinx's name
release = version = __import__("fanoutsim").__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinxarg.ext", "progress"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = [
    "_build",
    "generate.py",
    "controls.py",
    "progress.py",
    "**/.ipynb_checkpoints",
    "_generated/causes.md",
    "_generated/metrics.md",
    "_generated/api/*",
    "_generated/howto-*.md",
]  # included by reference/ and howto/ pages
# no typographic quotes or dashes: the command's help (sphinx-argparse) showed
# --store as an en dash, and a reader copies options and quoted values as printed
smartquotes = False
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# anchors as JupyterLab writes them, so that a notebook's link to a heading
# (00_index.ipynb#Glossary) works in JupyterLab and on the site alike
myst_heading_slug_func = "generate.jupyterlab_slug"

nb_execution_mode = "off"  # the notebooks as stored: make test executes them, the site only shows them
nb_merge_streams = True
nb_ipywidgets_js = controls.ipywidgets_js()  # from the site's _static, never a CDN

# every entry of the API reference is written out by generate.py (from apiref.py), members named
autodoc_default_options: dict[str, object] = {}
autodoc_member_order = "bysource"
add_module_names = False  # each entry sits under its module's heading
autodoc_typehints = "description"
autodoc_mock_imports: list[str] = []

html_theme = "furo"
html_title = f"fanoutsim {release}"
html_static_path = ["_static", "_build/npm/static"]  # the second: the widget JavaScript, below
html_css_files = ["controls.css"]

progress.stage("generating the reference pages: scenarios, causes, metrics")
generate.generate_all(HERE / "_generated", ROOT)
controls.vendor(HERE / "_build" / "npm" / "static", HERE / "_build" / "npm")


def _forget_first(app, env, docnames):
    """Forget every page about to be read before reading any: an entry that moved from
    one page to another that is read earlier would otherwise meet its old self there (a
    duplicate object description, an error under -W) in a build over an older one."""
    for docname in docnames:
        app.events.emit("env-purge-doc", env, docname)
        env.clear_doc(docname)


def _attributes(app, what, name, obj, options, lines):
    """A class's NumPy-style ``Attributes`` section (a config's fields: meaning, unit,
    default, range) as an entry per field."""
    if what in ("class", "exception") and lines:
        lines[:] = apiref.attribute_directives("\n".join(lines)).splitlines()


def setup(app) -> None:
    app.add_post_transform(controls.ControlStill)
    app.connect("env-before-read-docs", _forget_first)
    app.connect("autodoc-process-docstring", _attributes)
