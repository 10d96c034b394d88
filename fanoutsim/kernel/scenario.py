"""The scenario frame: what every design's scenario file shares, and one reader
for the schema each design declares.

A scenario file is a TOML document. Every design's has the same frame::

    design = "outbox"                # which design the file describes (no key: the reactor)
    name = "my-run"                  # optional, defaults to the file's stem
    description = "..."              # optional
    [run]                            # the same in every design
    seed = 0                         # int, default 0
    until = 3600.0                   # virtual seconds, > 0 (required)
    store = "memory"                 # "memory" | "duckdb" | a path ending .duckdb
    start = "2026-01-01T00:00:00Z"   # optional: the wall time virtual 0 stands for
    ...                              # the design's own tables
    [[faults]]                       # the fault plan (fanoutsim.kernel.faults.plan):
    kind = "crash_at"                # the kinds the design accepts

A design declares the rest once, as a :class:`Schema`: its top-level tables in
reading order (:class:`Table`, :class:`Settings`, :class:`Array`,
:class:`Faults`), and each table's keys as the fields of a dataclass, made with
:func:`key` (a validator of :mod:`fanoutsim.kernel.validate`, the default, the
doc). :meth:`Schema.read` checks a whole document against it and reports every
problem at once in one :class:`ScenarioError` naming the file, the key path of
each problem (``run.until``, ``consumers[1].retry_budget``; array indexes count
from 0) and what is allowed there; :meth:`Schema.json_schema` writes the same
declaration as a JSON Schema, which an editor can use to complete and check a
TOML file. A rule across keys that a declaration cannot say (a seq start needs
a later join; a seek must come after its consumer joined) is a table's
``rules(item)``: plain code over the values read so far (:class:`Item`).

This module imports no design: :mod:`fanoutsim.scenario` picks the design a file
names from the registry and hands the document to that design's parser.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.store import Store as StoreObject
from fanoutsim.kernel.timeutil import LAST_US, US, parse_start, past_the_clock
from fanoutsim.kernel.validate import (
    DIST_SCHEMA,
    DURATION_REF,
    Invalid,
    JsonSchema,
    Name,
    Seconds,
    Seed,
    Store,
    Text,
    Timestamp,
    Validator,
    is_whole,
    kind,
    show,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from fanoutsim.kernel.faults import FaultPlan
    from fanoutsim.kernel.faults.kinds import Fault

__all__ = [
    "ScenarioError",
    "Problems",
    "read_scenario_file",
    "REQUIRED",
    "Key",
    "key",
    "keys_of",
    "Item",
    "Reading",
    "Part",
    "Table",
    "Settings",
    "Array",
    "Faults",
    "FaultRules",
    "Schema",
    "Run",
    "RUN",
    "read_table",
    "table_schema",
    "unknown_keys",
    "seq_start_needs_join",
    "check_overrides",
    "refuse_existing_store",
    "hint_other_designs",
    "jsonable",
    "DRAFT",
]

DRAFT = "http://json-schema.org/draft-07/schema#"


class ScenarioError(ValueError):
    """A scenario that cannot be loaded or built.

    ``problems`` is a list of ``(key path, message)``; ``source`` the file.
    """

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        if len(self.problems) == 1:
            path, msg = self.problems[0]
            text = f"{source}: {path}: {msg}" if path else f"{source}: {msg}"
        else:
            lines = [f"{source}: {len(self.problems)} problems:"]
            for path, msg in self.problems:
                lines.append(f"  {path}: {msg}".replace("\n", "\n    ") if path else f"  {msg}")
            text = "\n".join(lines)
        super().__init__(text)
        self.text = text
        # args as the constructor takes them, so a copy (SimPy re-raises a failed
        # process's exception as ``type(e)(*e.args)``) or a pickle is the same error
        self.args = (source, self.problems)

    def __str__(self) -> str:
        return self.text


class Problems:
    """The problems found in one document, in the order found: ``(key path, message)``."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.items)

    def raise_if_any(self, source: str) -> None:
        if self.items:
            raise ScenarioError(source, self.items)


@contextmanager
def refused_at_run(source: str, where: str, sim: Any) -> Iterator[None]:
    """A ValueError of a value checked against the run as it is when it is used
    (an int start outside the log then) as a ScenarioError naming ``where`` and
    ``sim``'s virtual time."""
    try:
        yield
    except ValueError as exc:
        raise ScenarioError(source, [(where, f"at t={sim.now:g}: {exc}")]) from None


def read_scenario_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A scenario file's TOML document; a missing, unreadable, non-UTF-8 or
    non-TOML file is a :class:`ScenarioError` (a syntax error names its line)."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ScenarioError(source, [("", "no such scenario file")]) from None
    except IsADirectoryError:
        raise ScenarioError(source, [("", "is a directory, not a scenario file")]) from None
    except OSError as exc:
        raise ScenarioError(source, [("", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(source, [("", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else "TOML"
        what = msg[: m.start()].strip() if m else msg
        raise ScenarioError(source, [(where, f"TOML syntax error: {what}")]) from None


# -- declaring a table's keys ---------------------------------------------------
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a key's default when the key must be given
_KEY = "fanoutsim.scenario.key"


@dataclass(frozen=True)
class Key:
    """One key of a table, as declared with :func:`key`."""

    check: Validator
    default: Any = REQUIRED
    doc: str = ""
    required: str = ""  # what "is required: ..." says (default: the validator's ``required``,
    # else what it allows)
    after: str = ""  # a key of the same table this one must be greater than
    before_until: bool = False  # must be before run.until
    declared_in: str = ""  # must name an item of this [[array]], when it declares any
    name: str = ""  # the key (the field's name); set by keys_of

    def json_schema(self) -> JsonSchema:
        out = {**self.check.json_schema()}
        if self.doc:
            out["description"] = self.doc
        if self.default is not REQUIRED and self.default is not None:
            out["default"] = jsonable(self.default)
        return out


def key(
    check: Validator,
    default: Any = REQUIRED,
    *,
    doc: str,
    required: str = "",
    after: str = "",
    before_until: bool = False,
    declared_in: str = "",
) -> Any:
    """A dataclass field that is a key of a scenario table: checked by ``check``
    (a :class:`~fanoutsim.kernel.validate.Validator`), ``default`` when absent
    (:data:`REQUIRED`: it must be given), documented by ``doc``. ``after``:
    the name of a key of the same table whose value this one must exceed;
    ``before_until``: the value must be before ``run.until``; ``declared_in``:
    the value must name an item of that ``[[array]]`` (read before this one)."""
    spec = Key(check, default, doc, required, after, before_until, declared_in)
    if default is REQUIRED:
        return field(metadata={_KEY: spec})
    return field(default=default, metadata={_KEY: spec})


def keys_of(cls: type) -> tuple[Key, ...]:
    """The declared keys of a table dataclass, in declaration order."""
    return tuple(
        dataclasses.replace(f.metadata[_KEY], name=f.name) for f in dataclasses.fields(cls) if _KEY in f.metadata
    )


# -- reading -----------------------------------------------------------------------
class Reading:
    """The state of reading one document: its ``problems``, the parts read so
    far (``reading[name]``), the names each ``[[array]]`` declares
    (``declared``) and the valid values of every table read (``tables``, by
    key path: ``tables["run"]["until"]``)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems = Problems()
        self.values: dict[str, Any] = {}
        self.declared: dict[str, list[str]] = {}
        self.tables: dict[str, dict[str, Any]] = {}

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def until(self) -> float | None:
        """``run.until`` when it is valid, else None."""
        return self.tables.get("run", {}).get("until")

    def header(self) -> dict[str, Any]:
        """The frame's values as a scenario's fields: ``name``, ``source``,
        ``description``, ``seed``, ``until``, ``store``, ``start``."""
        run = self.values["run"]
        return {
            "name": self.values["name"],
            "source": self.source,
            "description": self.values["description"],
            "seed": run.seed,
            "until": run.until,
            "store": run.store,
            "start": run.start,
        }


class Item:
    """One table being read, as a table's ``rules(item)`` sees it: ``where``
    (its key path), ``raw`` (the TOML table), ``values`` (each key's kept
    value, the default for an absent one; a key with a problem is missing),
    ``reading`` (the whole document's :class:`Reading`)."""

    def __init__(self, where: str, raw: dict[str, Any], reading: Reading) -> None:
        self.where = where
        self.raw = raw
        self.reading = reading
        self.values: dict[str, Any] = {}
        self.result: Any = None
        self._before = len(reading.problems)

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if key else self.where

    def fail(self, key: str, message: str) -> None:
        """A problem at this table's ``key`` (``""``: the table itself)."""
        self.reading.problems.add(self.path(key), message)

    def ok(self, *names: str) -> bool:
        """Each of ``names`` has a valid value (given or default)."""
        return all(n in self.values for n in names)

    @property
    def failed(self) -> bool:
        """A problem was found in this table."""
        return len(self.reading.problems) > self._before


def checked_args(cls: type, **values: Any) -> dict[str, Any]:
    """A Python API's arguments checked by the keys the table ``cls`` declares,
    so the API refuses what a scenario file refuses, with the same words: the
    kept values, or a ValueError naming the argument (``rate must be ...``).
    An optional key (default None) may be None."""
    kept: dict[str, Any] = {}
    for k in keys_of(cls):
        if k.name not in values:
            continue
        value = values[k.name]
        if value is None and k.default is None:
            kept[k.name] = None
            continue
        try:
            kept[k.name] = k.check(value)
        except Invalid as exc:
            raise ValueError(f"{k.name}{'.' + exc.key if exc.key else ''} {exc.message}") from None
        if k.after and kept.get(k.after) is not None and kept[k.name] <= kept[k.after]:
            raise ValueError(f"{k.name} must be after {k.after} ({kept[k.after]:g}), got {show(value)}")
    return kept


def unknown_keys(
    table: Mapping[str, Any], allowed: Sequence[str], where: str, problems: Problems, note: str = ""
) -> None:
    """A problem for each key of ``table`` not in ``allowed``, listing the allowed ones."""
    for k in table:
        if k not in allowed:
            if not where:
                scope = "allowed top-level keys"
            else:
                scope = f"allowed keys in {f'[{where}]' if '[' not in where else where}"
            problems.add(
                f"{where}.{k}" if where else k,
                f"unknown key; {scope}{f' {note}' if note else ''}: {', '.join(allowed)}",
            )


def _read_key(k: Key, item: Item) -> None:
    if k.name not in item.raw:
        if k.default is REQUIRED:
            required = k.required or getattr(k.check, "required", "")
            item.fail(k.name, f"is required: {required}" if required else f"is required ({k.check.allowed})")
        else:
            item.values[k.name] = k.default
        return
    value = item.raw[k.name]
    try:
        kept = k.check(value)
    except Invalid as exc:
        item.fail(f"{k.name}.{exc.key}" if exc.key else k.name, exc.message)
        return
    if k.after and item.values.get(k.after) is not None and kept <= item.values[k.after]:
        item.fail(k.name, f"must be after {k.after} ({item.values[k.after]:g}), got {show(value)}")
        return
    until = item.reading.until
    if k.before_until and until is not None and kept >= until:
        item.fail(k.name, f"must be before run.until ({until:g}), got {show(value)}")
        return
    names = item.reading.declared.get(k.declared_in) if k.declared_in else None
    if names and kept not in names:
        item.fail(k.name, f"{kept!r} is not declared in [[{k.declared_in}]]; declared: {', '.join(names)}")
        return
    item.values[k.name] = kept


def read_table(
    cls: type,
    raw: Any,
    where: str,
    reading: Reading,
    *,
    only: tuple[str, ...] | None = None,
    note: str = "",
    rules: Callable[[Item], None] | None = None,
    make: Callable[[Any], Any] | None = None,
) -> Item | None:
    """Read the TOML table ``raw`` at key path ``where`` into the dataclass
    ``cls`` by its declared keys (``only``: just these, ``note`` says why in
    the unknown-key message), then ``rules(item)``; ``item.result`` is the
    instance (through ``make``, if given), or None when a problem was found.
    Returns None when ``raw`` is not a table."""
    if not isinstance(raw, dict):
        reading.problems.add(where, f"must be a table, got {kind(raw)}")
        return None
    keys = [k for k in keys_of(cls) if only is None or k.name in only]
    item = Item(where, raw, reading)
    unknown_keys(raw, [k.name for k in keys], where, reading.problems, note)
    for k in keys:
        _read_key(k, item)
    reading.tables[where] = item.values
    if rules is not None:
        rules(item)
    if item.failed:
        return item
    try:
        value = cls(**item.values)
        item.result = make(value) if make is not None else value
    except (ValueError, TypeError) as exc:  # what the class checks beyond the declaration
        item.fail("", str(exc))
    return item


def table_schema(cls: type, doc: str = "", only: tuple[str, ...] | None = None) -> JsonSchema:
    """The JSON Schema of a table read by :func:`read_table`: its declared keys
    (``only``: just these), what each allows, its doc and default."""
    keys = [k for k in keys_of(cls) if only is None or k.name in only]
    out: JsonSchema = {"type": "object"}
    if doc:
        out["description"] = doc
    out["properties"] = {k.name: k.json_schema() for k in keys}
    required = [k.name for k in keys if k.default is REQUIRED]
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _doc(cls: type, doc: str) -> str:
    if doc:
        return doc
    text = inspect.getdoc(cls) or ""
    return "" if text.startswith(f"{cls.__name__}(") else text  # not the dataclass's made-up signature


def jsonable(value: Any) -> Any:
    """A default as JSON: a Dist as its TOML notation, a tuple as a list."""
    if isinstance(value, Dist):
        if value.law == "fixed":
            return value.a
        return value.as_table()
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value


# -- the parts of a document ---------------------------------------------------------
class Part:
    """One top-level key of a design's scenario: how to read it (``read``), what
    it is when absent (``absent``: a problem if ``required``), its JSON Schema."""

    name: str = ""
    doc: str = ""
    required: str = ""  # what "is required: ..." says; "" for an optional part

    def read(self, value: Any, reading: Reading) -> Any:  # overridden
        raise NotImplementedError

    def default(self) -> Any:
        return None

    def absent(self, reading: Reading) -> Any:
        if self.required:
            reading.problems.add(self.name, f"is required: {self.required}")
        return self.default()

    def json_schema(self) -> JsonSchema:  # overridden
        return {}


class Table(Part):
    """A ``[name]`` table read into the dataclass ``cls`` by its declared keys."""

    def __init__(
        self, name: str, cls: type, *, doc: str = "", required: str = "", rules: Callable[[Item], None] | None = None
    ) -> None:
        self.name, self.cls, self.doc, self.required, self.rules = name, cls, _doc(cls, doc), required, rules

    def read(self, value: Any, reading: Reading) -> Any:
        if not isinstance(value, dict):
            reading.problems.add(self.name, f"must be a table ([{self.name}]), got {kind(value)}")
            return None
        item = read_table(self.cls, value, self.name, reading, rules=self.rules)
        assert item is not None, "read_table reads every dict"
        return item.result

    def default(self) -> Any:
        return None if self.required else self.cls()

    def json_schema(self) -> JsonSchema:
        return table_schema(self.cls, self.doc)


class Settings(Part):
    """A ``[name]`` table of an engine's config dataclass ``cls``: each key is
    checked by building ``cls`` with it alone, so an error is the engine's own
    (its field name dropped: the key path names it); a key refused alone is
    checked again with the table's other keys (a rule spanning fields, e.g.
    one that depends on another key given here), and the whole config is
    built once at the end. ``choices``: allowed
    values of a field, for the JSON Schema; the field docs are the comments on
    the dataclass's field lines."""

    def __init__(
        self, name: str, cls: type, *, doc: str = "", choices: Mapping[str, tuple[Any, ...]] | None = None
    ) -> None:
        self.name, self.cls, self.doc, self.choices = name, cls, doc, dict(choices or {})

    def read(self, value: Any, reading: Reading) -> Any:
        if not isinstance(value, dict):
            reading.problems.add(self.name, f"must be a table ([{self.name}]), got {kind(value)}")
            return self.cls()
        allowed = tuple(f.name for f in dataclasses.fields(self.cls))
        unknown_keys(value, allowed, self.name, reading.problems)

        def error(k: str, exc: Exception) -> None:
            message = str(exc)
            reading.problems.add(f"{self.name}.{k}", message[len(k) + 1 :] if message.startswith(k + " ") else message)

        alone: dict[str, Exception | None] = {}
        for k, v in value.items():
            if k not in allowed:
                continue
            try:  # one field at a time, so each error is pinned to its key
                self.cls(**{k: v})
            except (ValueError, TypeError) as exc:
                alone[k] = exc
            else:
                alone[k] = None
        fine = {k: value[k] for k, exc in alone.items() if exc is None}
        good: dict[str, Any] = {}
        for k, refused in alone.items():
            if refused is not None:  # refused against the defaults: a rule spanning fields may
                try:  # accept it with the other keys this table gives
                    self.cls(**{**fine, k: value[k]})
                except (ValueError, TypeError):
                    error(k, refused)
                    continue
            good[k] = value[k]
        try:  # the whole config's own check, once: a rule spanning fields names its key
            return self.cls(**good)
        except (ValueError, TypeError) as exc:
            k = next((k for k in good if str(exc).startswith(k + " ")), None)
            if k is None:
                reading.problems.add(self.name, str(exc))
            else:
                error(k, exc)
            return self.cls()

    def default(self) -> Any:
        return self.cls()

    def json_schema(self) -> JsonSchema:
        comments = _field_comments(self.cls)
        types = {"float": "number", "int": "integer", "str": "string", "bool": "boolean"}
        props: dict[str, JsonSchema] = {}
        for f in dataclasses.fields(self.cls):
            prop: JsonSchema = {}
            name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            name = name.removesuffix(" | None")  # optional: TOML has no null, the key is left out
            t = types.get(name)
            if f.name in self.choices:
                prop["enum"] = list(self.choices[f.name])
            elif name == "Dist":  # seconds, or a law's table
                prop.update(DURATION_REF)
            elif name == "tuple[float, ...]":  # a list of numbers
                prop.update({"type": "array", "items": {"type": "number"}})
            elif t:
                prop["type"] = t
            if f.name in comments:
                prop["description"] = comments[f.name]
            if f.default is not dataclasses.MISSING:
                prop["default"] = jsonable(f.default)
            props[f.name] = prop
        doc = self.doc or f"any {self.cls.__name__} field ({self.cls.__module__})"
        return {"type": "object", "description": doc, "properties": props, "additionalProperties": False}


def _field_comments(cls: type) -> dict[str, str]:
    """A config dataclass's field docs: the comment on a field's line (``name:
    type = default  # what it is``), else the field's entry in its module's
    docstring (a line ````name```` and the indented lines under it)."""
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, str] = {}
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        source = ""
    for line in source.splitlines():
        m = re.match(r"\s+([A-Za-z_]\w*)\s*:[^#\"']*(?:=\s*[^#]*)?#\s*(.+)$", line)
        if m and m.group(1) in names:
            out.setdefault(m.group(1), m.group(2).strip())
    doc = inspect.getdoc(inspect.getmodule(cls)) or ""
    for m in re.finditer(r"^``([A-Za-z_]\w*)``\n((?:[ \t]+\S.*(?:\n|$))+)", doc, flags=re.M):
        if m.group(1) in names:
            out.setdefault(m.group(1), " ".join(line.strip() for line in m.group(2).splitlines()))
    return out


class Array(Part):
    """An array of ``[[name]]`` tables, each read into the dataclass ``cls``.

    ``required``: what "is required" says when the array is absent (an
    empty one is refused too: it must declare at least one ``noun``);
    ``unique``: a key no two items may share (``noun`` names an item in the
    message); ``rules(item)``: rules across one item's keys; ``make``: turns
    an item into what the scenario keeps; ``check(items, reading)``: rules
    across items. The names the items give (their ``name`` key) are
    ``reading.declared[name]``, for a later key's ``declared_in``."""

    def __init__(
        self,
        name: str,
        cls: type,
        *,
        doc: str = "",
        required: str = "",
        unique: str = "",
        noun: str = "",
        rules: Callable[[Item], None] | None = None,
        make: Callable[[Any], Any] | None = None,
        check: Callable[[list[Item], Reading], None] | None = None,
    ) -> None:
        self.name, self.cls, self.doc, self.required = name, cls, _doc(cls, doc), required
        self.unique, self.noun, self.rules, self.make, self.check = unique, noun, rules, make, check

    def default(self) -> tuple[()]:
        return ()

    def read_item(self, raw: Any, where: str, reading: Reading) -> Item | None:
        """One ``[[name]]`` table (overridden for tables of several shapes)."""
        return read_table(self.cls, raw, where, reading, rules=self.rules, make=self.make)

    def read(self, value: Any, reading: Reading) -> tuple[Any, ...]:
        if not isinstance(value, list):
            reading.problems.add(self.name, f"must be an array of tables ([[{self.name}]]), got {kind(value)}")
            return ()
        if self.required and not value:
            reading.problems.add(self.name, f"must declare at least one {self.noun or 'table'}")
        if any(k.name == "name" for k in keys_of(self.cls)):
            reading.declared[self.name] = sorted(
                {i["name"] for i in value if isinstance(i, dict) and isinstance(i.get("name"), str)}
            )
        items: list[Item] = []
        seen: dict[Any, str] = {}  # a unique key's value -> where it was declared
        for i, raw in enumerate(value):
            item = self.read_item(raw, f"{self.name}[{i}]", reading)
            if item is None:
                continue
            items.append(item)
            if self.unique and item.ok(self.unique):
                v = item.values[self.unique]
                if v in seen:
                    item.fail(self.unique, f"{self.noun} {v!r} is already declared at {seen[v]}")
                    item.result = None
                else:
                    seen[v] = item.where
        if self.check is not None:
            self.check(items, reading)
        return tuple(item.result for item in items if item.result is not None)

    def json_schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "array", "items": table_schema(self.cls, self.doc)}
        if self.doc:
            out["description"] = self.doc
        if self.required:
            out["minItems"] = 1
        return out


# -- [[faults]] ---------------------------------------------------------------------
@dataclass(frozen=True)
class FaultRules:
    """What a design accepts in ``[[faults]]``.

    ``label`` names the scenario kind in messages ("an outbox scenario");
    ``accepted`` are its fault kinds, ``refused`` why each other kind is
    refused ("reactor design (...)": the message says "is a fault of the
    <that>"); ``renames`` maps a kind's keys in this design's spelling to the
    fault spec's fields; ``refs`` maps a key to the ``[[array]]`` whose names
    it must give (``reading.declared`` of that name: an array's ``name`` keys,
    or names a design records there itself), ``ref_labels`` a key to how the
    message names them when they are no array's (default ``declared in
    [[array]]``); ``required`` a key to what "is required: ..." says for it;
    ``points`` are its crash points (``points_label`` names them; a point of
    another design is named as that design's, from the points every design
    declared, :data:`fanoutsim.kernel.faults.POINTS`, or from ``other_points``:
    a label -> points, for a design that declares none).
    """

    label: str
    accepted: tuple[str, ...]
    refused: Mapping[str, str] = field(default_factory=dict)
    renames: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    refs: Mapping[str, str] = field(default_factory=dict)
    ref_labels: Mapping[str, str] = field(default_factory=dict)
    required: Mapping[str, str] = field(default_factory=dict)
    points: tuple[str, ...] = ()
    points_label: str = "known points"
    other_points: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Faults(Part):
    """The ``[[faults]]`` tables: each checked on its own (so every bad one is
    reported), then the :class:`~fanoutsim.kernel.faults.FaultPlan`."""

    name = "faults"

    def __init__(self, rules: FaultRules, *, doc: str = "") -> None:
        self.rules = rules
        self.doc = doc or (
            "the fault plan: each table names its kind (see fanoutsim.kernel.faults.plan); "
            f"{rules.label} accepts: {', '.join(rules.accepted)}"
        )

    def read(self, value: Any, reading: Reading) -> FaultPlan | None:
        from fanoutsim.kernel.faults import FaultPlan

        problems, _r = reading.problems, self.rules
        if not isinstance(value, list):
            problems.add("faults", f"must be an array of tables ([[faults]]), got {kind(value)}")
            return None
        specs: list[Fault] = []
        n = len(problems)
        for i, item in enumerate(value):
            spec = self._read_one(item, f"faults[{i}]", reading)
            if spec is not None:
                specs.append(spec)
        if len(problems) > n:
            return None
        try:
            return FaultPlan(tuple(specs))
        except ValueError as exc:  # a rule across faults: one notifications fault, ...
            problems.add("faults", str(exc))
            return None

    def _read_one(self, item: Any, where: str, reading: Reading) -> Fault | None:
        """One ``[[faults]]`` table as its fault spec, or None with its problems
        added: its kind, its keys, their values, then the spec's own checks."""
        from fanoutsim.kernel.faults import KINDS

        problems = reading.problems
        fkind = self._kind(item, where, problems)
        if fkind is None:
            return None
        ren = self.rules.renames.get(fkind, {})
        if not self._keys_known(item, where, fkind, problems):
            return None
        args = self._args(item, where, fkind, reading)
        if args is None or not self._point_known(item, where, fkind, problems):
            return None
        if not self._required_given(item, where, fkind, args, problems):
            return None
        try:
            return KINDS[fkind](**args)
        except (ValueError, TypeError) as exc:
            problems.add(*_fault_problem(str(exc), where, fkind, ren))
            return None

    def _kind(self, item: Any, where: str, problems: Problems) -> str | None:
        """The fault table's ``kind``, one this design accepts; None (with the
        problem added) when ``item`` is no table or its kind is missing, of
        another design or unknown."""
        r = self.rules
        names = ", ".join(r.accepted)
        if not isinstance(item, dict):
            problems.add(where, f"must be a table, got {kind(item)}")
            return None
        fkind = item.get("kind")
        if "kind" not in item:
            problems.add(f"{where}.kind", f"is required; {r.label} accepts: {names}")
            return None
        if not isinstance(fkind, str):
            problems.add(
                f"{where}.kind", f"must be a string naming the kind, got {show(fkind)}; {r.label} accepts: {names}"
            )
            return None
        if fkind in r.refused:
            problems.add(f"{where}.kind", f"{fkind!r} is a fault of the {r.refused[fkind]}; {r.label} accepts: {names}")
            return None
        if fkind not in r.accepted:
            problems.add(f"{where}.kind", f"{show(fkind)} is not a fault kind; {r.label} accepts: {names}")
            return None
        return fkind

    def _keys_known(self, item: dict[str, Any], where: str, fkind: str, problems: Problems) -> bool:
        """Whether every key of the table is one ``fkind`` takes; a problem for
        each other, naming this design's spelling of a key given in the fault
        spec's."""
        r = self.rules
        ren = r.renames.get(fkind, {})
        allowed = self.keys(fkind)
        bad = [k for k in item if k != "kind" and k not in allowed]
        for k in bad:
            hint = ""
            if k in ren.values():
                ours = next(o for o, f in ren.items() if f == k)
                hint = f" (in {r.label} {fkind} names a {ours}: write {ours} = ...)"
            problems.add(f"{where}.{k}", f"unknown key for {fkind!r}; allowed: kind, {', '.join(allowed)}{hint}")
        return not bad

    def _args(self, item: dict[str, Any], where: str, fkind: str, reading: Reading) -> dict[str, Any] | None:
        """The fault spec's arguments (keys renamed to its fields, a window list
        as a tuple), or None at the first renamed key that is no name or
        reference to an undeclared one."""
        r, problems = self.rules, reading.problems
        ren = r.renames.get(fkind, {})
        args = {}
        for k, v in item.items():
            if k == "kind":
                continue
            if k in ren:
                if not isinstance(v, str) or not v.strip():
                    problems.add(f"{where}.{k}", f"must be a non-empty string, got {show(v)}")
                    return None
            declared = reading.declared.get(r.refs.get(k, ""))
            if declared and v not in declared:
                label = r.ref_labels.get(k)
                problems.add(
                    f"{where}.{k}",
                    f"{v!r} is not {label}: {', '.join(declared)}"
                    if label
                    else f"{v!r} is not declared in [[{r.refs[k]}]]; declared: {', '.join(declared)}",
                )
                return None
            args[ren.get(k, k)] = tuple(v) if k == "window" and isinstance(v, list) else v
        return args

    def _point_known(self, item: dict[str, Any], where: str, fkind: str, problems: Problems) -> bool:
        """Whether a ``crash_at_point`` names one of this design's crash points;
        the problem names the design a known point belongs to."""
        from fanoutsim.kernel.faults import POINTS

        r = self.rules
        if fkind != "crash_at_point" or "point" not in item or not r.points or item["point"] in r.points:
            return True
        point = item["point"]
        other = next((d for d, ps in r.other_points.items() if point in ps), None)
        if other is None and point in POINTS:
            other = f"{POINTS[point]} design"
        what = f"{point!r} is a crash point of the {other}" if other else f"{show(point)} is not a crash point"
        problems.add(f"{where}.point", f"{what}; {r.points_label}: {', '.join(r.points)}")
        return False

    def _required_given(
        self, item: dict[str, Any], where: str, fkind: str, args: dict[str, Any], problems: Problems
    ) -> bool:
        """Whether the keys the design requires, then the fault spec's fields
        without a default, are all given; a problem for each missing one."""
        from fanoutsim.kernel.faults import KINDS

        r = self.rules
        ren = r.renames.get(fkind, {})
        missing = [k for k in self.keys(fkind) if k in r.required and k not in item]
        for k in missing:
            problems.add(f"{where}.{k}", f"is required: {r.required[k]}")
        if missing:
            return False
        missing = [
            f.name for f in _spec_fields(KINDS[fkind]) if f.default is dataclasses.MISSING and f.name not in args
        ]
        for name in missing:
            problems.add(
                f"{where}.{next((o for o, f in ren.items() if f == name), name)}", f"is required for {fkind!r}"
            )
        return not missing

    def keys(self, fkind: str) -> list[str]:
        """A fault kind's keys in this design's spelling, ``kind`` aside."""
        from fanoutsim.kernel.faults.kinds import KINDS

        ren = self.rules.renames.get(fkind, {})
        return [
            next((o for o, f in ren.items() if f == name), name)
            for name in (f.name for f in _spec_fields(KINDS[fkind]))
        ]

    def json_schema(self) -> JsonSchema:
        from fanoutsim.kernel.faults.kinds import KINDS

        types: dict[str, JsonSchema] = {
            "float": {"type": "number"},
            "int": {"type": "integer"},
            "str": {"type": "string"},
            "str | None": {"type": "string"},
            "bool": {"type": "boolean"},
            "Window": {
                "type": "array",
                "items": {"type": "number", "minimum": 0},
                "minItems": 2,
                "maxItems": 2,
                "description": "[start, end] in virtual seconds",
            },
            "Any": DURATION_REF,
            "tuple": {"type": "array"},
        }
        variants: list[JsonSchema] = []
        for fkind in self.rules.accepted:
            spec = KINDS[fkind]
            ren = self.rules.renames.get(fkind, {})
            props: dict[str, JsonSchema] = {"kind": {"const": fkind}}
            required = ["kind"]
            for f, ours in zip(_spec_fields(spec), self.keys(fkind)):
                prop = dict(types.get(f.type if isinstance(f.type, str) else "", {}))
                if fkind == "crash_at_point" and f.name == "point" and self.rules.points:
                    prop = {"enum": list(self.rules.points)}
                if ours in ren and f.type == "str | None":
                    prop["description"] = f"optional: the {ours} it applies to"
                if f.default is not dataclasses.MISSING and f.default is not None:
                    prop["default"] = jsonable(f.default)
                props[ours] = prop
                if (
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                ) or ours in self.rules.required:
                    required.append(ours)
            variants.append(
                {
                    "title": fkind,
                    "type": "object",
                    "properties": props,
                    "required": required,
                    "additionalProperties": False,
                }
            )
        return kinds_schema(self.doc, self.rules.accepted, variants)


def kinds_schema(doc: str, kinds: Iterable[str], variants: list[JsonSchema]) -> JsonSchema:
    """The JSON Schema of an array of tables of several shapes told apart by
    their ``kind`` (one of ``kinds``): one of ``variants`` each."""
    return {
        "type": "array",
        "description": doc,
        "items": {
            "type": "object",
            "required": ["kind"],
            "properties": {"kind": {"enum": list(kinds)}},
            "oneOf": variants,
        },
    }


def _spec_fields(spec: type) -> tuple[dataclasses.Field[Any], ...]:
    """A fault kind's fields: every kind of fanoutsim.kernel.faults.plan.KINDS is
    a dataclass, though their base (Fault) is not declared one."""
    return dataclasses.fields(cast("type[DataclassInstance]", spec))


def _fault_problem(message: str, where: str, fkind: str, renames: Mapping[str, str]) -> tuple[str, str]:
    """A fault spec's ``"late_commit.delay.dist must be ..."`` -> (``faults[i].delay.dist``,
    ``"must be ..."``), its field spelled as the scenario spells it."""
    m = re.match(rf"{re.escape(fkind)}\.([A-Za-z_][\w.\[\]]*?)[:.]?(\s|$)", message)
    if not m:
        return where, message
    path = m.group(1)
    head, _, tail = path.partition(".")
    head = next((o for o, f in renames.items() if f == head), head)
    path = f"{head}.{tail}" if tail else head
    return f"{where}.{path}", message[m.end() :].strip() or message


def seq_start_needs_join(item: Item, start: str = "start", join_at: str = "join_at") -> None:
    """A rule of a log consumer's table: a seq ``start`` (an int > 0) must lie in
    the log when the consumer joins, so it needs a ``join_at`` > 0 (at 0 the
    log is empty)."""
    value: Any = item.values.get(start)
    if is_whole(value) and value > 0 and not item.raw.get(join_at):
        item.fail(
            start,
            f"a seq start must lie in the log when the consumer joins; at {join_at} = 0 the log "
            f"is empty, so only 0 is allowed (got {value}); set {join_at} to join later",
        )


# -- the frame: header and [run] ------------------------------------------------------
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UNTIL = Seconds(strict=True, unit="virtual seconds")


@dataclass(frozen=True, kw_only=True)
class Run:
    """``[run]``: the run's seed, length, store and start, the same in every design."""

    seed: int = key(Seed(), 0, doc="the run's seed: the same file and seed make the same run")
    until: float = key(
        _UNTIL,
        doc="how long to run, in virtual seconds (> 0)",
        required="the virtual seconds to run for (a number > 0)",
    )
    store: str = key(
        Store(),
        "memory",
        doc='"memory", "duckdb" (a temporary file), the path of a new '
        ".duckdb file (relative to the current directory; it must not exist yet), "
        '"postgres" (a throwaway PostgreSQL server) or a postgresql:// URI',
    )
    start: str | datetime | None = key(
        Timestamp(),
        None,
        doc="the wall time virtual 0 stands for "
        "(RFC 3339 with a timezone, such as 2026-01-01T00:00:00Z; "
        "a run's times stay within 1677-09-21 and 2262-04-11, "
        "those of pandas' timestamps)",
    )


RUN = Table("run", Run, required="a [run] table")


@dataclass(frozen=True)
class Schema:
    """A design's scenario files, declared once: its tables after ``[run]``, in
    reading order. ``default``: a file without a ``design`` key is this
    design's (the reactor). ``title`` is one line; ``doc`` the format's docs."""

    design: str
    title: str
    parts: tuple[Part, ...]
    doc: str = ""
    default: bool = False
    # JSON Schema rules across the document that no part's schema can say (draft 7's
    # if/then/else: a key's range that another table's key decides), joined by allOf
    rules: tuple[JsonSchema, ...] = ()

    def keys(self) -> tuple[str, ...]:
        """The top-level keys a file of this design may have."""
        return ("design", "name", "description", "run", *self.tables())

    def tables(self) -> tuple[str, ...]:
        """The design's own top-level tables (its parts), in reading order."""
        return tuple(p.name for p in self.parts)

    def read(self, data: Any, *, source: str = "<scenario>", default_name: str = "scenario") -> Reading:
        """Check a parsed TOML document; raises :class:`ScenarioError` listing
        every problem. The :class:`Reading` holds each part's value by name
        (and ``header()``: name, description and the ``[run]`` values)."""
        if not isinstance(data, dict):
            raise ScenarioError(source, [("", f"a scenario must be a TOML document (table), got {kind(data)}")])
        reading = Reading(source)
        problems = reading.problems
        if "design" in data:
            value = data["design"]
            if isinstance(value, str) and value != self.design:  # another design's file: nothing else applies
                raise ScenarioError(
                    source,
                    [
                        (
                            "design",
                            (
                                f"this needs a scenario of the {self.design} design (design = {self.design!r}); "
                                f"the file describes the {value} design (design = {value!r})"
                            ),
                        )
                    ],
                )
            if not isinstance(value, str):
                problems.add("design", f"must be {self.design!r}, got {show(value)}")
        unknown_keys(data, self.keys(), "", problems)
        reading.values["name"], reading.values["description"] = _header(data, default_name, problems)
        for part in (RUN, *self.parts):
            reading.values[part.name] = (
                part.read(data[part.name], reading) if part.name in data else part.absent(reading)
            )
        problems.raise_if_any(source)
        return reading

    def json_schema(self) -> JsonSchema:
        """The declaration as a JSON Schema (draft 7) of the TOML document."""
        design: JsonSchema = {"const": self.design, "description": f"this file describes the {self.design} design"}
        if self.default:
            design["default"] = self.design
        props: dict[str, JsonSchema] = {
            "design": design,
            "name": {
                "type": "string",
                "pattern": f"^{_NAME_RE.pattern}$",
                "description": "the scenario's name (default: the file's stem); it names the output folder",
            },
            "description": {"type": "string", "description": "what the scenario shows"},
            "run": {**RUN.json_schema(), "description": RUN.doc},
        }
        for part in self.parts:
            props[part.name] = part.json_schema()
        required = ["run", *(p.name for p in self.parts if p.required)]
        if not self.default:
            required.insert(0, "design")
        out = {
            "$schema": DRAFT,
            "title": f"fanoutsim {self.design} scenario",
            "description": self.title,
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
            "definitions": {"duration": DIST_SCHEMA},
        }
        if self.rules:
            out["allOf"] = list(self.rules)
        schema: JsonSchema = _markdown(out)
        return schema


def _markdown(node: Any) -> Any:
    """The descriptions of a JSON Schema with reST's ````code```` as Markdown's ```code```."""
    if isinstance(node, dict):
        return {
            k: (v.replace("``", "`") if k == "description" and isinstance(v, str) else _markdown(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_markdown(v) for v in node]
    return node


def _header(data: Mapping[str, Any], default_name: str, problems: Problems) -> tuple[str | None, str]:
    """``name`` (default: the file's stem) and ``description``."""
    name = data.get("name", default_name)
    if "name" in data:
        try:
            name = Name()(name)
        except Invalid as exc:
            problems.add("name", exc.message)
            name = None
        else:
            if not _NAME_RE.fullmatch(name):
                problems.add(
                    "name", f"must be letters, digits, '.', '_' or '-' (it names the output folder), got {name!r}"
                )
    description = data.get("description", "")
    try:
        description = Text()(description)
    except Invalid as exc:
        problems.add("description", exc.message)
        description = ""
    return name, description


# -- building a scenario ------------------------------------------------------------
class RunSettings(Protocol):
    """What :func:`check_overrides` reads of a scenario: its file and its ``[run]`` values."""

    @property
    def source(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def store(self) -> str | StoreObject: ...

    @property
    def until(self) -> float: ...


def check_overrides(
    scenario: RunSettings, seed: int | None, store: str | StoreObject | None, until: float | None
) -> tuple[int, str | StoreObject, float]:
    """``seed``, ``store`` and ``until`` given to a scenario's build or run,
    checked like the file's ``[run]`` values; None means the file's."""
    problems = Problems()
    checks = (("seed", seed, Seed()), ("until", until, _UNTIL), ("store", store, Store()))
    kept: dict[str, Any] = {}
    for name, value, check in checks:
        if value is None:
            kept[name] = getattr(scenario, name)
        elif name == "store" and isinstance(value, StoreObject):
            kept[name] = value
        else:
            try:
                kept[name] = check(value)
            except Invalid as exc:
                problems.add(f"run.{name}", f"{exc.message} (override)")
    start = getattr(scenario, "start", None)
    if "until" in kept and not problems:
        start_us = parse_start(start)  # checked when the file was read
        if start_us + kept["until"] * US > LAST_US:
            problems.add("run.until", past_the_clock(start_us, kept["until"]))
    problems.raise_if_any(scenario.source)
    return kept["seed"], kept["store"], kept["until"]


def refuse_existing_store(source: str, store: object) -> None:
    """A scenario starts from empty tables: an existing .duckdb file is refused, untouched."""
    if isinstance(store, str) and store.endswith(".duckdb") and os.path.exists(store):
        raise ScenarioError(
            source,
            [
                (
                    "run.store",
                    f"{store!r} already exists; a scenario starts from empty tables, "
                    "so delete the file or choose another path",
                )
            ],
        )


def hint_other_designs(
    problems: list[tuple[str, str]], data: Mapping[str, Any], own: tuple[str, ...], owners: Mapping[str, str]
) -> list[tuple[str, str]]:
    """``problems`` of a document read as a design whose top-level keys are
    ``own``, with a hint on each unknown top-level key that is a table of
    another design (``owners``: key -> that design): set design = ... to use it."""
    out: list[tuple[str, str]] = []
    for path, message in problems:
        if path in data and path not in own and path in owners:
            design = owners[path]
            spelled = f"[[{path}]]" if isinstance(data[path], list) else f"[{path}]"
            message += f" ({spelled} belongs to a scenario of the {design} design: set design = {design!r} to use it)"
        out.append((path, message))
    return out
