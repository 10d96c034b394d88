"""The Python API reference is complete: every public name has an entry in the built
site, and every entry says what its object is.

What is public is one rule, kept in ``docs/apiref.py`` and stated on the reference's index
page (``docs/reference/api.md``):

* the public modules are the ones the reference pages list (``apiref.PAGES``); a public
  module's public names are its ``__all__`` (dunder names aside), or, in a module without
  one, the classes and functions it defines whose names do not start with ``_``;
* a public class's public members are the names not starting with ``_`` that it or one of
  fanoutsim's base classes defines (methods, properties, class attributes, annotated
  attributes), inherited ones included, what Python's own bases give aside; a member a
  public base class defines is documented on that base;
* a dataclass's (or named tuple's) fields are named in its docstring; the three configs'
  in an ``Attributes`` section that gives each field's meaning, unit, default and allowed
  range; every attribute a runtime sets on itself is a member too.

The checks, from the outside in: the built site's inventory (``objects.inv``, what Sphinx
indexed) has an entry at the address the rule gives each public name, member and config
field; the text of each entry on its page (what a reader sees) says something; each
docstring is at least a few words that end as a sentence does; each config field's entry
gives its unit, its real default and its allowed range.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
import zlib
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from docsite import ROOT, build

import fanoutsim as fs

sys.path.insert(0, str(ROOT / "docs"))
import apiref  # noqa: E402  (docs/apiref.py: the rule, and where each entry is)

CONFIGS = (fs.SchedulerConfig, fs.OutboxConfig, fs.LeaseConfig)
FACES = (fs.Simulation, fs.Realtime, fs.OutboxSimulation, fs.OutboxRealtime, fs.LeaseSimulation, fs.LeaseRealtime)
MIN_WORDS = 3  # "Delete the subscription." is an entry; "Subscription." is not


# -- what the rule asks for ----------------------------------------------------------------
def expected_entries() -> dict[str, str]:
    """Every address the reference must hold -> what it is (for a failure's message)."""
    out = {m: "a public module" for m in apiref.modules()}
    for m in apiref.modules():
        for n in apiref.public_names(m):
            out.setdefault(apiref.entry(m, n).address, f"{m}.{n}")
    for e in apiref.classes().values():
        for member in apiref.public_members(e.obj):
            out.setdefault(apiref.member_address(e.obj, member), f"a member of {e.address}")
    for cls in CONFIGS:
        address = apiref.classes()[id(cls)].address
        for f in dataclasses.fields(cls):
            out[f"{address}.{f.name}"] = f"a field of {cls.__name__}"
    return out


def documented(inventory: dict[str, str], wanted: dict[str, str]) -> list[str]:
    """What ``wanted`` asks for that ``inventory`` lacks, as lines for a failure."""
    return [f"{address} ({what})" for address, what in sorted(wanted.items()) if address not in inventory]


def read_inventory(path: Path) -> dict[str, str]:
    """A Sphinx ``objects.inv`` (version 2): full name -> ``domain:role``."""
    data = path.read_bytes()
    header_end = 0
    for _ in range(4):  # four lines of plain text, then the zlib-compressed entries
        header_end = data.index(b"\n", header_end) + 1
    assert data.startswith(b"# Sphinx inventory version 2"), data[:40]
    out = {}
    for line in zlib.decompress(data[header_end:]).decode().splitlines():
        m = re.match(r"(.+?)\s+(\S+:\S+)\s+(-?\d+)\s+(\S*)\s+(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def is_sentence(doc: str) -> bool:
    """At least a few words, ending as a sentence does (not cut off mid-word): with a
    full stop or other closing mark, or in an example's output. A NumPy-style section
    (a config's ``Attributes``) is held to this field by field, not here."""
    doc = re.split(r"^\w+\n-{3,}$", doc, maxsplit=1, flags=re.M)[0].strip()
    if len(doc.split()) < MIN_WORDS:
        return False
    return ">>>" in doc or "::" in doc or doc.rstrip()[-1] in ".!?:)`'\"]*="


def undocumented() -> list[str]:
    """Every public name and member whose docstring is not :func:`is_sentence`."""
    bad = [
        f"{m}: {inspect.getdoc(apiref.module(m))!r}"
        for m in apiref.modules()
        if not is_sentence(inspect.getdoc(apiref.module(m)) or "")
    ]
    seen: set[str] = set()
    for e in apiref.entries().values():
        if e.address not in seen and not is_sentence(apiref.entry_doc(e)):
            bad.append(f"{e.address}: {apiref.entry_doc(e)[:80]!r}")
        seen.add(e.address)
    for e in apiref.classes().values():
        for member in apiref.public_members(e.obj):
            address = apiref.member_address(e.obj, member)
            if address not in seen and not is_sentence(apiref.member_doc(e.obj, member)):
                bad.append(f"{address}: {apiref.member_doc(e.obj, member)[:80]!r}")
            seen.add(address)
    return bad


# -- the docstrings, without building the site -----------------------------------------------
def test_every_public_name_and_member_has_a_docstring():
    bad = undocumented()
    assert not bad, f"{len(bad)} public names or members without a docstring that says something:\n" + "\n".join(bad)


def test_an_empty_docstring_is_caught(monkeypatch):
    """The check above can fail: a public method whose docstring is taken away is named."""
    monkeypatch.setattr(fs.LeaseSimulation.register_consumer, "__doc__", None)
    monkeypatch.setattr(fs.LeaseConfig, "__doc__", "Knobs.")
    bad = undocumented()
    assert any(
        line.startswith("fanoutsim.designs.leases.simulation.LeaseSimulation.register_consumer:") for line in bad
    )
    assert any(line.startswith("fanoutsim.designs.leases.config.LeaseConfig:") for line in bad)


@pytest.mark.parametrize(
    ("doc", "verdict"),
    [
        ("Check every consumer life of a finished (or paused) run.", True),
        ("Check every consumer life of a finished (or paused) leases ev", False),
        ("Delete.", False),
        ("", False),
        ("A run:\n\n>>> sim.run(until=2.0)\n[1]", True),
    ],
)
def test_a_docstring_is_a_sentence(doc, verdict):
    assert is_sentence(doc) is verdict


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_config_field_gives_its_meaning_unit_default_and_range(cls):
    """Each field's entry: a sentence of meaning, then ``:Unit:``, ``:Default:`` (the
    field's real default: the config made with it equals the default config) and
    ``:Allowed:``."""
    entries = {name: "\n".join(lines) for name, (_, lines) in apiref.attributes(inspect.getdoc(cls) or "")[1].items()}
    names = [f.name for f in dataclasses.fields(cls)]
    assert list(entries) == names, f"{cls.__name__}'s Attributes section names {list(entries)}, its fields are {names}"
    for f in dataclasses.fields(cls):
        text = entries[f.name]
        meaning = text.split(":Unit:")[0]
        assert is_sentence(" ".join(meaning.split())), f"{cls.__name__}.{f.name}: no meaning before :Unit:"
        unit = re.search(r"^:Unit: (\S.*)$", text, flags=re.M)
        default = re.search(r"^:Default: ``(.+?)``", text, flags=re.M)
        allowed = re.search(r"^:Allowed: (\S.*)$", text, flags=re.M)
        assert unit and default and allowed, f"{cls.__name__}.{f.name} lacks :Unit:, :Default: or :Allowed:"
        value = ast.literal_eval(default.group(1))
        assert cls(**{f.name: value}) == cls(), f"{cls.__name__}.{f.name}: the default is not {default.group(1)}"


def test_a_config_field_without_its_unit_is_caught(monkeypatch):
    doc = inspect.getdoc(fs.LeaseConfig).replace(":Unit: seconds", ":Units: seconds", 1)
    monkeypatch.setattr(fs.LeaseConfig, "__doc__", doc)
    with pytest.raises(AssertionError, match="lacks :Unit:"):
        test_every_config_field_gives_its_meaning_unit_default_and_range(fs.LeaseConfig)


# -- the built site -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site() -> Path:
    return build()


@pytest.fixture(scope="module")
def inventory(site) -> dict[str, str]:
    return read_inventory(site / "objects.inv")


def test_every_public_name_member_and_config_field_has_an_entry(inventory):
    missing = documented(inventory, expected_entries())
    assert not missing, f"{len(missing)} public names without an entry in the reference:\n" + "\n".join(missing)


def test_a_missing_entry_is_caught(inventory):
    """The check above can fail: an inventory without one of the entries names it."""
    wanted = expected_entries()
    short = {k: v for k, v in inventory.items() if k != "fanoutsim.designs.leases.simulation.LeaseSimulation.ack"}
    assert documented(short, wanted) == [
        "fanoutsim.designs.leases.simulation.LeaseSimulation.ack (a member of "
        "fanoutsim.designs.leases.simulation.LeaseSimulation)"
    ]


@pytest.fixture
def faces(tmp_path):
    """One runtime of each design on each clock (the wall clock's over a DuckDB file)."""
    made = [
        cls(seed=0) if "Simulation" in cls.__name__ else cls(store=str(tmp_path / f"{cls.__name__}.duckdb"))
        for cls in FACES
    ]
    yield made
    for rt in made:
        rt.close()


def test_every_attribute_a_runtime_sets_on_itself_has_an_entry(inventory, faces):
    """The rule's members are what the class says; what the constructor sets (``runner``,
    ``store``, ``config``, ...) must be among them, each with an entry."""
    missing = []
    for rt in faces:
        address = apiref.classes()[id(type(rt))].address
        for name in sorted(vars(rt)):
            if not name.startswith("_") and f"{address}.{name}" not in inventory:
                missing.append(f"{address}.{name}")
    assert not missing, "runtime attributes without an entry (declare them, with a #: comment):\n" + "\n".join(missing)


def entry_texts(site: Path) -> dict[str, str]:
    """Every entry of the API pages, by address: the text a reader sees under its
    signature, without its members' entries and its parameter and return type lists."""
    out = {}
    for page in [site / "reference" / "api.html", *sorted((site / "reference" / "api").glob("*.html"))]:
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for dt in soup.find_all("dt", id=True):
            dd = dt.find_next_sibling("dd")
            if dd is None:
                continue
            parts = [c.get_text(" ") if hasattr(c, "get_text") else str(c) for c in dd.children if c.name != "dl"]
            out[dt["id"]] = " ".join(" ".join(parts).split())
    return out


def test_every_entry_says_something_on_its_page(site):
    texts = entry_texts(site)
    wanted = {a for a in expected_entries() if a not in apiref.modules()}
    empty = sorted(a for a in wanted if len(texts.get(a, "").split()) < MIN_WORDS)
    assert not empty, f"{len(empty)} entries that say nothing on their page:\n" + "\n".join(
        f"{a}: {texts.get(a)!r}" for a in empty
    )


def test_the_leases_page_documents_the_calls_people_make(site):
    """The issue's list, as a reader finds it on the leases page."""
    page = (site / "reference" / "api" / "leases.html").read_text(encoding="utf-8")
    soup = BeautifulSoup(page, "html.parser")
    ids = {dt["id"] for dt in soup.find_all("dt", id=True)}
    for face in ("simulation.LeaseSimulation", "realtime.LeaseRealtime"):
        for call in ("register_consumer", "add_workload", "publish", "consume", "ack", "nack", "seek", "retire"):
            assert f"fanoutsim.designs.leases.{face}.{call}" in ids, (face, call)
    assert "fanoutsim.designs.leases.simulation.LeaseSimulation.run" in ids
    assert "fanoutsim.designs.leases.realtime.LeaseRealtime.start" in ids
    for field in ("retention", "retention_interval", "recovery_interval", "max_retry_delay", "partition_order"):
        assert f"fanoutsim.designs.leases.config.LeaseConfig.{field}" in ids, field
    assert "fanoutsim.designs.leases.checker.check_leases" in ids


def test_every_dataclass_names_its_fields_in_its_docstring():
    """The rule's other half: a public dataclass's, named tuple's or typed dict's
    fields are not entries of their own (the configs' aside), so its docstring
    names each one — or, in a scenario file's table, each key has its own doc."""
    missing = []
    for e in apiref.classes().values():
        doc = inspect.getdoc(e.obj) or ""
        keys = apiref.key_docs(e.obj)
        missing += [
            f"{e.address}.{f}"
            for f in apiref.fields(e.obj)
            if not re.search(rf"\b{re.escape(f)}\b", doc) and not keys.get(f)
        ]
    assert not missing, "fields their class's docstring does not name:\n" + "\n".join(missing)


GATHERING = (
    "fanoutsim",
    "fanoutsim.runtime",
    "fanoutsim.analysis",
    "fanoutsim.plots",
    "fanoutsim.widgets",
    "fanoutsim.faults",
)


def test_the_public_modules_are_the_ones_the_package_gathers_from():
    """What counts as public does not rest on the list alone: the modules that
    gather the API (``fanoutsim`` and its ``faults``, ``analysis``, ``plots``,
    ``widgets``, ``runtime``) and each design's runtimes, config and checker
    must be on it, and so must every design module those gather from — so a
    design module that the package exports from cannot be left off the list."""
    public = set(apiref.modules())
    required = set(GATHERING) | {"fanoutsim.exercises"}
    for d in ("reactor", "outbox", "leases"):
        required |= {f"fanoutsim.designs.{d}.{m}" for m in ("simulation", "realtime", "config", "checker", "faults")}
    for gathering in GATHERING:
        for name in apiref.public_names(gathering):
            home = getattr(getattr(apiref.module(gathering), name), "__module__", None)
            if home and home.startswith("fanoutsim.designs."):
                required.add(home)
    assert not required - public, f"public modules the reference leaves out: {sorted(required - public)}"
