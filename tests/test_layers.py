"""The layers, checked by tools: import-linter's contracts (``.importlinter``:
the application over the designs over the kernel, designs independent of each
other, engine steps importing no simpy, threading or time, no cycles), and
what import-linter cannot see, read from the source: no underscore name
imported from another package, no design or kernel module importing the
``fanoutsim`` package itself, and every top-level module named in the top layer."""

from __future__ import annotations

import ast
import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fanoutsim"
CONFIG = ROOT / ".importlinter"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: install the test extra (pip install -e '.[test]')"
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(CONFIG)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_import_contracts_hold():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[out.stdout.find("Broken contracts") :] + out.stderr
    assert "4 kept, 0 broken" in out.stdout


def test_the_contracts_catch_a_clock_in_a_step_a_design_in_the_kernel_and_a_cycle(tmp_path):
    """On a copy of the package with three planted faults: a step module that
    imports time inside a function, a kernel module that imports a design,
    and two designs' modules that import each other."""
    copy = tmp_path / "fanoutsim"
    subprocess.run(["cp", "-r", str(PACKAGE), str(copy)], check=True)

    def plant(path: str, text: str) -> None:
        target = copy / path
        target.write_text(target.read_text() + text)

    plant("designs/outbox/retention.py", "\n\ndef _now():\n    import time\n    return time.time()\n")
    plant("kernel/ids.py", "\nfrom fanoutsim.designs.outbox import bus  # noqa\n")
    plant("designs/outbox/bus.py", "\nfrom fanoutsim.designs.outbox import notify  # noqa\n")
    plant("designs/outbox/notify.py", "\nfrom fanoutsim.designs.outbox import bus  # noqa\n")
    out = lint_imports(tmp_path, {"PYTHONPATH": str(tmp_path), "PATH": str(LINT_IMPORTS.parent)})
    assert out.returncode != 0 and "0 kept, 4 broken" in out.stdout
    assert "fanoutsim.designs.outbox.retention -> time" in out.stdout
    assert "fanoutsim.kernel.ids -> fanoutsim.designs.outbox.bus" in out.stdout
    assert "No cycles are allowed in fanoutsim.designs.outbox" in out.stdout


# -- what import-linter cannot check ----------------------------------------------------


def component(module: str) -> str:
    """The package whose private names a module may use: its design, the
    kernel, or the application (fanoutsim's top modules)."""
    parts = module.split(".")
    if parts[:2] == ["fanoutsim", "designs"] and len(parts) > 2:
        return ".".join(parts[:3])
    if parts[:2] == ["fanoutsim", "kernel"]:
        return "fanoutsim.kernel"
    return "fanoutsim"


def module_name(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """``line: what`` for each underscore name ``module`` imports from another
    package's module (``from x import _y``, or ``x._y`` on an imported module)."""
    tree = ast.parse(source)
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            if not src.startswith("fanoutsim"):
                continue
            for alias in node.names:
                modules[alias.asname or alias.name] = f"{src}.{alias.name}"
                if (
                    alias.name.startswith("_")
                    and not alias.name.startswith("__")
                    and component(src) != component(module)
                ):
                    found.append(f"{node.lineno}: from {src} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fanoutsim"):
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and component(modules[node.value.id]) != component(module)
        ):
            found.append(f"{node.lineno}: {modules[node.value.id]}.{node.attr}")
    return found


def sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        module, is_package = module_name(path)
        yield path, module, is_package


def test_no_underscore_name_is_imported_from_another_package():
    bad = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path, module, is_package in sources()
        for hit in private_imports(path.read_text(), module, is_package)
    ]
    assert bad == [], "private names used across packages (make them public, or move them):\n" + "\n".join(bad)


def test_the_private_name_check_finds_what_it_must():
    mod = "fanoutsim.designs.outbox.plots"
    assert private_imports("from fanoutsim.kernel.plotting import _axes, style\n", mod) == [
        "1: from fanoutsim.kernel.plotting import _axes"
    ]
    assert private_imports("import fanoutsim.designs.reactor.checker as c\nc._firing_of('')\n", mod) == [
        "2: fanoutsim.designs.reactor.checker._firing_of"
    ]
    assert private_imports("from ..reactor.checker import _F\n", mod) == [
        "1: from fanoutsim.designs.reactor.checker import _F"
    ]
    # inside one package, and names that are not private, are fine
    assert (
        private_imports(
            "from fanoutsim.designs.outbox import analysis as _a\n_a._rel(1, 2)\n"
            "from .analysis import _rel\nfrom fanoutsim.kernel import __name__\n",
            mod,
        )
        == []
    )


def test_designs_and_the_kernel_do_not_import_the_fanoutsim_package():
    """``import fanoutsim`` from below would reach the application layer; the
    layers contract only sees its modules."""
    bad = []
    for path, module, _ in sources():
        if component(module) == "fanoutsim":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "fanoutsim" for a in node.names):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: import fanoutsim")
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "fanoutsim":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: from fanoutsim import ...")
    assert bad == []


def test_every_top_level_module_is_in_the_top_layer():
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    top = parser["importlinter:contract:layers"]["layers"].strip().splitlines()[0]
    named = {m.strip() for m in top.replace("|", ":").split(":")}
    present = {f"fanoutsim.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    present |= {f"fanoutsim.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    present -= {"fanoutsim.designs", "fanoutsim.kernel"}
    assert named == present, (
        "name each top-level module in the first line of the layers contract "
        f"in .importlinter: missing {sorted(present - named)}, gone {sorted(named - present)}"
    )
