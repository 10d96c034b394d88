"""Tables as pandas DataFrames: what notebooks and DuckDB SQL read.

Timestamps become timezone-aware UTC ``datetime64[us]`` columns; an execution's
JSON context becomes a dict, with ``reactor_firing_id`` and ``reactor_name``
lifted into columns of their own because every analysis joins on them. A
firing's ``payload`` stays the stored bytes; ``sources`` beside it is what they
decode to, what a subscriber sees (``{"quote": {"price": 150}}``).
"""
from __future__ import annotations

import json
import math
import struct

import numpy as np
import pandas as pd

from .store.base import TABLES, TIMESTAMP_COLUMNS
from .timeutil import from_us


def _timestamps(df: pd.DataFrame) -> pd.DataFrame:
    for col in df.columns:
        if col in TIMESTAMP_COLUMNS:
            df[col] = pd.to_datetime(df[col].astype("Int64"), unit="us", utc=True)
    return df


_TYPES = {"enabled": bool, "predicate_degraded": bool, "predicate_error_count": "int64"}


def table_frame(table: str, rows: list[dict]) -> pd.DataFrame:
    # object columns first, so a NULL stays None (pandas would make text NaN)
    df = pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=object) for c in TABLES[table]})
    for col, dtype in _TYPES.items():
        if col in df.columns:
            df[col] = df[col].astype(dtype)
    if table == "reactor_firings":
        df.insert(df.columns.get_loc("payload") + 1, "sources",
                  pd.Series([_sources(p) for p in df["payload"]], index=df.index, dtype=object))
    if table == "workflow_executions":
        contexts = [json.loads(c) for c in df["context"]]
        df["context"] = pd.Series(contexts, index=df.index, dtype=object)
        df.insert(2, "reactor_firing_id", pd.Series([c.get("reactor_firing_id") for c in contexts],
                                                    index=df.index, dtype=object))
        df.insert(3, "reactor_name", pd.Series([c.get("reactor_name") for c in contexts],
                                               index=df.index, dtype=object))
    return _timestamps(df)


def _sources(blob) -> dict | None:
    """A payload decoded as subscribers see it; None if the bytes are not a payload."""
    from .payload import decode_sources

    try:
        return decode_sources(bytes(blob))
    except (ValueError, TypeError, UnicodeDecodeError, struct.error):
        return None


def record(row: dict) -> dict:
    """One row for Python callers: timestamps as aware datetimes, NULL as None."""
    return {k: (from_us(v) if k in TIMESTAMP_COLUMNS and v is not None else v) for k, v in row.items()}


def json_ready(value):
    """A report value as JSON takes it: numpy scalars as Python ones, NaN as
    None, dicts (keys as strings) and sequences walked."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value
