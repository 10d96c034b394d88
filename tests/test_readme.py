"""The README's examples run as written (with the user's own functions stubbed)."""
from __future__ import annotations

import contextlib
import io
import re
import tomllib
from pathlib import Path

from fanoutsim.scenario import parse_scenario

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_outbox_example_runs_and_loses_nothing():
    [code] = [b for b in blocks("python") if "OutboxSimulation(" in b]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"send_mail": lambda row: None})
    assert "outbox check: valid" in out.getvalue() and " 0 lost" in out.getvalue()


def test_the_outbox_scenario_example_is_a_valid_scenario():
    [text] = [b for b in blocks("toml") if 'design = "outbox"' in b]
    scenario = parse_scenario(tomllib.loads(text), source="README")
    assert scenario.design == "outbox"


def test_the_leases_example_runs_and_names_its_duplicates():
    [code] = [b for b in blocks("python") if "LeaseSimulation(" in b]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {})
    text = out.getvalue()
    assert "lease_expired" in text and "INVALID" not in text


# Every python block as a reader pastes them: in order, into one interpreter
# (``python -c``: a __main__ without a file, like the interactive prompt), in a
# folder of its own that sees the repository's data/ as the README assumes.
_RUN_BLOCKS = r"""
import sys, traceback
blocks = __import__("json").loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for i, (line, code) in enumerate(blocks):
    print(f"--- block {i + 1} (README.md line {line})", flush=True)
    try:
        exec(compile(code, f"README.md, python block {i + 1} at line {line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"--- FAILED: block {i + 1} (README.md line {line})", flush=True)
        sys.exit(1)
print("--- all blocks ran", flush=True)
"""


def python_blocks_with_lines() -> list[tuple[int, str]]:
    return [(README.count("\n", 0, m.start()) + 2, m.group(1))
            for m in re.finditer(r"```python\n(.*?)```", README, flags=re.S)]


def test_every_python_block_runs_as_pasted_in_order_in_one_interpreter(tmp_path):
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "data").symlink_to(root / "data")
    blocks = python_blocks_with_lines()
    assert len(blocks) >= 6
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-c", _RUN_BLOCKS], input=json.dumps(blocks), capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0 and "--- all blocks ran" in done.stdout, done.stdout[-3000:] + done.stderr[-6000:]
    out = done.stdout
    assert "outbox check: valid" in out and "lease_expired" in out and "indexed 1" in out
    assert "8 runs on the cluster; same rows as the pool: True" in out  # Sweeps at scale, on a LocalCluster
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
