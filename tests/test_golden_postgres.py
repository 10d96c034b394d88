"""Golden results on PostgreSQL: a few scenarios under the virtual clock give,
on the PostgreSQL store, the very trace, tables and checker totals they give
on the memory store, and those that ``tests/golden/results.json`` pins for the
DuckDB store at the same length (the DuckDB golden runs are 30 virtual
seconds). The strongest check of the dialect layer: every statement of a run,
in the order a run makes them, answers as the memory adapter does."""

from __future__ import annotations

import json

import pytest
from golden.compute import RESULTS, SCENARIOS, UNTIL, _digest, _frame_digest, _plain, key
from pgfixtures import new_schema

# one scenario per design, and each design's crash scenario (crashes roll back open transactions)
NAMES = ("default", "crashes", "outbox-crashes", "leases-crashes")
CASES = [(path, seed) for path in SCENARIOS if path.stem in NAMES for seed in (0, 1)]


def _result(path, seed, store) -> dict:
    from fanoutsim.cli import full_report
    from fanoutsim.designs.stores import TABLES
    from fanoutsim.scenario import load_scenario

    scenario = load_scenario(path)
    until = min(scenario.until, UNTIL["duckdb"]) if scenario.until else UNTIL["duckdb"]
    sim = scenario.run(seed=seed, until=until, store=store)
    _, checked = full_report(sim, scenario.name)
    return {
        "trace": _frame_digest(sim.trace()),
        "tables": _digest({name: _digest(sim.store.rows(name)) for name in sorted(TABLES)}),
        "totals": json.loads(json.dumps(checked.total, sort_keys=True, default=_plain)),
    }


def test_the_cases_are_there():
    assert sorted({p.stem for p, _ in CASES}) == sorted(NAMES)


@pytest.mark.parametrize("path,seed", CASES, ids=lambda v: getattr(v, "stem", str(v)))
def test_postgres_gives_the_memory_results(path, seed, pg_store):
    store = pg_store(new_schema())
    got = _result(path, seed, store)
    assert store.statements > 100  # the run did go through PostgreSQL
    assert got == _result(path, seed, "memory")
    pinned = json.loads(RESULTS.read_text())[key(path, seed, "duckdb")]
    assert got == pinned
