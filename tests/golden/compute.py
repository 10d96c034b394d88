"""Golden results: every scenario file x 3 seeds x memory/DuckDB, reduced to
hashes of the trace and of every table, and the checker's totals.

Refactors and speed-ups must not move these. ``python -m tests.golden.compute``
rewrites ``results.json``; do that only for a change that moves results on
purpose, and say so in its commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "fanoutsim" / "examples").glob("*.toml"))
SEEDS = (0, 1, 2)
# virtual seconds per run: enough for crashes, prunes and retries to happen,
# short enough that DuckDB under the virtual clock stays cheap
UNTIL = {"memory": 600.0, "duckdb": 30.0}
RESULTS = Path(__file__).with_name("results.json")


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=_plain, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _frame_digest(df) -> str:
    return hashlib.sha256(df.to_csv(index=False).encode()).hexdigest()


def result(path: Path, seed: int, store: str) -> dict:
    from fanoutsim.cli import full_report
    from fanoutsim.designs.stores import TABLES
    from fanoutsim.scenario import load_scenario

    scenario = load_scenario(path)
    until = min(scenario.until, UNTIL[store]) if scenario.until else UNTIL[store]
    sim = scenario.run(seed=seed, until=until, store=store)
    _, checked = full_report(sim, scenario.name)
    tables = {name: _digest(sim.store.rows(name)) for name in sorted(TABLES)}
    return {
        "trace": _frame_digest(sim.trace()),
        "tables": _digest(tables),
        "totals": json.loads(json.dumps(checked.total, sort_keys=True, default=_plain)),
    }


def key(path: Path, seed: int, store: str) -> str:
    return f"{path.stem}/{seed}/{store}"


def compute_all() -> dict:
    out = {}
    for path in SCENARIOS:
        for store in UNTIL:
            for seed in SEEDS:
                out[key(path, seed, store)] = result(path, seed, store)
                print(key(path, seed, store), file=sys.stderr)
    return out


if __name__ == "__main__":
    RESULTS.write_text(json.dumps(compute_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RESULTS}", file=sys.stderr)
