"""The documentation site as the tests read it: built as ``make docs`` builds it
(incrementally, warnings as errors) into ``docs/_build/html``, once per test process,
under a file lock, so that two test processes (``make test`` runs two) never build into
the one directory at once."""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "docs" / "_build" / "html"


@functools.cache
def build() -> Path:
    """The built site's directory; an AssertionError with Sphinx's words if the build
    fails (a warning is a failure)."""
    sphinx = Path(sys.executable).with_name("sphinx-build")
    HTML.parent.mkdir(parents=True, exist_ok=True)
    with open(HTML.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        built = subprocess.run(
            [str(sphinx), "-W", "--keep-going", "-q", "-b", "html", "docs", str(HTML)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "MPLBACKEND": "Agg"},
        )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-6000:]
    return HTML
