"""The Python API reference: which names are public, and where each one is documented.

This is the one list of it: ``generate.py`` writes the reference's entries from it
(``docs/_generated/api/<page>.md``, which ``docs/reference/api/<page>.md`` includes), and
``tests/test_reference.py`` checks the built site against it.

**What is public.** The public modules are the ones :data:`PAGES` lists. A public module's
public names are its ``__all__`` (dunder names such as ``__version__`` aside); in a module
without one, the classes and functions it defines whose names do not start with ``_``. A
public class's public members are the names not starting with ``_`` that the class or one
of its fanoutsim base classes defines: methods, properties, class attributes and annotated
attributes (a runtime's ``config``, ``store``, ``runner``). Inherited ones count — a
runtime's API comes from its mixins — but not what Python's own bases give (an exception's
``args``), nor the fields of a dataclass or a named tuple: its docstring names those (a
config's in an ``Attributes`` section: each field's meaning, unit, default and allowed
range; a typed dict's keys likewise; a scenario table's fields are documented key
by key, and its entry lists them).

**Where.** Every public object has one entry, at its *home*: a class or a function at the
address of the module that defines it when that module is public, else at the first public
module (in the order of :data:`PAGES`) that exports it under its own name; anything else (a
constant, a second name of a function or a class) at the first public module that exports
it under that name. A member that a public base class defines is documented on that class.
Every other public module that exports an object links to its entry.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
from dataclasses import dataclass
from functools import cache
from typing import Any, is_typeddict


@dataclass(frozen=True)
class Section:
    """A heading of a reference page and the public modules under it, in order."""

    title: str
    modules: tuple[str, ...]


_R, _O, _L = "fanoutsim.designs.reactor", "fanoutsim.designs.outbox", "fanoutsim.designs.leases"

# page -> its sections. The order is the order of homes: the designs' modules come
# before the modules that gather them (fanoutsim.faults, .analysis, ...), and the
# top-level package comes last, so that each object's home is where it is defined.
PAGES: dict[str, tuple[Section, ...]] = {
    "reactor": (
        Section("Runtimes", (f"{_R}.simulation", f"{_R}.realtime", f"{_R}.runner")),
        Section("Configuration", (f"{_R}.config",)),
        Section("The checker", (f"{_R}.checker", f"{_R}.minimize")),
        Section(
            "Filters, payloads, recordings, triggers",
            (f"{_R}.predicate", f"{_R}.payload", f"{_R}.replay", f"{_R}.triggers"),
        ),
    ),
    "outbox": (
        Section("Runtimes", (f"{_O}.simulation", f"{_O}.realtime")),
        Section("Configuration", (f"{_O}.config", f"{_O}.presets")),
        Section("The checker", (f"{_O}.checker",)),
    ),
    "leases": (
        Section("Runtimes", (f"{_L}.simulation", f"{_L}.realtime")),
        Section("Configuration: RiffDB's rules, the brokers' rules, their presets", (f"{_L}.config", f"{_L}.presets")),
        Section("The checker", (f"{_L}.checker",)),
        Section(
            "Leases, consumers, callers, backups",
            (f"{_L}.leasing", f"{_L}.identity", f"{_L}.authority", f"{_L}.backup"),
        ),
    ),
    "faults": (
        Section(
            "Each design's faults",
            ("fanoutsim.designs.faults", f"{_R}.faults", f"{_O}.faults", f"{_L}.faults"),
        ),
        Section("Every fault in one place", ("fanoutsim.faults",)),
    ),
    "analysis": (
        Section(
            "The reactor's",
            tuple(
                f"{_R}.analysis.{m}"
                for m in ("delivery", "latency", "lag", "clocks", "sweep", "faults", "filters", "idempotency")
            ),
        ),
        Section("The outbox's", (f"{_O}.analysis",)),
        Section("The leases'", (f"{_L}.analysis",)),
        Section("Every design's in one place", ("fanoutsim.analysis",)),
    ),
    "plots": (
        Section(
            "The reactor's",
            tuple(f"{_R}.plots.{m}" for m in ("delivery", "latency", "lag", "clocks", "sweep", "faults", "filters")),
        ),
        Section("The outbox's", (f"{_O}.plots",)),
        Section("The leases'", (f"{_L}.plots",)),
        Section("Every design's in one place, and the house style", ("fanoutsim.plots",)),
    ),
    "widgets": (
        Section("The controls", tuple(f"{_R}.widgets.{m}" for m in ("latency", "sweep", "prune", "live"))),
        Section("Every control in one place", ("fanoutsim.widgets",)),
    ),
    "exercises": (Section("The checker of the lessons' exercises", ("fanoutsim.exercises",)),),
    "scenarios": (Section("Scenario files and the shipped examples", ("fanoutsim.scenario", "fanoutsim.examples")),),
    "sweeps": (Section("Sweeps", ("fanoutsim.sweep", "fanoutsim.kernel.sweeppick")),),
    "serve": (Section("Serving a run", ("fanoutsim.serve", "fanoutsim.kernel.runtime.control")),),
    "design": (
        Section("The registry of designs", ("fanoutsim.designs",)),
        Section("The Design record and the checker contract", ("fanoutsim.kernel.design", "fanoutsim.kernel.check")),
        Section("Metrics: what a run counts and how /metrics says it", ("fanoutsim.kernel.metrics",)),
    ),
    "index": (Section("The top-level package", ("fanoutsim", "fanoutsim.runtime")),),
}


def modules() -> list[str]:
    """Every public module, in the order of homes."""
    return [m for sections in PAGES.values() for s in sections for m in s.modules]


def module(name: str) -> Any:
    """The module ``name`` (``fanoutsim.sweep`` the module, not the function the
    package exports under that name)."""
    return importlib.import_module(name)


# -- what is public ------------------------------------------------------------------
def public_names(name: str) -> list[str]:
    """The public names of module ``name``, by the rule of this module's text."""
    mod = module(name)
    if hasattr(mod, "__all__"):
        return [n for n in mod.__all__ if not (n.startswith("__") and n.endswith("__"))]
    return [
        n
        for n, obj in vars(mod).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == name
    ]


def ours(cls: type) -> bool:
    """Whether ``cls`` is one of fanoutsim's classes (not Python's or a library's)."""
    return cls.__module__.split(".")[0] == "fanoutsim"


def fields(cls: type) -> list[str]:
    """A dataclass's or a named tuple's fields, or a typed dict's keys (its docstring
    names them)."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    if is_typeddict(cls):
        return list(cls.__annotations__)
    return list(getattr(cls, "_fields", ())) if issubclass(cls, tuple) else []


def own_members(cls: type) -> list[str]:
    """The public members ``cls`` itself defines (not a base), in source order."""
    names = [n for n in vars(cls) if not n.startswith("_")]
    names += [n for n in vars(cls).get("__annotations__", {}) if not n.startswith("_") and n not in names]
    return [n for n in names if n not in fields(cls)]


def public_members(cls: type) -> list[str]:
    """The public members of ``cls``, inherited ones included (see the module's text)."""
    out: list[str] = []
    for klass in cls.__mro__:
        if ours(klass):
            out += [n for n in own_members(klass) if n not in out and n not in fields(cls)]
    return out


def defined_by(cls: type, member: str) -> type:
    """The class of ``cls``'s method resolution order that defines ``member``."""
    return next(k for k in cls.__mro__ if ours(k) and member in own_members(k))


# -- where each one is documented -------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One entry of the reference: its ``address`` (the object's documented full name),
    the public ``module`` whose section holds it, and the object."""

    address: str
    module: str
    obj: Any

    @property
    def name(self) -> str:
        return self.address.rpartition(".")[2]


def _exports() -> list[tuple[str, str, Any]]:
    return [(m, n, getattr(module(m), n)) for m in modules() for n in public_names(m)]


def _named(obj: Any) -> bool:
    return inspect.isclass(obj) or inspect.isfunction(obj)


@cache
def entries() -> dict[tuple[int, str], Entry]:
    """Every entry, by (id of the object, a name it is exported under)."""
    public = set(modules())
    out: dict[tuple[int, str], Entry] = {}
    for m, n, obj in _exports():
        key = (id(obj), n)
        if key in out:
            continue
        if inspect.ismodule(obj):  # its own section (every module the API exports is public)
            out[key] = Entry(obj.__name__, obj.__name__, obj)
        elif _named(obj) and obj.__name__ == n and obj.__module__ in public:
            out[key] = Entry(f"{obj.__module__}.{obj.__qualname__}", obj.__module__, obj)
        else:
            out[key] = Entry(f"{m}.{n}", m, obj)
    for (i, _), e in list(out.items()):
        # a class or function exported only under other names: documented where it is
        # defined, in the section of its first other name
        if _named(e.obj) and (i, e.obj.__name__) not in out:
            out[(i, e.obj.__name__)] = Entry(f"{e.obj.__module__}.{e.obj.__qualname__}", e.module, e.obj)
    return out


def entry(module_name: str, name: str) -> Entry:
    """The entry of ``module_name``'s public name ``name``."""
    return entries()[(id(getattr(module(module_name), name)), name)]


def classes() -> dict[int, Entry]:
    """The entry of every public class under its own name, by the id of the class."""
    return {i: e for (i, n), e in entries().items() if inspect.isclass(e.obj) and e.obj.__name__ == n}


def member_address(cls: type, member: str) -> str:
    """The address of the entry of ``cls``'s public ``member``: on ``cls``, or on
    the public class that defines it."""
    by_id = classes()
    owner = by_id.get(id(defined_by(cls, member)), by_id[id(cls)])
    return f"{owner.address}.{member}"


# -- a constant's documentation ---------------------------------------------------------
def _assigns(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def origin(module_name: str, name: str) -> tuple[str, str]:
    """Where ``name`` of ``module_name`` is assigned: the module and the name there,
    found by following the ``from ... import`` statements that brought it in."""
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None, module_name
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    if _assigns(tree, name):
        return module_name, name
    package = module_name if spec.submodule_search_locations else module_name.rpartition(".")[0]
    for node in tree.body:  # the module's own imports (not a function's)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    if source != module_name:  # not a submodule the package imports from itself
                        return origin(source, alias.name)
    return module_name, name


def data_doc(module_name: str, name: str) -> str:
    """The ``#:`` comment over the assignment of constant ``name`` of ``module_name``
    (wherever it was assigned), or ''."""
    from sphinx.pycode import ModuleAnalyzer

    where, there = origin(module_name, name)
    docs = ModuleAnalyzer.for_module(where).find_attr_docs()
    return "\n".join(docs.get(("", there), [])).strip()


def member_doc(cls: type, member: str) -> str:
    """What the reference says of ``cls``'s ``member``: a method's or a property's
    docstring (a method that overrides one without a docstring has its base's), else the
    ``#:`` comment on the attribute in the first class up ``cls``'s bases that has one."""
    from sphinx.pycode import ModuleAnalyzer

    value = inspect.getattr_static(cls, member, None)
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if callable(value) or isinstance(value, property) or hasattr(value, "__set_name__"):
        return inspect.getdoc(getattr(cls, member)) or ""
    for klass in cls.__mro__:
        if ours(klass):
            docs = ModuleAnalyzer.for_module(klass.__module__).find_attr_docs()
            if docs.get((klass.__qualname__, member)):
                return "\n".join(docs[(klass.__qualname__, member)]).strip()
    return ""


def entry_doc(e: Entry) -> str:
    """What the reference says of an entry's object: its docstring (not the one
    ``dataclass`` makes up from the signature of a class without one), or a
    constant's ``#:`` comment."""
    if _named(e.obj) or inspect.ismodule(e.obj) or inspect.ismethod(e.obj):
        doc = inspect.getdoc(e.obj) or ""
        made_up = inspect.isclass(e.obj) and dataclasses.is_dataclass(e.obj) and doc.startswith(f"{e.obj.__name__}(")
        return "" if made_up else doc
    return data_doc(e.address.rpartition(".")[0], e.name)


def key_docs(cls: type) -> dict[str, str]:
    """A scenario table's fields documented key by key (``key(..., doc=...)``, what
    the scenario reference lists): field -> its doc."""
    from fanoutsim.kernel.scenario import keys_of

    return {k.name: k.doc for k in keys_of(cls)} if dataclasses.is_dataclass(cls) else {}


# -- a class's Attributes section ---------------------------------------------------------
_SECTION = re.compile(r"^Attributes\n-{3,}\n", flags=re.M)
_ITEM = re.compile(r"^(\w+) : (.+)$")


def attributes(doc: str) -> tuple[str, dict[str, tuple[str, list[str]]]]:
    """A docstring's text before its NumPy-style ``Attributes`` section, and the
    section's items: name -> (its type, its text's lines, dedented)."""
    found = _SECTION.search(doc)
    if found is None:
        return doc, {}
    items: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in doc[found.end() :].splitlines():
        item = _ITEM.match(line)
        if item:
            name = item.group(1)
            items[name] = (item.group(2), [])
        elif name and (line.startswith("    ") or not line.strip()):
            items[name][1].append(line[4:])
        elif line.strip():
            break  # the next section: not this one's
    return doc[: found.start()], items


def attribute_directives(doc: str) -> str:
    """``doc`` with its ``Attributes`` section written as ``.. attribute::``
    directives, so that each field is an entry of its own (Sphinx's own napoleon
    would also rewrite every attribute's ``#:`` comment that has a colon)."""
    head, items = attributes(doc)
    if not items:
        return doc
    out = [head.rstrip(), ""]
    for name, (kind, lines) in items.items():
        out += [f".. attribute:: {name}", f"   :type: {kind}", ""]
        out += [f"   {line}" if line.strip() else "" for line in lines] + [""]
    return "\n".join(out).rstrip() + "\n"
