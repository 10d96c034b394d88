"""The real queue libraries for the tests: procrastinate and pgqueuer (the ``realqueues`` extra).

``make setup`` installs them. A test that needs one and cannot import it is
skipped with the reason — and fails instead when ``CI`` is set: in CI these
tests never skip (as PostgreSQL's, see ``pgfixtures``).
"""

from __future__ import annotations

import os

import pytest


def need_libraries(*libraries: str) -> None:
    """Skip (fail in CI) unless each library of the comparison, and its driver, imports."""
    from fanoutsim.designs.outbox.realqueues.harness import check_library

    for library in libraries:
        try:
            check_library(library)
        except RuntimeError as exc:
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"the realqueues extra is needed and missing in CI: {exc}")
            pytest.skip(str(exc))
