"""kernel.jsonenc: the same text and the same errors as json.dumps, for any value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.kernel.jsonenc import compact_encoder

keys = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.none(), st.floats(allow_nan=False))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinity included: both refuse them
    st.text(max_size=12),  # non-ASCII included: both escape it
    st.binary(max_size=3),  # bytes: a TypeError in both
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=12,
)


def dumps_outcome(value, sort_keys: bool, allow_nan: bool = False):
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=allow_nan, sort_keys=sort_keys)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


def encoder_outcome(encode, value):
    try:
        return encode(value)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


@given(values, st.booleans(), st.booleans())
def test_the_same_text_or_the_same_error_as_json_dumps(value, sort_keys, allow_nan):
    encode = compact_encoder(sort_keys=sort_keys, allow_nan=allow_nan)
    want = dumps_outcome(value, sort_keys, allow_nan)
    assert encoder_outcome(encode, value) == want
    assert encoder_outcome(encode, value) == want  # and again: nothing left over


def test_an_error_leaves_no_container_marked():
    encode = compact_encoder()
    value = {"x": [1, 2], "bad": float("nan")}
    with pytest.raises(ValueError, match="Out of range float"):
        encode(value)  # raised while ``value`` was marked as being encoded
    value["bad"] = 0.5
    assert encode(value) == '{"x":[1,2],"bad":0.5}'  # not "Circular reference detected"
    loop: list = [value]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        encode(loop)
    loop.pop()
    assert encode(loop) == '[{"x":[1,2],"bad":0.5}]'
