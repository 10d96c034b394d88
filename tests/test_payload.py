"""The payload codec: bincode-shaped map of source -> JSON bytes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.designs.reactor.payload import (
    decode_payload,
    decode_sources,
    decode_value,
    encode_decoded,
    encode_payload,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=10,
)


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda k: not k.startswith("__")),
        json_values | st.binary(max_size=16),
        max_size=5,
    )
)
def test_round_trip(sources):
    blob = encode_payload(sources)
    raw = decode_payload(blob)
    assert list(raw) == list(sources)
    decoded = decode_sources(blob)
    for key, value in sources.items():
        if isinstance(value, bytes):
            assert raw[key] == value
            try:
                expected = json.loads(value)
            except (UnicodeDecodeError, ValueError):
                expected = value.hex()
            assert decoded[key] == expected
        else:
            assert decoded[key] == json.loads(json.dumps(value))


def test_layout_is_bincode_hashmap_of_byte_vectors():
    blob = encode_payload({"q": 1})
    assert blob == (1).to_bytes(8, "little") + (1).to_bytes(8, "little") + b"q" + (1).to_bytes(8, "little") + b"1"


def test_bookkeeping_keys_are_hidden_from_subscribers():
    assert decode_sources(encode_payload({"__reactor_seq": 4, "quote": {"p": 1}})) == {"quote": {"p": 1}}


# bytes a source may hold: JSON as the encoder writes it, and what json.loads reads otherwise
_ODD = [
    b"\xef\xbb\xbf1",  # a BOM
    b" 1",
    b"1 ",
    b"1\x00",
    "1".encode("utf-16-le"),
    "[1]".encode("utf-32"),
    b"NaN",
    b"-Infinity",
    b'"\\u00e9"',
    b'{"a":1,"a":2}',
    b"1.50",
    b"-0",
    b"\xff",
    b"",
]
raw_sources = st.binary(max_size=24) | st.sampled_from(_ODD) | json_values.map(lambda v: json.dumps(v).encode())


def _loads_or_hex(raw: bytes):
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return raw.hex()


@given(raw_sources)
def test_decode_value_is_json_loads_or_else_hex(raw):
    # repr: 1 and 1.0 differ, and NaN equals itself
    assert repr(decode_value(raw)) == repr(_loads_or_hex(raw))


@given(st.dictionaries(st.text(max_size=5), raw_sources, max_size=4))
def test_encode_decoded_is_json_dumps(raw):
    context = {key: decode_value(value) for key, value in raw.items()}
    context["reactor_name"] = "r"
    assert encode_decoded(context) == json.dumps(context, separators=(",", ":"))
