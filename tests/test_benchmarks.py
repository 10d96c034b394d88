"""The benchmark scripts run (briefly): `make bench` must not rot between
the times someone reads its figures. Nothing here is timed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def bench(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_bench_day_repeats_a_case_and_shows_the_fastest_and_duckdbs_statements():
    out = bench(
        "bench_day.py",
        "--case",
        "memory",
        "--case",
        "duckdb",
        "--until",
        "120",
        "--duckdb-until",
        "60",
        "--repeat",
        "2",
    )
    assert out.returncode == 0, out.stderr
    walls = re.findall(r"wall time\s+([\d.]+) s\s+\(best of 2; ([\d.]+)-([\d.]+) s\)", out.stdout)
    assert len(walls) == 2, out.stdout
    for best, low, high in walls:
        assert best == low and float(low) <= float(high)
    per = re.search(r"statements\s+(\d+)\s+\(([\d.]+) per delivery\)", out.stdout)
    assert per and int(per.group(1)) > 0 and float(per.group(2)) > 0, out.stdout
    assert out.stdout.count("statements") == 1  # the memory store sends none


def test_bench_sweep_repeats_the_pool_sweep():
    out = bench("bench_sweep.py", "--only", "pool", "--seeds", "1", "--until", "30", "--repeat", "2")
    assert out.returncode == 0, out.stderr
    assert re.search(r"wall [\d.]+ s for 18 runs \([\d.]+ s a run; best of 2, [\d.]+-[\d.]+ s;", out.stdout), out.stdout


def test_bench_duckdb_idle_shows_the_floor_of_the_statements_it_sent():
    out = bench("bench_duckdb_idle.py", "--seconds", "60", "--repeat", "1")
    assert out.returncode == 0, out.stderr
    sent = re.search(r"DuckDB store\s+[\d.]+ CPU s\s+\(best of 1; (\d+) statements\)", out.stdout)
    bare = re.search(r"DuckDB alone\s+[\d.]+ CPU s\s+\(best of 1; (\d+) bare writes", out.stdout)
    assert sent and bare and int(sent.group(1)) > 0, out.stdout
    assert bare.group(1) == sent.group(1)  # the floor sends as many statements as the run did
    assert re.search(r"floor / memory\s+[\d.]+x", out.stdout), out.stdout


def test_a_repeat_below_one_is_refused_naming_the_option():
    for script in ("bench_day.py", "bench_sweep.py", "bench_duckdb_idle.py"):
        out = bench(script, "--repeat", "0")
        assert out.returncode == 2 and "--repeat must be at least 1, got 0" in out.stderr


def test_targets_print_a_verdict_per_target_and_write_bench_json(tmp_path):
    import json

    only = ["outbox", "duckdb", "controls"]
    out = bench("targets.py", "--quick", "--only", *only, "--out", str(tmp_path / "bench.json"))
    assert out.returncode == 0, out.stderr
    lines = re.findall(r"^(\w+)\s+([\d.]+)\s+target <= ([\d.]+)\s+(PASS|FAIL)", out.stdout, re.M)
    assert [name for name, *_ in lines] == only, out.stdout
    written = json.loads((tmp_path / "bench.json").read_text())
    for name, figure, target, verdict in lines:
        r = written[name]
        assert r["figure"] > 0 and r["target"] == float(target)
        assert r["pass"] == (verdict == "PASS") == (r["figure"] <= r["target"])
        assert abs(r["figure"] - float(figure)) < 0.01
    # the interpreter that measured them, named with the figures: its build moves them
    import platform

    assert written["python"]["version"] == platform.python_version(), written["python"]
    assert out.stdout.startswith(f"{platform.python_implementation()} {platform.python_version()} ("), out.stdout


def test_every_lesson_control_is_timed_from_the_cell_that_builds_it():
    # a lesson with a control that bench_controls.py does not know would go untimed
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_controls import CONTROLS, lesson_cells
    finally:
        sys.path.pop(0)
    builds = re.compile(r"^(\w+) = (?:lesson\.Explorer|prune_control|sweep_explorer|latency_explorer)\(", re.M)
    found = {}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        names = builds.findall(text)
        if names:
            found[nb.stem] = names[0]
    assert found == CONTROLS
    for lesson, name in CONTROLS.items():
        cells = lesson_cells(lesson, name)
        assert builds.search(cells[-1]) and f"{name} = " in cells[-1]  # the last cell run builds the control
        assert not any(builds.search(c) for c in cells[:-1])
    with pytest.raises(ValueError, match="no cell binds 'nope'"):
        lesson_cells("08_outbox", "nope")


def test_ten_million_runs_a_small_count_with_the_trace_spilled():
    import json

    out = bench("ten_million.py", "--deliveries", "3000", "--step", "2")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["deliveries"] >= 3000 and r["peak_rss_gib"] > 0 and r["trace_disk_mib"] >= 0
