"""The fast CEL path (fanoutsim.kernel.cel) against celpy, the reference.

Generated expressions over the compiled subset and generated JSON-like
payloads: the fast closure must give the same value of the same CEL type as
celpy, and an error exactly where celpy gives one. Then each construct and
edge case by hand, and the filter a subscription carries (Predicate) on both
paths: same (value, error) pair, error text included.
"""

from __future__ import annotations

import functools
import math

import celpy
import pytest
from celpy import celtypes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fanoutsim.designs.reactor.predicate import ALLOWED_VARIABLES, InvalidPredicate, activation, compile_predicate
from fanoutsim.kernel.cel import _Unsupported, compile_fast, to_cel

ENV = celpy.Environment()
INT64_MAX, INT64_MIN, UINT64_MAX = 2**63 - 1, -(2**63), 2**64 - 1


def celpy_outcome(expr: str, act: dict):
    try:
        return "value", typed(ENV.program(ENV.compile(expr)).evaluate(act))
    except Exception:  # noqa: BLE001 - any exception is celpy's "error" outcome
        return "error", None


def fast_outcome(expr: str, act: dict):
    run = compile_fast(ENV.compile(expr), ALLOWED_VARIABLES)
    assert run is not None, f"{expr!r} is in the subset but did not compile"
    try:
        result = run(act)
    except _Unsupported:  # the fast path defers, and the caller asks celpy (as Predicate does)
        return celpy_outcome(expr, act)
    except Exception:  # noqa: BLE001
        return "error", None
    if isinstance(result, celpy.CELEvalError):
        return "error", None
    return "value", typed(result)


def typed(v):
    """A value with its CEL type at every level, NaN equal to NaN, -0.0 apart from 0.0."""
    name = type(v).__name__
    if isinstance(v, dict):
        return name, tuple((typed(k), typed(x)) for k, x in v.items())
    if isinstance(v, list):
        return name, tuple(typed(x) for x in v)
    if isinstance(v, float):
        return name, repr(float(v)) if not math.isnan(v) else "nan"
    if isinstance(v, celpy.CELEvalError):
        return "error", None
    return name, v


def act_for(payload, reactor="r1", tenant="acme") -> dict:
    return activation(payload, reactor, tenant)


def same(expr: str, payload, reactor="r1", tenant="acme"):
    act = act_for(payload, reactor, tenant)
    ref = celpy_outcome(expr, act)
    got = fast_outcome(expr, act)
    assert got == ref, (expr, payload, got, ref)
    return ref


# -- generated expressions ---------------------------------------------------------

KEYS = ["a", "b", "s", "l", "m"]
ints = st.one_of(st.integers(-3, 3), st.sampled_from([INT64_MAX, INT64_MIN, 2**62, -(2**62), 10**12]))
floats = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.5, -3.0, 1e308, float("inf"), float("nan")])
strings = st.sampled_from(["", "a", "ab", "us-east", "eu-central", "A1", "x\u00e9"])
json_scalars = st.one_of(ints, floats, strings, st.booleans(), st.none())
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
    max_leaves=8,
)
payloads = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)

INT_LITS = ["0", "1", "2", "-1", "3", "9223372036854775807", "-9223372036854775808", "0x10"]
UINT_LITS = ["0u", "1u", "2u", "18446744073709551615u"]
DOUBLE_LITS = ["0.0", "1.0", "2.5", "-0.5", "1e308", "-1e308"]
STRING_LITS = ["''", "'a'", "'ab'", "'us-east'", '"eu-central"', "'A1'", "r'\\d'"]
PATTERNS = ["'^a'", "'b$'", "'[0-9]'", "'east'", "''"]


def literal():
    return st.one_of(
        st.sampled_from(INT_LITS),
        st.sampled_from(UINT_LITS),
        st.sampled_from(DOUBLE_LITS),
        st.sampled_from(STRING_LITS),
        st.sampled_from(["true", "false", "null"]),
    )


def reference(bound: tuple[str, ...]):
    paths = st.one_of(
        st.builds(lambda k: f"payload.{k}", st.sampled_from(KEYS)),
        st.builds(lambda k, j: f"payload.{k}.{j}", st.sampled_from(KEYS), st.sampled_from(KEYS)),
        st.builds(lambda k: f"payload['{k}']", st.sampled_from(KEYS)),
        st.builds(
            lambda k, i: f"payload.{k}[{i}]",
            st.sampled_from(["l", "m", "s"]),
            st.sampled_from(["0", "1", "-1", "'a'", "0u", "1.0", "true"]),
        ),
        st.sampled_from(["payload", "tenant", "reactor"]),
    )
    if bound:
        return st.one_of(paths, st.sampled_from(bound))
    return paths


@functools.cache
def expressions(bound: tuple[str, ...] = (), depth: int = 3):
    """CEL text over the compiled subset, ``depth`` levels of operators deep;
    ``bound``: the macro variables in scope."""
    leaf = st.one_of(literal(), reference(bound))
    if depth == 0:
        return leaf
    sub = expressions(bound, depth - 1)
    var = "x" if "x" not in bound else "y"
    body = expressions(bound + (var,), depth - 1)
    binop = st.sampled_from(["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in"])
    return st.one_of(
        leaf,
        st.builds(lambda a, op, b: f"({a} {op} {b})", sub, binop, sub),
        st.builds(lambda op, a: f"{op}({a})", st.sampled_from(["!", "-"]), sub),
        st.builds(lambda c, a, b: f"({c} ? {a} : {b})", sub, sub, sub),
        st.builds(lambda a: f"has({a})", reference(bound).filter(lambda r: "." in r)),
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(["size", "int", "uint", "double", "string", "dyn"]), sub),
        st.builds(lambda a: f"({a}).size()", sub),
        st.builds(
            lambda a, m, b: f"({a}).{m}({b})",
            sub,
            st.sampled_from(["contains", "startsWith", "endsWith"]),
            st.one_of(st.sampled_from(STRING_LITS), sub),
        ),
        st.builds(lambda a, p: f"({a}).matches({p})", sub, st.sampled_from(PATTERNS)),
        st.builds(lambda items: "[" + ", ".join(items) + "]", st.lists(sub, max_size=3)),
        st.builds(
            lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}",
            st.lists(
                st.tuples(st.one_of(st.sampled_from(["'a'", "'b'", "1", "2u", "true", "1.5"]), sub), sub), max_size=2
            ),
        ),
        st.builds(
            lambda a, m, b: f"({a}).{m}({var}, {b})",
            sub,
            st.sampled_from(["exists", "all", "exists_one", "map", "filter"]),
            body,
        ),
    )


# Filter-shaped expressions: mostly well typed against a payload that mostly
# has the usual types (i: int, f: double, s: string, b: bool, l: list of ints,
# m: map of strings), so that values, not only errors, are compared.
typed_payloads = st.fixed_dictionaries(
    {},
    optional={
        "i": st.one_of(ints, ints, ints, json_values),
        "f": st.one_of(floats, floats, floats, json_values),
        "s": st.one_of(strings, strings, strings, json_values),
        "b": st.one_of(st.booleans(), st.booleans(), st.booleans(), json_values),
        "l": st.one_of(*[st.lists(ints, max_size=4)] * 3, json_values),
        "m": st.one_of(
            *[st.dictionaries(st.sampled_from(["k", "n", "us-east"]), strings, max_size=3)] * 3, json_values
        ),
    },
)


@functools.cache
def typed_expr(kind: str, depth: int, var: str | None = None):
    """CEL text of type ``kind`` (bool, int, double, string, list); ``var``: an
    int-valued macro variable in scope."""

    def sub(k, d=depth - 1):
        return typed_expr(k, d, var)

    if kind == "int":
        leaf = st.one_of(
            st.sampled_from(
                INT_LITS + ["payload.i", "size(payload.l)", "payload.l[0]", "int(payload.f)", "size(payload.s)"]
            ),
            st.just(var) if var else st.nothing(),
        )
        if depth == 0:
            return leaf
        return st.one_of(
            leaf,
            st.builds(
                lambda a, op, b: f"({a} {op} {b})", sub("int"), st.sampled_from(["+", "-", "*", "/", "%"]), sub("int")
            ),
            st.builds(lambda a: f"-({a})", sub("int")),
            st.builds(lambda c, a, b: f"({c} ? {a} : {b})", sub("bool"), sub("int"), sub("int")),
        )
    if kind == "double":
        leaf = st.sampled_from(DOUBLE_LITS + ["payload.f", "double(payload.i)"])
        if depth == 0:
            return leaf
        return st.one_of(
            leaf,
            st.builds(
                lambda a, op, b: f"({a} {op} {b})", sub("double"), st.sampled_from(["+", "-", "*", "/"]), sub("double")
            ),
        )
    if kind == "string":
        leaf = st.sampled_from(
            STRING_LITS + ["payload.s", "tenant", "reactor", "payload.m.k", "payload.m['us-east']", "string(payload.i)"]
        )
        if depth == 0:
            return leaf
        return st.one_of(leaf, st.builds(lambda a, b: f"({a} + {b})", sub("string"), sub("string")))
    if kind == "list":
        leaf = st.sampled_from(["payload.l", "[1, 2, 3]", "[]"])
        if depth == 0:
            return leaf
        return st.one_of(
            leaf,
            st.builds(lambda a, b: f"[{a}, {b}]", sub("int"), sub("int")),
            st.builds(
                lambda a, m, b: f"{a}.{m}(x, {b})", sub("list"), st.just("map"), typed_expr("int", depth - 1, "x")
            ),
            st.builds(lambda a, b: f"{a}.filter(x, {b})", sub("list"), typed_expr("bool", depth - 1, "x")),
        )
    leaf = st.sampled_from(
        ["true", "false", "payload.b", "has(payload.i)", "has(payload.m.k)", "payload.m.n == null", "'k' in payload.m"]
    )
    if depth == 0:
        return leaf
    cmp = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    return st.one_of(
        leaf,
        st.builds(lambda a, op, b: f"{a} {op} {b}", sub("int"), cmp, sub("int")),
        st.builds(lambda a, op, b: f"{a} {op} {b}", sub("double"), cmp, sub("double")),
        st.builds(lambda a, op, b: f"{a} {op} {b}", sub("string"), cmp, sub("string")),
        st.builds(lambda a, op, b: f"{a} {op} {b}", sub("int"), cmp, sub("double")),  # no mixing: errors
        st.builds(
            lambda a, m, b: f"{a}.{m}({b})",
            sub("string"),
            st.sampled_from(["startsWith", "endsWith", "contains"]),
            sub("string"),
        ),
        st.builds(lambda a, p: f"{a}.matches({p})", sub("string"), st.sampled_from(PATTERNS)),
        st.builds(lambda a, b: f"{a} in {b}", sub("int"), sub("list")),
        st.builds(lambda a: f"{a} in ['us-east', 'eu-central', 'a']", sub("string")),
        st.builds(lambda a, op, b: f"({a} {op} {b})", sub("bool"), st.sampled_from(["&&", "||"]), sub("bool")),
        st.builds(lambda a: f"!({a})", sub("bool")),
        st.builds(lambda c, a, b: f"({c} ? {a} : {b})", sub("bool"), sub("bool"), sub("bool")),
        st.builds(
            lambda a, m, b: f"{a}.{m}(x, {b})",
            sub("list"),
            st.sampled_from(["exists", "all", "exists_one"]),
            typed_expr("bool", depth - 1, "x"),
        ),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(expr=expressions(), payload=payloads)
def test_generated_expressions_agree_with_celpy(expr, payload):
    same(expr, payload)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=typed_expr("bool", 3), payload=typed_payloads, tenant=st.sampled_from(["acme", "a"]))
def test_generated_filters_agree_with_celpy(expr, payload, tenant):
    same(expr, payload, tenant=tenant)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expr=st.one_of(expressions(depth=2), typed_expr("bool", 2)),
    payload=st.one_of(payloads, typed_payloads),
    tenant=st.sampled_from(["acme", "b"]),
)
def test_predicates_agree_with_celpy_error_text_included(expr, payload, tenant):
    fast, slow = compile_predicate(expr), compile_predicate(expr, fast=False)
    assert fast.fast and not slow.fast
    act = act_for(payload, "r1", tenant)
    assert fast.evaluate(act) == slow.evaluate(act), (expr, payload)


# -- each construct by hand -------------------------------------------------------------

P = {"a": 3, "b": 2.5, "s": "us-east", "l": [1, 2, 3], "m": {"k": "v", "n": None}, "t": True, "z": 0, "big": INT64_MAX}

CASES = [
    # field access, indexing, missing keys and null
    ("payload.a", ("value", ("IntType", 3))),
    ("payload.m.k", ("value", ("StringType", "v"))),
    ("payload.m.n == null", ("value", ("BoolType", True))),
    ("payload.missing", ("error", None)),
    ("payload.m.n.x", ("error", None)),
    ("payload.a.x", ("error", None)),
    ("payload['a']", ("value", ("IntType", 3))),
    ("payload.l[0]", ("value", ("IntType", 1))),
    ("payload.l[3]", ("error", None)),
    ("payload.l[1.0]", ("error", None)),
    ("payload.m['nope']", ("error", None)),
    # numbers: int, uint, double do not mix in == and arithmetic
    ("payload.a == 3", ("value", ("BoolType", True))),
    ("payload.a == 3.0", ("error", None)),
    ("payload.b > 2.0", ("value", ("BoolType", True))),
    ("1u + 2u", ("value", ("UintType", 3))),
    ("1u == 1", ("error", None)),
    ("1 + 1.0", ("error", None)),
    ("payload.big + 1", ("error", None)),
    ("-9223372036854775808 - 1", ("error", None)),
    ("0u - 1u", ("error", None)),
    ("payload.a / 0", ("error", None)),
    ("payload.a % 0", ("error", None)),
    ("payload.b / 0.0", ("value", ("DoubleType", "inf"))),
    ("7 / -2", ("value", ("IntType", -3))),
    ("-7 % 3", ("value", ("IntType", -1))),
    ("2.5 % 2.0", ("error", None)),
    # logic: errors absorbed when the other side decides
    ("payload.missing > 1 || true", ("value", ("BoolType", True))),
    ("true || payload.missing > 1", ("value", ("BoolType", True))),
    ("false && payload.a / 0 == 1", ("value", ("BoolType", False))),
    ("payload.missing > 1 && true", ("error", None)),
    ("payload.missing > 1 || false", ("error", None)),
    ("!payload.t", ("value", ("BoolType", False))),
    ("!payload.a", ("error", None)),
    ("1 || true", ("value", ("BoolType", True))),
    ("1 || 2", ("error", None)),
    # ternary
    ("payload.t ? 'y' : payload.missing", ("value", ("StringType", "y"))),
    ("payload.a ? 1 : 2", ("error", None)),
    ("payload.missing ? 1 : 2", ("error", None)),
    # in, has, size
    ("'us-east' in ['us-east', 'eu']", ("value", ("BoolType", True))),
    ("'k' in payload.m", ("value", ("BoolType", True))),
    ("3 in payload.l", ("value", ("BoolType", True))),
    ("has(payload.a)", ("value", ("BoolType", True))),
    ("has(payload.nope)", ("value", ("BoolType", False))),
    ("has(payload.m.k)", ("value", ("BoolType", True))),
    ("size(payload.l) == 3 && payload.s.size() == 7", ("value", ("BoolType", True))),
    ("size(payload.a)", ("error", None)),
    # strings
    ("payload.s.startsWith('us')", ("value", ("BoolType", True))),
    ("payload.s.endsWith('east')", ("value", ("BoolType", True))),
    ("payload.s.contains('-')", ("value", ("BoolType", True))),
    ("payload.s.matches('^[a-z]+-[a-z]+$')", ("value", ("BoolType", True))),
    ("payload.a.startsWith('3')", ("error", None)),
    ("payload.s + '!' == 'us-east!'", ("value", ("BoolType", True))),
    ("'a' < 'b'", ("value", ("BoolType", True))),
    # conversions
    ("int(payload.b) == 2", ("value", ("BoolType", True))),
    ("double(payload.a) == 3.0", ("value", ("BoolType", True))),
    ("string(payload.a) == '3'", ("value", ("BoolType", True))),
    ("uint(-1)", ("error", None)),
    ("int(1e300)", ("error", None)),
    # list and map literals
    ("[1, 2] == [1, 2]", ("value", ("BoolType", True))),
    ("[1, payload.a / 0]", ("error", None)),
    ("{'a': 1}.a == 1", ("value", ("BoolType", True))),
    ("{'a': 1, 'a': 2}", ("error", None)),
    # macros
    ("payload.l.exists(x, x > 2)", ("value", ("BoolType", True))),
    ("payload.l.all(x, x > 0)", ("value", ("BoolType", True))),
    ("payload.l.exists_one(x, x > 2)", ("value", ("BoolType", True))),
    ("payload.l.map(x, x * 2) == [2, 4, 6]", ("value", ("BoolType", True))),
    ("payload.l.filter(x, x != 2)", ("value", ("ListType", (("IntType", 1), ("IntType", 3))))),
    ("[1, 'a', 2].exists(x, x == 2)", ("value", ("BoolType", True))),
    ("[0, 1].all(x, 1 / x > 0)", ("error", None)),  # error && true: the error stands
    ("[0, -1].all(x, 1 / x > 0)", ("value", ("BoolType", False))),  # error && false: false
    ("[0, 1].exists(x, 1 / x > 0)", ("value", ("BoolType", True))),
    ("true || [0].map(x, 1 / x)[0] == 1", ("error", None)),  # celpy raises out of map
    ("payload.m.exists(k, k == 'n')", ("value", ("BoolType", True))),
    ("payload.a.exists(x, true)", ("error", None)),
    ("payload.l.exists(x, payload.l.exists(x, x == 3))", ("value", ("BoolType", True))),
    ("payload.l.exists(payload, payload == 2)", ("value", ("BoolType", True))),
    # the inlined fast cases at their edges
    ("-9223372036854775808 / -1", ("error", None)),
    ("-9223372036854775808 % -1", ("value", ("IntType", 0))),
    ("payload.big * 2", ("error", None)),
    ("-7 / 2 == -3 && 7 % -3 == 1", ("value", ("BoolType", True))),
    ("'a' in [1, 'a']", ("value", ("BoolType", True))),
    ("'b' in [1, 'a']", ("error", None)),
    ("3 in ['a', 3]", ("value", ("BoolType", True))),
    ("null in [1]", ("error", None)),
    ("size(payload.m.n) == 0", ("value", ("BoolType", True))),
    ("payload.m.n.matches('x')", ("error", None)),
    ("payload.s.matches('[')", ("error", None)),
    ("payload.s.startsWith(payload.s)", ("value", ("BoolType", True))),
    ("payload.l.contains(2)", ("value", ("BoolType", True))),
    ("1.5 < 2", ("value", ("BoolType", True))),  # celpy: a double on the left compares with an int
    ("2 > 1.5", ("error", None)),
    ("true == 1", ("value", ("BoolType", True))),
    ("1 == true", ("error", None)),
    # the other variables
    ("tenant == 'acme' && reactor.startsWith('r')", ("value", ("BoolType", True))),
]


@pytest.mark.parametrize(("expr", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_construct_matches_celpy_and_cel(expr, expected):
    assert same(expr, P) == expected


OUTSIDE = [
    "payload.l.min() == 1",
    "type(payload.a) == int",
    "b'abc' == b'abc'",
    "timestamp('2026-01-01T00:00:00Z') > timestamp('2025-01-01T00:00:00Z')",
    "duration('1s') == duration('1s')",
    "payload.s.lowerAscii() == 'us-east'",
    "has()",
]


@pytest.mark.parametrize("expr", OUTSIDE)
def test_outside_the_subset_is_left_to_celpy(expr):
    assert compile_fast(ENV.compile(expr), ALLOWED_VARIABLES) is None
    fast, slow = compile_predicate(expr), compile_predicate(expr, fast=False)
    assert not fast.fast
    act = act_for(P)
    assert fast.evaluate(act) == slow.evaluate(act)


def test_reduce_is_left_to_celpy():
    assert compile_fast(ENV.compile("payload.l.reduce(r, x, 0, r + x) > 1"), ALLOWED_VARIABLES) is None


def test_typical_filters_compile_and_the_switch_forces_celpy(monkeypatch):
    for expr in [
        "payload.quote.price > 100.0 && payload.quote.region == 'us-east'",
        "payload.quote.tags.exists(t, t == 'a')",
        "tenant == 'acme' || reactor == 'r2'",
        "has(payload.quote.price) && payload.quote.price > 100.0",
    ]:
        assert compile_predicate(expr).fast
        assert not compile_predicate(expr, fast=False).fast
        monkeypatch.setenv("FANOUTSIM_CEL", "celpy")
        assert not compile_predicate(expr).fast
        monkeypatch.setenv("FANOUTSIM_CEL", "fast")
        assert compile_predicate(expr).fast
        monkeypatch.delenv("FANOUTSIM_CEL")
    monkeypatch.setenv("FANOUTSIM_CEL", "turbo")
    with pytest.raises(RuntimeError, match="FANOUTSIM_CEL='turbo'.*'fast'.*'celpy'"):
        compile_predicate("payload.x > 1")


def test_one_compiled_filter_serves_every_subscription_with_its_text(monkeypatch):
    """Compiling is the expensive part at thousands of subscriptions; the
    compiled program is immutable, so equal text gives the same object, and
    only the evaluator chosen (fast or celpy) makes another."""
    expr = "payload.quote.price > 101.5"
    assert compile_predicate(expr) is compile_predicate(expr)
    assert compile_predicate(expr, fast=False) is not compile_predicate(expr)
    monkeypatch.setenv("FANOUTSIM_CEL", "celpy")
    assert compile_predicate(expr) is compile_predicate(expr, fast=False)
    with pytest.raises(InvalidPredicate):  # a bad filter is refused every time, never cached as good
        compile_predicate("payload.x >")
    with pytest.raises(InvalidPredicate):
        compile_predicate("payload.x >")


def test_subscriptions_with_one_filter_text_share_its_program():
    import fanoutsim as fs

    sim = fs.Simulation(seed=0)
    for wf in ("a", "b"):
        sim.runner.subscribe_workflow_to_reactor("r", wf, when="payload.quote.price > 100")
    subs = sim.store.rows("reactor_subscriptions")
    p1, p2 = (sim.engine.predicate_for(s) for s in subs)
    assert p1 is p2 and p1.expr == "payload.quote.price > 100"


def test_error_outcomes_report_celpy_text():
    p, ref = compile_predicate("payload.a / payload.z > 1"), compile_predicate("payload.a / payload.z > 1", fast=False)
    act = act_for(P)
    value, error = p.evaluate(act)
    assert value is None and error is not None and "divide by zero" in error
    assert (value, error) == ref.evaluate(act)
    p = compile_predicate("payload.a + 1")  # not a bool: celpy's wording
    assert p.evaluate(act) == (None, "predicate returned IntType, not bool")


def test_an_activation_without_a_variable_falls_back_to_celpy():
    p, ref = compile_predicate("tenant == 'a'"), compile_predicate("tenant == 'a'", fast=False)
    act = {"payload": celpy.json_to_cel({}), "reactor": celtypes.StringType("r")}
    assert p.evaluate(act) == ref.evaluate(act)
    assert p.evaluate(act)[0] is None


@settings(max_examples=200, deadline=None)
@given(
    value=st.one_of(
        json_values,
        st.dictionaries(
            st.sampled_from(KEYS),
            st.one_of(json_values, st.sampled_from([2**63, -(2**63) - 1, 2**64]), st.tuples(st.integers(-2, 2))),
            max_size=4,
        ),
    )
)
def test_activation_values_are_json_to_cel_values(value):
    def outcome(convert):
        try:
            return typed(convert(value))
        except ValueError as ex:
            return "ValueError", str(ex)

    assert outcome(to_cel) == outcome(celpy.json_to_cel)


def test_every_shipped_scenario_filter_runs_on_the_fast_path():
    import tomllib
    from pathlib import Path

    def whens(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "when" and isinstance(v, str):
                    yield v
                else:
                    yield from whens(v)
        elif isinstance(node, list):
            for v in node:
                yield from whens(v)

    found = [
        w
        for f in sorted((Path(__file__).parents[1] / "fanoutsim" / "examples").glob("*.toml"))
        for w in whens(tomllib.loads(f.read_text()))
    ]
    assert found
    assert [w for w in found if not compile_predicate(w).fast] == []


def test_string_of_a_map_holding_an_error_defers_to_celpy():
    # celpy's text would be its error's repr, with the source of the failing part
    run = compile_fast(ENV.compile("string({'a': payload.a})"), ALLOWED_VARIABLES)
    assert run is not None
    with pytest.raises(_Unsupported):
        run(act_for({}))
    assert same("string({'a': payload.a})", {"a": 1}) == fast_outcome("string({'a': payload.a})", act_for({"a": 1}))
    run(act_for({"a": 1}))  # no error inside: the fast path answers
    same("string({'a': payload.a})", {})
    same("string([{'a': payload.a}]) == ''", {})
    pred = compile_predicate("string({'a': payload.a}) == 'x'")
    assert pred.fast and pred.evaluate(act_for({})) == compile_predicate(
        "string({'a': payload.a}) == 'x'", fast=False
    ).evaluate(act_for({}))
