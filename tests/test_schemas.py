"""Scenario schemas: one declaration per design gives the checks, the defaults,
the docs and the JSON Schema; the frame in the kernel reads any design's; the
registry picks the design. Also: the committed data/schemas/ files are the
generated ones, and every shipped scenario validates against its schema."""

from __future__ import annotations

import ast
import copy
import tomllib
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path

import jsonschema
import pytest

from fanoutsim import designs
from fanoutsim.kernel.design import Design
from fanoutsim.kernel.scenario import (
    Array,
    FaultRules,
    Faults,
    Item,
    ScenarioError,
    Schema,
    Settings,
    key,
    keys_of,
    seq_start_needs_join,
)
from fanoutsim.kernel.validate import (
    Distribution,
    Fraction,
    IntAtLeast,
    Invalid,
    Name,
    OneOf,
    OrWord,
    Position,
    Rate,
    Seconds,
    Store,
)
from fanoutsim.scenario import json_schema, json_schema_text, load_scenario, parse_scenario, which_design

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "fanoutsim" / "examples").glob("*.toml"))
SCHEMAS = ROOT / "data" / "schemas"
BUILTIN = ("reactor", "outbox", "leases")


def _json_ready(node):
    """A TOML document as JSON would hold it (datetimes as RFC 3339 strings)."""
    if isinstance(node, dict):
        return {k: _json_ready(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_json_ready(v) for v in node]
    if isinstance(node, (datetime, date, time)):
        return node.isoformat()
    return node


def _validator(design: str) -> jsonschema.Draft7Validator:
    schema = json_schema(design)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


# -- the committed files ------------------------------------------------------------
@pytest.mark.parametrize("design", BUILTIN)
def test_the_committed_schema_is_the_generated_one(design):
    path = SCHEMAS / f"{design}.schema.json"
    assert path.read_text(encoding="utf-8") == json_schema_text(design), (
        f"{path} is out of date: run python data/make_schemas.py"
    )


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_shipped_scenario_validates_against_its_designs_schema(path):
    data = tomllib.loads(path.read_text())
    design = data.get("design", "reactor")
    errors = [e.message for e in _validator(design).iter_errors(_json_ready(data))]
    assert errors == []
    assert load_scenario(path).design == design


# -- the JSON Schema says what the reader says ---------------------------------------
OUTBOX = {"design": "outbox", "run": {"until": 60.0}, "consumers": [{"name": "indexer"}], "workload": [{"rate": 2.0}]}
LEASES = {"design": "leases", "run": {"until": 60.0}, "consumers": [{"name": "indexer"}], "workload": [{"rate": 2.0}]}
REACTOR = {
    "run": {"until": 30.0},
    "workflows": [{"name": "wf", "duration": 0.01}],
    "subscriptions": [{"reactor": "r", "workflow": "wf"}],
    "workload": [{"reactor": "r", "rate": 2.0}],
}


def _changed(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    *parents, leaf = path.split(".")
    node = doc
    for p in parents:
        node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
    if value is _DROP:
        del node[leaf]
    else:
        node[leaf] = value
    return doc


_DROP = object()
BAD = [  # (document, key path, value): refused by the reader and by the JSON Schema
    (REACTOR, "run.until", _DROP),
    (REACTOR, "run.until", -1),
    (REACTOR, "run.seed", 1.5),
    (REACTOR, "run.store", "mysql://h/db"),
    (REACTOR, "bogus", 1),
    (REACTOR, "config.prune_policy", "sometimes"),
    (REACTOR, "config.poll_interval", 1),
    (REACTOR, "workflows.0.duration", -1),
    (REACTOR, "workflows.0.duration", {"dist": "normal", "mean": 1}),
    (REACTOR, "subscriptions.0.filter", "x"),
    (REACTOR, "workload.0.rate", 0),
    (REACTOR, "workload.0.payload", "prices"),
    (REACTOR, "name", "../escape"),
    (REACTOR, "faults", [{"kind": "meteor"}]),
    (REACTOR, "faults", [{"kind": "crash_at_point", "point": "x"}]),
    (REACTOR, "faults", [{"kind": "crash_randomly"}]),
    (OUTBOX, "design", "outbx"),
    (OUTBOX, "design", 3),
    (OUTBOX, "consumers", _DROP),
    (OUTBOX, "consumers", []),
    (OUTBOX, "consumers.0.retry_budget", 0),
    (OUTBOX, "consumers.0.timeout", "never"),
    (OUTBOX, "consumers.0.jitter", 1.5),
    (OUTBOX, "consumers.0.start", "middle"),
    (OUTBOX, "outbox.poll", 1),
    (OUTBOX, "outbox.read_mode", "eventually"),
    (OUTBOX, "workload.0.pages", 0),
    (OUTBOX, "config", {}),
    (OUTBOX, "faults", [{"kind": "fail_inserts"}]),
    (OUTBOX, "faults", [{"kind": "late_commit", "probability": 0.1, "delay": 1, "reactor": "r"}]),
    (LEASES, "consumers.0.batch_limit", 9),
    (LEASES, "consumers.0.lease_seconds", 1),
    (LEASES, "consumers.0.poll_interval", 0),
    (LEASES, "workload.0.partitions", 0),
    (LEASES, "workload.0.partitions", ["a", "a"]),
    (LEASES, "actions", [{"kind": "explode", "at": 1}]),
    (LEASES, "actions", [{"kind": "restore"}]),
    (LEASES, "actions", [{"kind": "restore", "at": 1, "consumer": "x"}]),
    (LEASES, "leases.retention", "long"),
    (LEASES, "faults", [{"kind": "notifications"}]),
]


@pytest.mark.parametrize(
    "doc, path, value",
    BAD,
    ids=[f"{d.get('design', 'reactor')}:{p}" + ("-dropped" if v is _DROP else f"={v!r}"[:40]) for d, p, v in BAD],
)
def test_what_the_reader_refuses_the_json_schema_refuses(doc, path, value):
    design = doc.get("design", "reactor")
    doc = _changed(doc, path, value)
    with pytest.raises(ScenarioError):
        parse_scenario(doc)
    assert list(_validator(design).iter_errors(doc))


@pytest.mark.parametrize("doc", [REACTOR, OUTBOX, LEASES], ids=BUILTIN)
def test_the_minimal_documents_pass_both(doc):
    parse_scenario(doc)
    assert not list(_validator(doc.get("design", "reactor")).iter_errors(doc))


@pytest.mark.parametrize("design", BUILTIN)
def test_the_json_schema_lists_exactly_the_declared_keys_with_their_docs_and_defaults(design):
    schema = designs.get(design).scenario_schema
    out = json_schema(design)
    assert tuple(out["properties"]) == schema.keys()
    for part in schema.parts:
        if isinstance(part, Array) and part.name != "actions":
            items = out["properties"][part.name]["items"]
            items = items.get("anyOf", [items])[0]  # the reactor's workload: generated tables first
            declared = keys_of(part.cls)
            assert tuple(items["properties"]) == tuple(k.name for k in declared)
            for k in declared:
                assert items["properties"][k.name]["description"] == k.doc.replace("``", "`")
                if (
                    k.default is not None
                    and not hasattr(k.default, "law")
                    and k.default.__class__.__name__ != "_Required"
                ):
                    assert items["properties"][k.name]["default"] == k.default


def test_a_settings_tables_docs_are_the_config_fields_comments():
    props = json_schema("outbox")["properties"]["outbox"]["properties"]
    assert props["safety_poll_interval"] == {
        "type": "number",
        "description": "a wake-up with no hint, so a lost hint costs at most this",
        "default": 5.0,
    }
    assert props["read_mode"]["enum"] == ["all", "settled", "gap"]
    config = json_schema("reactor")["properties"]["config"]["properties"]
    assert config["prune_policy"]["enum"] == ["ttl", "conservative"]
    # no comment on the line: the field's entry in the config module's docstring
    assert config["watermark"]["description"].startswith('How a subscription\'s cursor reads the log. `"fired_at"`')
    assert "description" not in config["reactor_poll_interval"]


# -- validators -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "validator, value, message",
    [
        (Name(), "", "must be a non-empty string, got ''"),
        (Seconds(), -1, "must be a finite number of seconds >= 0, got -1"),
        (
            Seconds(strict=True, unit="virtual seconds"),
            0,
            "must be a finite number of virtual seconds >= 1e-06 (1 µs, the clock's unit), got 0",
        ),
        (Seconds(), float("inf"), "must be a finite number of seconds >= 0, got inf"),
        (Seconds(), True, "must be a finite number of seconds >= 0, got boolean true"),
        (Rate("events"), "2", "must be a finite number of events per virtual second > 0, got '2'"),
        (Fraction("a share"), 2, "must be a number in [0, 1] (a share), got 2"),
        (IntAtLeast(1, "pages"), 1.0, "must be an integer >= 1 (pages), got 1.0"),
        (OneOf(("a", "b")), "c", "must be one of 'a', 'b'; got 'c'"),
        (OneOf(("a", "b")), ["a"], "must be one of 'a', 'b'; got an array"),
        (Position(), -1, 'must be "beginning", "end" or a seq (an integer >= 0), got -1'),
        (
            OrWord(Seconds(strict=True), "none", "never"),
            "never",
            "must be a finite number of seconds >= 1e-06 (1 µs, the clock's unit), or \"none\" (never), got 'never'",
        ),
        (
            Store(),
            "x.db",
            'must be "memory", "duckdb", a path ending in .duckdb, "postgres" or a postgresql:// URI, got \'x.db\'',
        ),
    ],
)
def test_each_validator_names_what_is_allowed_and_what_it_got(validator, value, message):
    with pytest.raises(Invalid) as info:
        validator(value)
    assert info.value.message == message and info.value.key == ""


def test_a_distribution_names_the_key_below_it():
    with pytest.raises(Invalid) as info:
        Distribution()({"dist": "exponential", "mean": "x"})
    assert (info.value.key, info.value.message) == ("mean", "must be a finite number, got 'x'")
    assert Distribution()(0.5).law == "fixed"
    assert OrWord(Seconds(strict=True), "none", "never")("none") is None


# -- the frame reads a declared schema, generically -------------------------------------
@dataclass(frozen=True)
class Pipe:
    """One ``[[pipes]]`` table of the toy schema."""

    name: str = key(Name(), doc="unique")
    share: float = key(Fraction("of the flow"), 0.5, doc="a share")
    start: str | int = key(Position(), "beginning", doc="where it starts")
    join_at: float = key(Seconds(), 0.0, before_until=True, doc="when it joins")
    leave_at: float | None = key(Seconds(), None, after="join_at", doc="when it leaves")


@dataclass(frozen=True)
class Tap:
    """One ``[[taps]]`` table."""

    pipe: str = key(Name(), declared_in="pipes", doc="a declared pipe")
    duration: object = key(Distribution(), 0.0, doc="how long")


@dataclass(frozen=True)
class Knobs:
    speed: float = 1.0  # how fast everything goes
    mode: str = "on"  # on or off

    def __post_init__(self):
        if self.mode not in ("on", "off"):
            raise ValueError(f"mode must be 'on' or 'off', got {self.mode!r}")


def _pipe_rules(item: Item) -> None:
    seq_start_needs_join(item)
    if item.values.get("share") == 0.25:
        item.fail("share", "0.25 is unlucky")


TOY = Schema(
    "toy",
    "a toy design",
    (
        Settings("knobs", Knobs, choices={"mode": ("on", "off")}),
        Array("pipes", Pipe, required="at least one [[pipes]] table", unique="name", noun="pipe", rules=_pipe_rules),
        Array("taps", Tap),
        Faults(FaultRules(label="a toy scenario", accepted=("crash_at",), refused={"stall": "reactor design"})),
    ),
)


def _problems(doc: dict) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        TOY.read(doc, source="toy.toml")
    return info.value.problems


def test_the_generic_reader_keeps_defaults_and_builds_the_declared_classes():
    r = TOY.read(
        {
            "design": "toy",
            "run": {"until": 10},
            "pipes": [{"name": "a", "leave_at": 5}],
            "taps": [{"pipe": "a"}],
            "knobs": {"speed": 2},
        },
        source="toy.toml",
        default_name="t",
    )
    assert r["pipes"] == (Pipe("a", 0.5, "beginning", 0.0, 5.0),)
    assert r["knobs"] == Knobs(speed=2) and r["faults"] is None
    assert r.header() == {
        "name": "t",
        "source": "toy.toml",
        "description": "",
        "seed": 0,
        "until": 10.0,
        "store": "memory",
        "start": None,
    }


def test_the_generic_reader_reports_every_problem_with_its_key_path_in_reading_order():
    problems = _problems(
        {
            "colour": 1,
            "run": {"until": 10, "seed": "x"},
            "knobs": {"mode": "maybe", "fast": True},
            "pipes": [
                {"name": "a", "share": 2, "start": 3},
                {"name": "a", "join_at": 10},
                {"name": "b", "join_at": 4, "leave_at": 3},
                {"name": "c", "share": 0.25},
                "pipe",
            ],
            "taps": [{"pipe": "z"}, {"pipe": "a", "duration": {"dist": "normal"}}],
            "faults": [
                {"kind": "stall"},
                {"kind": "crash_at", "at": -1},
                {"kind": "crash_at", "at": 1, "downtime": -2},
            ],
        }
    )
    assert problems == [
        ("colour", "unknown key; allowed top-level keys: design, name, description, run, knobs, pipes, taps, faults"),
        ("run.seed", "must be an integer seed, got 'x'"),
        ("knobs.fast", "unknown key; allowed keys in [knobs]: speed, mode"),
        ("knobs.mode", "must be 'on' or 'off', got 'maybe'"),
        ("pipes[0].share", "must be a number in [0, 1] (of the flow), got 2"),
        (
            "pipes[0].start",
            "a seq start must lie in the log when the consumer joins; at join_at = 0 the log is "
            "empty, so only 0 is allowed (got 3); set join_at to join later",
        ),
        ("pipes[1].join_at", "must be before run.until (10), got 10"),
        ("pipes[1].name", "pipe 'a' is already declared at pipes[0]"),
        ("pipes[2].leave_at", "must be after join_at (4), got 3"),
        ("pipes[3].share", "0.25 is unlucky"),
        ("pipes[4]", "must be a table, got string 'pipe'"),
        ("taps[0].pipe", "'z' is not declared in [[pipes]]; declared: a, b, c"),
        (
            "taps[1].duration.dist",
            "must be one of 'fixed', 'exponential', 'uniform', 'lognormal', 'empirical', got 'normal'",
        ),
        ("faults[0].kind", "'stall' is a fault of the reactor design; a toy scenario accepts: crash_at"),
        ("faults[1].at", "must be >= 0, got -1"),
        ("faults[2].downtime", "must be >= 0 seconds, got -2"),
    ]


def test_the_frame_refuses_what_is_missing_and_a_file_of_another_design():
    assert _problems({"name": ""}) == [
        ("name", "must be a non-empty string, got ''"),
        ("run", "is required: a [run] table"),
        ("pipes", "is required: at least one [[pipes]] table"),
    ]
    assert _problems({"run": {}, "pipes": [{}]}) == [
        ("run.until", "is required: the virtual seconds to run for (a number > 0)"),
        ("pipes[0].name", "is required (a non-empty string)"),
    ]
    assert _problems({"design": "outbox", "bogus": 1}) == [
        (
            "design",
            "this needs a scenario of the toy design (design = 'toy'); the file describes the outbox design "
            "(design = 'outbox')",
        )
    ]
    with pytest.raises(ScenarioError, match="must be a TOML document"):
        TOY.read([1])


def test_the_toy_json_schema_comes_from_the_same_declaration():
    out = TOY.json_schema()
    jsonschema.Draft7Validator.check_schema(out)
    assert out["required"] == ["design", "run", "pipes"]
    pipe = out["properties"]["pipes"]["items"]
    assert pipe["required"] == ["name"] and pipe["properties"]["share"] == {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "description": "a share",
        "default": 0.5,
    }
    assert out["properties"]["knobs"]["properties"]["speed"] == {
        "type": "number",
        "description": "how fast everything goes",
        "default": 1.0,
    }
    valid = jsonschema.Draft7Validator(out)
    assert valid.is_valid({"design": "toy", "run": {"until": 1}, "pipes": [{"name": "a"}]})
    assert not valid.is_valid({"design": "toy", "run": {"until": 1}, "pipes": [{"name": "a", "shares": 1}]})


# -- the registry picks the design ------------------------------------------------------
@pytest.fixture
def toy_registered():
    def parse(data, source="<scenario>", default_name="scenario"):
        return TOY.read(data, source=source, default_name=default_name)

    design = Design(
        name="toy",
        title="a toy",
        config_type=Knobs,
        crash_points=(),
        fault_kinds=("crash_at",),
        parse_scenario=parse,
        check=None,
        report=None,
        format_report=None,
        format_check=None,
        tables=None,
        figures=None,
        scenario_schema=TOY,
    )
    designs.register(design)
    yield design
    designs.unregister("toy")


def test_a_registered_design_gets_its_files_its_guesses_and_its_hints(toy_registered, tmp_path):
    doc = {"design": "toy", "run": {"until": 5}, "pipes": [{"name": "a"}]}
    assert parse_scenario(doc)["pipes"][0].name == "a"
    assert which_design({"design": "toi", "pipes": []}) == (
        "toy",
        [
            (
                "design",
                "must be one of 'reactor', 'outbox', 'leases', 'toy', got 'toi' "
                "(the rest of the file is checked as the toy design)",
            )
        ],
    )
    with pytest.raises(ScenarioError) as info:  # a toy table in a reactor file says whose it is
        parse_scenario({"run": {"until": 5}, "pipes": [{"name": "a"}]})
    assert info.value.problems == [
        (
            "pipes",
            "unknown key; allowed top-level keys: design, name, description, run, "
            "config, workflows, subscriptions, workload, faults ([[pipes]] belongs "
            "to a scenario of the toy design: set design = 'toy' to use it)",
        )
    ]
    assert json_schema("toy") == TOY.json_schema()


def test_an_unknown_design_asked_for_lists_the_registered_ones():
    with pytest.raises(ValueError, match="no design named 'toys'; designs: 'reactor', 'outbox', 'leases'"):
        parse_scenario({"run": {"until": 1}}, design="toys")


def test_a_mistyped_design_is_checked_as_the_design_of_most_of_its_tables():
    assert which_design({"design": "x", "consumers": [], "leases": {}})[0] == "leases"
    assert which_design({"design": "x", "consumers": [], "workload": []})[0] == "outbox"  # a tie: the first
    assert which_design({"design": "x", "workload": []})[0] == "reactor"
    assert which_design({"design": 3})[0] == "reactor"
    assert which_design({})[0] == "reactor" and which_design({"design": "leases"}) == ("leases", [])


# -- the layers -------------------------------------------------------------------------
PACKAGE = ROOT / "fanoutsim"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = node.module if node.level == 0 else "fanoutsim.designs." + path.parent.name
            out.append((module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


@pytest.mark.parametrize(
    "path",
    [
        PACKAGE / "kernel" / "scenario.py",
        PACKAGE / "kernel" / "validate.py",
        *(PACKAGE / "designs" / d / "scenario.py" for d in BUILTIN),
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_no_parser_imports_another_designs_or_a_private_name_across_packages(path):
    own = "fanoutsim.kernel" if path.parent.name == "kernel" else f"fanoutsim.designs.{path.parent.name}"
    for module, names in _imports(path):
        if module.startswith("fanoutsim.designs"):
            assert path.parent.name != "kernel", f"the kernel imports {module}"
            assert module.startswith(own), f"{path.name} of {own} imports {module}"
        if module.startswith("fanoutsim") and not module.startswith(own):
            assert not [n for n in names if n.startswith("_")], f"{path} imports private {names} from {module}"
