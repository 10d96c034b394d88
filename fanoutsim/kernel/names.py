"""The one check of a name every design's engine steps make (a reactor, a
workflow, a tenant, a consumer, a partition, a topic, ...)."""

from __future__ import annotations

from typing import Any


def check_name(what: str, value: Any) -> str:
    """``value`` if it is a non-empty string; else a ValueError that names
    ``what`` ("reactor name", "partition") and quotes the value."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


__all__ = ["check_name"]
