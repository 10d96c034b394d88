"""The package template (fanoutsim.kernel.design.TEMPLATE): every built-in
design is declared by Design.from_package, each member its package's own by the
template's names, and a package that misses one is told which and where."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from fanoutsim.designs import BUILTIN
from fanoutsim.designs import get as get_design
from fanoutsim.kernel.design import LAZY_MODULES, TEMPLATE, Design


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_lazy_member_names_a_function_that_exists(name):
    design = get_design(name)
    package = BUILTIN[name].rsplit(".", 1)[0]
    for key, (module, attribute) in TEMPLATE.items():
        if module in LAZY_MODULES:
            target = getattr(importlib.import_module(f"{package}.{module}"), attribute)
            assert callable(target), (name, key)
            assert getattr(design, key).__name__ == attribute


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_the_data_members_are_the_packages_own(name):
    design = get_design(name)
    package = BUILTIN[name].rsplit(".", 1)[0]
    faults = importlib.import_module(f"{package}.faults").FAULTS
    assert design.crash_points == faults.points and design.fault_kinds == faults.kind_names
    assert design.store_part is importlib.import_module(f"{package}.tables").PART
    assert design.causes is importlib.import_module(f"{package}.causes").CAUSES
    assert design.write_fields is importlib.import_module(f"{package}.serve").WRITE_FIELDS
    assert design.sweep_row is importlib.import_module(f"{package}.sweep").sweep_row


def test_each_design_says_what_its_backlog_counts_and_where_its_config_goes():
    got = {n: (get_design(n).backlog_name, get_design(n).config_table) for n in ("reactor", "outbox", "leases")}
    assert got == {
        "reactor": ("pending", "config"),
        "outbox": ("unhandled", "outbox"),
        "leases": ("unresolved", "leases"),
    }


def test_an_optional_member_left_out_keeps_its_default():
    # every built-in design recommends a setting from a sweep, against its own budget
    for name in ("reactor", "outbox", "leases"):
        assert get_design(name).sweep_recommend is not None and get_design(name).sweep_budget is not None
    assert get_design("outbox").sweep_unit_columns == ("commit_to_handled_p50_s", "commit_to_handled_p99_s")
    assert get_design("reactor").sweep_unit_columns == ()


def test_a_member_given_overrides_the_template():
    design = Design.from_package("fanoutsim.designs.outbox", name="o2", title="t", config_type=dict, backlog_name="x")
    assert design.backlog_name == "x" and design.config_type is dict
    assert design.store_part is get_design("outbox").store_part


def test_an_unknown_member_is_refused_by_name():
    with pytest.raises(TypeError, match="no member 'chek'"):
        Design.from_package("fanoutsim.designs.outbox", name="o", title="t", config_type=dict, chek=print)


def test_a_package_without_the_layout_is_told_what_is_missing_and_where(monkeypatch):
    package = types.ModuleType("bare_design")
    package.__path__ = []  # a package with no modules at all
    monkeypatch.setitem(sys.modules, "bare_design", package)
    missing = r"gives no crash_points where the template has it \(bare_design\.faults\.FAULTS"
    with pytest.raises(TypeError, match=missing):
        Design.from_package("bare_design", name="bare", title="t", config_type=dict)
