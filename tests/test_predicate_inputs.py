"""A predicate's inputs key: two firings with the same key get the same answer,
so the checker evaluates each distinct key once."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fanoutsim.designs.reactor.predicate import activation, compile_predicate

EXPRS = [
    "payload.quote.price > 100 && payload.quote.region == 'us-east'",
    "payload.quote.price > 100",
    "has(payload.quote.price)",
    "has(payload.x) && payload.x == 1",
    "payload.x == 1.0",
    "payload.x == true",
    "payload['x'] == 1",
    "payload.quote.tags.exists(t, t == 'a')",
    "size(payload) > 1",
    "tenant == 'acme' || reactor == 'r2'",
    "payload.quote.region in ['us-east', 'eu-central'] && tenant != 'b'",
]
PREDICATES = [compile_predicate(e) for e in EXPRS]

scalars = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 100.5, 101.0, -0.0]),
    st.booleans(),
    st.sampled_from(["us-east", "eu-central", "a", ""]),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["price", "region", "tags", "x"]), inner, max_size=3),
    ),
    max_leaves=6,
)
payloads = st.dictionaries(st.sampled_from(["quote", "x", "y"]), values, max_size=3)
firings = st.tuples(payloads, st.sampled_from(["r1", "r2"]), st.sampled_from(["acme", "b"]))


def answer(p, f):
    return p.evaluate(activation(f[0], f[1], f[2]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=firings, b=firings)
def test_equal_inputs_give_equal_answers(a, b):
    for p in PREDICATES:
        if p.inputs(*a) == p.inputs(*b):
            assert answer(p, a) == answer(p, b), (p.expr, a, b)


def test_the_key_reads_only_the_paths_the_expression_selects():
    p = compile_predicate("payload.quote.price > 100 && payload.quote.region == 'us-east'")
    assert p.paths == (("quote", "price"), ("quote", "region"))
    one = {"quote": {"price": 101.5, "region": "us-east", "symbol": "AAA"}}
    two = {"quote": {"price": 101.5, "region": "us-east", "symbol": "BBB"}}
    assert p.inputs(one, "r", "t") == p.inputs(two, "r", "t")  # the symbol is not read
    assert p.inputs(one, "r", "t") != p.inputs({"quote": {"price": 101, "region": "us-east"}}, "r", "t")
    assert compile_predicate("payload.x == 1").inputs({"x": 1}, "r", "t") != compile_predicate("payload.x == 1").inputs(
        {"x": True}, "r", "t"
    )  # 1 and true are not one value
    assert compile_predicate("payload['x'] == 1").paths == ((),)  # an index: the whole payload
    assert compile_predicate("tenant == 'a'").paths == ()
