"""pyproject.toml is the install source of truth; environment.yml must list the same packages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from PyPI's
CONDA_TO_PYPI = {"python-duckdb": "duckdb", "prometheus_client": "prometheus-client"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower()


def pyproject_packages() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return {_name(r) for r in reqs}


def environment_packages() -> set[str]:
    names = set()
    text = (ROOT / "environment.yml").read_text()
    for line in text[text.index("dependencies:") :].splitlines():
        m = re.match(r"^\s*-\s+([A-Za-z0-9_.\-]+)", line)
        if not m or line.strip().startswith("- pip:"):
            continue
        name = _name(m.group(1))
        if name in {"python", "pip", "-e"}:
            continue
        names.add(CONDA_TO_PYPI.get(name, name))
    return names


def test_environment_yml_lists_the_same_packages_as_pyproject():
    assert environment_packages() == pyproject_packages()


def test_python_floor_matches():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert "python>=3.11" in (ROOT / "environment.yml").read_text()


def test_license_is_an_spdx_string_so_the_build_does_not_warn():
    # a TOML table (`license = { text = "MIT" }`) makes setuptools print a deprecation
    # warning, twice, on every install; a string needs setuptools >= 77 to build
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["license"] == "MIT"
    assert "setuptools>=77" in data["build-system"]["requires"]
