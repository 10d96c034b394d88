"""fanoutsim installed as a package has something to run: a wheel built from
the tree, installed in a fresh virtual environment outside the repository,
writes a shipped scenario and runs it (the scenarios are package data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SKIP = shutil.ignore_patterns(
    ".venv",
    ".git",
    "out",
    "_build",
    "_generated",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    "*.duckdb",
    "*.duckdb.wal",
    "notebooks",
)


def _run(*args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_a_wheel_installed_outside_the_repository_writes_and_runs_an_example(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=_SKIP)  # the tree as it is, built away from the checkout
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", wheels, tree)
    [wheel] = wheels.glob("fanoutsim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for example in ("default", "outbox", "leases", "quotes-day"):
        assert f"fanoutsim/examples/{example}.toml" in names
    assert "fanoutsim/examples/quotes-day.parquet" in names

    # a fresh environment; the dependencies it would download are this one's, made visible by a
    # .pth line (a path a .pth names is not scanned for .pth files: this checkout's editable
    # install stays out, and the wheel's fanoutsim is the one imported)
    env_dir = tmp_path / "fresh"
    _run(sys.executable, "-m", "venv", env_dir)
    bin_dir = env_dir / "bin"
    site = Path(
        _run(bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(bin_dir / "python", "-m", "pip", "install", "--no-deps", "--quiet", wheel)

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    where = _run(bin_dir / "python", "-c", "import fanoutsim; print(fanoutsim.__file__)", cwd=work, env=env)
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout  # the wheel's, not the checkout's
    _run("fanoutsim", "example", "outbox", "--out", "x.toml", cwd=work, env=env)
    ran = _run("fanoutsim", "run", "x.toml", cwd=work, env=env)
    assert (
        "outbox check: VALID" in ran.stdout and (work / "out" / "outbox" / "report.json").is_file()
    )  # named by the scenario
    listed = _run("fanoutsim", "example", cwd=work, env=env)
    assert "quotes-day" in listed.stdout and "leases" in listed.stdout
