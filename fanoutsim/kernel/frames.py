"""Tables as pandas DataFrames: what notebooks and DuckDB SQL read.

Timestamps become timezone-aware UTC ``datetime64[us]`` columns; what else a
design's frame needs (a JSON column decoded, say) its own package adds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from fanoutsim.kernel.store.base import TABLES, TIMESTAMP_COLUMNS
from fanoutsim.kernel.timeutil import from_us


class TableSource(Protocol):
    """What :func:`store_frame` reads: a store's committed rows and its tables' columns."""

    @property
    def tables(self) -> Mapping[str, tuple[str, ...]]: ...

    @property
    def timestamp_columns(self) -> frozenset[str]: ...

    def rows(self, table: str) -> list[dict[str, Any]]: ...


def _timestamps(df: pd.DataFrame, timestamps: frozenset[str] = TIMESTAMP_COLUMNS) -> pd.DataFrame:
    for col in df.columns:
        if col in timestamps:
            df[col] = pd.to_datetime(df[col].astype("Int64"), unit="us", utc=True)
    return df


_TYPES: dict[str, type[bool] | Literal["int64"]] = {
    "enabled": bool,
    "predicate_degraded": bool,
    "predicate_error_count": "int64",
}


def table_frame(
    table: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    timestamps: frozenset[str] = TIMESTAMP_COLUMNS,
) -> pd.DataFrame:
    """``rows`` of ``table`` as a DataFrame with ``columns`` (default: a kernel
    table's); the ``timestamps`` columns become UTC datetimes."""
    columns = TABLES[table] if columns is None else columns
    # object columns first, so a NULL stays None (pandas would make text NaN)
    df = pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=object) for c in columns})
    for col, dtype in _TYPES.items():
        if col in df.columns:
            df[col] = df[col].astype(dtype)
    return _timestamps(df, timestamps)


def store_frame(store: TableSource, table: str) -> pd.DataFrame:
    """The committed rows of a store's table as a DataFrame (its columns, its timestamps)."""
    return table_frame(table, store.rows(table), store.tables[table], store.timestamp_columns)


def record(row: Mapping[str, Any], timestamps: frozenset[str] = TIMESTAMP_COLUMNS) -> dict[str, Any]:
    """One row for Python callers: ``timestamps`` as aware datetimes, NULL as None."""
    return {k: (from_us(v) if k in timestamps and v is not None else v) for k, v in row.items()}


def json_ready(value: Any) -> Any:
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
