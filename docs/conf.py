"""Sphinx configuration of fanoutsim's documentation site (``make docs``).

The notebooks are rendered by myst-nb from their stored outputs, never
executed here; the CLI reference is read from the argparse parser
(sphinx-argparse), the scenario reference from ``data/schemas/`` and the
checker's causes from each design's ``Design.causes``, so none of them can
drift from the code. What is generated goes to ``docs/_generated/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

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
    "progress.py",
    "**/.ipynb_checkpoints",
    "_generated/causes.md",
    "_generated/metrics.md",
]  # included by reference/ pages
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# anchors as JupyterLab writes them, so that a notebook's link to a heading
# (00_index.ipynb#Glossary) works in JupyterLab and on the site alike
myst_heading_slug_func = "generate.jupyterlab_slug"

nb_execution_mode = "off"  # the notebooks as stored: make test executes them, the site only shows them
nb_merge_streams = True

autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_mock_imports: list[str] = []

html_theme = "furo"
html_title = f"fanoutsim {release}"
html_static_path: list[str] = []

progress.stage("generating the reference pages: scenarios, causes, metrics")
generate.generate_all(HERE / "_generated", ROOT)
