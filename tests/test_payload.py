"""The payload codec: bincode-shaped map of source -> JSON bytes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.designs.reactor.payload import decode_payload, decode_sources, encode_payload

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
