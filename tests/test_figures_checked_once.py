"""A run's figures mark its duplicates, which the checker finds: given the check
the caller already made (``fanoutsim run`` has it), they never check the run again."""

from __future__ import annotations

import importlib

import pytest

from fanoutsim.designs import design_of
from fanoutsim.examples import FOLDER
from fanoutsim.scenario import load_scenario

# a crash scenario per design, shortened: its figures mark crashes and duplicates
CASES = {"crashes": 600.0, "outbox-crashes": 300.0, "leases-crashes": 300.0}


@pytest.mark.parametrize("name", sorted(CASES))
def test_figures_use_the_check_they_are_given(name, tmp_path, monkeypatch):
    scenario = load_scenario(FOLDER / f"{name}.toml")
    sim = scenario.build()
    sim.run(until=CASES[name])
    design = design_of(sim)
    checked = design.check(sim)

    def refuse(*args, **kwargs):
        raise AssertionError("the figures checked the run again")

    package = f"fanoutsim.designs.{design.name}"
    checker = importlib.import_module(f"{package}.checker")
    for attr in ("check", "check_leases", "check_outbox"):
        if hasattr(checker, attr):
            monkeypatch.setattr(checker, attr, refuse)
    for module in ("plots", "plots.delivery"):
        try:
            plots = importlib.import_module(f"{package}.{module}")
        except ModuleNotFoundError:
            continue
        for attr in ("_check", "check_leases"):
            if hasattr(plots, attr):
                monkeypatch.setattr(plots, attr, refuse)
    paths = design.figures(sim, tmp_path, checked=checked)
    assert paths and all(path.stat().st_size > 0 for path in paths)
    with pytest.raises(AssertionError, match="checked the run again"):  # without it, they would check
        design.figures(sim, tmp_path)
