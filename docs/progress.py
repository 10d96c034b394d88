"""A line per stage of ``make docs`` on stderr, so a build of some 20 s is not a silent one.

Sphinx runs with ``-q`` (its per-page lines would be hundreds); this
extension says instead what the build is doing and how long it has taken:
generating the reference pages, reading the pages and notebooks that
changed, writing the HTML, done (or failed). Connected in ``conf.py``.
"""

from __future__ import annotations

import os
import sys
import time

START = time.monotonic()


def stage(text: str) -> None:
    """One progress line: what the build does now, and the seconds since it started."""
    print(f"docs: {text} ({time.monotonic() - START:.0f} s)", file=sys.stderr, flush=True)


def _outdated(app, env, added, changed, removed) -> list[str]:
    todo = len(added) + len(changed)
    stage(
        f"reading {todo} of {len(env.found_docs)} pages and notebooks"
        + (" (the others are unchanged since the last build)" if todo < len(env.found_docs) else "")
    )
    return []


def _writing(app, builder) -> None:
    stage(f"writing the site as {builder.name.upper()} into {os.path.relpath(app.outdir)}")


def _finished(app, exception) -> None:
    stage("failed" if exception is not None else f"done: open {os.path.relpath(app.outdir)}/index.html")


def setup(app) -> dict:
    app.connect("env-get-outdated", _outdated)
    app.connect("write-started", _writing)
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
