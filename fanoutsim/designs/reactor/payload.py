"""The firing payload: what ``reactor_firings.payload`` holds.

The real system stores a bincode-serialized ``HashMap<String, Vec<u8>>``: one
entry per boundary source, each value the source's JSON encoding (a value that
is already raw bytes is stored as is). We keep that shape byte for byte in
bincode's layout (u64 little-endian lengths), so a payload is opaque bytes in
the log and every subscriber decodes the same snapshot.

Keys that start with ``__`` are bookkeeping written by the reactor itself; they
are excluded from what CEL sees and from the dispatched context.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from typing import Any

from fanoutsim.kernel.jsonenc import compact_encoder

_U64 = struct.Struct("<Q")
# json.dumps(value, separators=(",", ":"), allow_nan=False), without json's set-up per call
_JSON = compact_encoder()
BOOKKEEPING_PREFIX = "__"


def encode_value(key: str, value: Any) -> bytes:
    """One source's value as stored: bytes as they are, anything else as compact
    JSON. A value JSON cannot hold (NaN, infinity, an object) raises TypeError
    naming the source ``key``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    try:
        return _JSON(value).encode()
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"payload source {key!r}: {type(value).__name__} value cannot be JSON-encoded ({exc})"
        ) from None


def encode_payload(sources: Mapping[str, Any]) -> bytes:
    """Serialize ``{source name: value}``; raises TypeError naming a bad source."""
    if not isinstance(sources, Mapping):
        raise TypeError(f"payload must be a mapping of source name to value, not {type(sources).__name__}")
    parts = [_U64.pack(len(sources))]
    for key, value in sources.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"payload source name {key!r} must be a non-empty string")
        k = key.encode()
        v = encode_value(key, value)
        parts += [_U64.pack(len(k)), k, _U64.pack(len(v)), v]
    return b"".join(parts)


def decode_payload(blob: bytes) -> dict[str, bytes]:
    """The raw map: source name -> stored bytes. ValueError if ``blob`` is not
    a payload (too short for the lengths it gives, or with bytes left over)."""
    try:
        return _decode_payload(blob)
    except struct.error:  # a length runs past the end
        raise ValueError(
            f"not a payload: {len(blob)} bytes end inside a length or a name "
            f"(see fanoutsim.designs.reactor.payload for the layout)"
        ) from None


def _decode_payload(blob: bytes) -> dict[str, bytes]:
    (n,) = _U64.unpack_from(blob, 0)
    pos = 8
    out: dict[str, bytes] = {}
    for _ in range(n):
        (kl,) = _U64.unpack_from(blob, pos)
        pos += 8
        key = blob[pos : pos + kl].decode()
        pos += kl
        (vl,) = _U64.unpack_from(blob, pos)
        pos += 8
        out[key] = bytes(blob[pos : pos + vl])
        pos += vl
    if pos != len(blob):
        raise ValueError(f"payload has {len(blob) - pos} trailing bytes")
    return out


# json.loads's own scanner, called directly (json.loads is three Python calls
# around it, and detects an encoding first)
_SCAN = json.JSONDecoder().scan_once


def decode_value(raw: bytes) -> Any:
    """JSON-decoded if possible, otherwise the hex of the raw bytes."""
    try:  # the common case: compact JSON in UTF-8, read by json.loads's scanner alone
        text = raw.decode()
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except (UnicodeDecodeError, StopIteration, ValueError):
        pass
    # else what json.loads decides (whitespace, a BOM, UTF-16 or -32, trailing bytes, not JSON): the
    # scan above succeeds only on text json.loads reads as UTF-8 to the same value
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return raw.hex()


def decode_sources(blob: bytes) -> dict[str, Any]:
    """What subscribers see: decoded sources, bookkeeping keys excluded."""
    return {k: decode_value(v) for k, v in decode_payload(blob).items() if not k.startswith(BOOKKEEPING_PREFIX)}


# json.dumps(value, separators=(",", ":")) of a dict of values decoded from JSON
# (and strings): what an execution's context holds (a decoded NaN written back as NaN)
encode_decoded = compact_encoder(allow_nan=True)


# The end of an execution's context as the poll loop writes it (sources first,
# then these three keys, in the top-level object): read without decoding the
# payload the context carries. A source of the same name moves the key
# earlier, so the tail no longer matches and json decides.
_CONTEXT_TAIL = re.compile(
    r'[{,]"reactor_name":"([^"\\]*)","reactor_firing_id":"([^"\\]{1,64})",'
    r'"reactor_fired_at":"([^"\\]*)"}\Z'
)


def context_firing(context: str) -> tuple[Any, Any, Any]:
    """``(reactor_firing_id, reactor_name, reactor_fired_at)`` of an
    execution's JSON context, each None when absent."""
    m = _CONTEXT_TAIL.match(context, max(0, context.rfind('"reactor_name":"') - 1))
    if m is not None:
        reactor, fid, fired_at = m.groups()
        return fid, reactor, fired_at
    ctx = json.loads(context)  # other text: decode it properly
    return ctx.get("reactor_firing_id"), ctx.get("reactor_name"), ctx.get("reactor_fired_at")
