"""Golden results on the DuckDB store (in memory): the trace and table hashes and the
checker's totals of every scenario file x 3 seeds stay what they were
(``tests/golden/compute.py`` explains how to move them on purpose)."""

from __future__ import annotations

import pytest
from golden.check import cases, check_case

STORE = "duckdb"


@pytest.mark.parametrize("path,seed", cases(), ids=lambda v: getattr(v, "stem", str(v)))
def test_golden(path, seed):
    check_case(path, seed, STORE)
