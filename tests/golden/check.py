"""The comparison the golden tests make."""

from __future__ import annotations

import json

from .compute import RESULTS, SCENARIOS, SEEDS, key, result


def cases():
    return [(path, seed) for path in SCENARIOS for seed in SEEDS]


def check_case(path, seed, store: str) -> None:
    expected = json.loads(RESULTS.read_text())[key(path, seed, store)]
    got = result(path, seed, store)
    assert got["totals"] == expected["totals"], f"checker totals moved for {key(path, seed, store)}"
    assert got["tables"] == expected["tables"], f"tables moved for {key(path, seed, store)}"
    assert got["trace"] == expected["trace"], f"trace moved for {key(path, seed, store)}"
