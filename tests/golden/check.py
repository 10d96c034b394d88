"""The comparison the golden tests make."""
from __future__ import annotations

import json

from .compute import RESULTS, SCENARIOS, SEEDS, key, result


def cases():
    return [(path, seed) for path in SCENARIOS for seed in SEEDS]


# The reactor's totals said "duplicate_causes" and "loss_causes" where the
# other designs say "duplicates_by_cause" and "lost_by_cause": renamed, with
# their values unchanged, before results.json is rewritten in words of today.
RENAMED = {"duplicate_causes": "duplicates_by_cause", "loss_causes": "lost_by_cause"}


def check_case(path, seed, store: str) -> None:
    expected = json.loads(RESULTS.read_text())[key(path, seed, store)]
    expected["totals"] = {RENAMED.get(k, k): v for k, v in expected["totals"].items()}
    got = result(path, seed, store)
    assert got["totals"] == expected["totals"], f"checker totals moved for {key(path, seed, store)}"
    assert got["tables"] == expected["tables"], f"tables moved for {key(path, seed, store)}"
    assert got["trace"] == expected["trace"], f"trace moved for {key(path, seed, store)}"
