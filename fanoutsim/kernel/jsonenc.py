"""Compact JSON, as ``json.dumps(value, separators=(",", ":"), allow_nan=False)``
writes it (``sort_keys`` or ``allow_nan`` if asked), without json's set-up on every call.

``JSONEncoder.encode`` builds a new C encoder for each value it encodes, and
passes through two Python frames to reach it: two thirds of the time of a
small payload. Here the C encoder is built once per thread and called
directly. Same text, same errors. Its table of the containers being encoded
(which catches a circular reference) is the thread's own: a collection
during an encode may run a finalizer, and another thread with it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

__all__ = ["compact_encoder"]


def compact_encoder(*, sort_keys: bool = False, allow_nan: bool = False) -> Callable[[Any], str]:
    """A function of one value: its compact JSON (``ValueError`` for a
    circular reference, and for NaN or infinity unless ``allow_nan``;
    ``TypeError`` for a value JSON cannot hold), as ``json.dumps`` with those options."""
    if c_make_encoder is None:  # pragma: no cover  (CPython always has the C encoder)
        return json.JSONEncoder(separators=(",", ":"), allow_nan=allow_nan, sort_keys=sort_keys).encode
    local = threading.local()
    default = json.JSONEncoder().default  # raises the TypeError json.dumps raises

    def built() -> tuple[Callable[[Any, int], tuple[str, ...]], dict[int, Any]]:
        markers: dict[int, Any] = {}
        enc = c_make_encoder(markers, default, encode_basestring_ascii, None, ":", ",", sort_keys, False, allow_nan)
        local.enc = enc, markers
        return enc, markers

    def encode(value: Any) -> str:
        try:
            enc, markers = local.enc
        except AttributeError:  # this thread's first value
            enc, markers = built()
        try:
            return "".join(enc(value, 0))
        except BaseException:
            markers.clear()  # an error leaves the containers it was in marked
            raise

    return encode
