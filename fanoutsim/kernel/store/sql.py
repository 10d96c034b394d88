"""The kernel's SQL: the meta table, ``runner_log`` and schema versions.

Each design's :class:`~.base.StorePart` brings the SQL of its own tables (its
schema, its migrations, its statements); :class:`~.duckdb.DuckDBStore`
composes them. Timestamps are ``TIMESTAMPTZ`` in the tables and ``BIGINT``
microseconds at the interface: ``epoch_us(col)`` reads them, :data:`TS` (a
parameter) writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeGuard

from fanoutsim.kernel.store.base import StorePart
from fanoutsim.kernel.timeutil import from_us

# The schema version this fanoutsim writes, at least: the newest migration of
# the parts it composes, if newer. A file with a newer version is refused.
SCHEMA_VERSION = 5

TS = "make_timestamp(CAST(? AS BIGINT))::TIMESTAMPTZ"
_TS = TS

_DATETIME_US = (-62_135_596_800_000_000, 253_402_300_799_999_999)  # datetime's years 1-9999
# a statement's native form: its text, the positions of its TS parameters, its count of parameters
NativeForm = tuple[str, tuple[int, ...], int]
_NATIVE: dict[str, NativeForm | None] = {}
# one migration step: a statement, or a function of the connection (DuckDB's, or the
# PostgreSQL store's) for a step SQL alone cannot say
Migration = str | Callable[[Any], object]


def _native_form(statement: str) -> NativeForm | None:
    """``statement`` with each :data:`TS` a bare ``?``, the positions of those
    parameters and the number of parameters (None: it has no TS)."""
    parts = statement.split(TS)
    if len(parts) == 1:
        return None
    at: list[int] = []
    n = 0
    for part in parts[:-1]:
        n += part.count("?")
        at.append(n)
        n += 1
    return "?".join(parts), tuple(at), n + parts[-1].count("?")


def fits_timestamp(us: object) -> TypeGuard[int]:
    """Whether ``us`` is a value a :data:`TS` parameter takes without fail:
    an int within datetime's years 1-9999, bound as a datetime."""
    return type(us) is int and _DATETIME_US[0] <= us <= _DATETIME_US[1]


def native_timestamps(statement: str, params: Sequence[object] | None) -> tuple[str, Sequence[object] | None]:
    """``(statement, params)`` with each :data:`TS` parameter bound as a UTC
    datetime instead, which DuckDB binds to a TIMESTAMPTZ as it is: converting
    the microseconds in SQL costs about 0.1 ms of a 0.4-0.6 ms statement. As
    given when a TS value is not an int within datetime's years 1-9999 (NULL
    stays NULL), or when the parameters do not line up with the ``?``."""
    form: NativeForm | None | Literal[False] = _NATIVE.get(statement, False)
    if form is False:
        form = _NATIVE[statement] = _native_form(statement)
    if form is None or params is None:
        return statement, params
    text, at, n = form
    if len(params) != n:  # a ? in a literal: leave it to SQL
        return statement, params
    out = list(params)
    for i in at:
        v = out[i]
        if v is None:
            continue
        if not fits_timestamp(v):
            return statement, params
        out[i] = from_us(v)
    return text, out


SCHEMA = """
CREATE TABLE IF NOT EXISTS fanoutsim_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS runner_log (
    seq    INTEGER PRIMARY KEY,
    happened_at TIMESTAMPTZ NOT NULL,
    event  VARCHAR NOT NULL,
    detail VARCHAR
);
"""

# schema version -> statements that bring a file from the version before it
# (the parts' migrations join these by version)
MIGRATIONS: dict[int, list[Migration]] = {
    3: [],  # runner_log: created by SCHEMA's CREATE TABLE IF NOT EXISTS
}

LOG_RUNNER = f"""
INSERT INTO runner_log
SELECT coalesce(max(seq), 0) + 1, {_TS}, ?, ? FROM runner_log
RETURNING seq"""

GET_SCHEMA_VERSION = "SELECT value FROM fanoutsim_meta WHERE key = 'schema_version'"
SET_SCHEMA_VERSION = "INSERT OR REPLACE INTO fanoutsim_meta VALUES ('schema_version', ?)"
GET_META = "SELECT value FROM fanoutsim_meta WHERE key = ?"
SET_META = "INSERT OR REPLACE INTO fanoutsim_meta VALUES (?, ?)"
HAS_META = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'fanoutsim_meta'"

ALL_ROWS = {
    "runner_log": "SELECT seq, epoch_us(happened_at), event, detail FROM runner_log ORDER BY seq",
}


def schema_version(parts: Iterable[StorePart]) -> int:
    """The version a store of ``parts`` writes: the kernel's, or the newest migration of a part."""
    return max([SCHEMA_VERSION, *(v for part in parts for v in part.duckdb_migrations)])


def schema(parts: Iterable[StorePart]) -> str:
    """Every table's ``CREATE TABLE IF NOT EXISTS``: the kernel's, then each part's."""
    return SCHEMA + "".join(part.duckdb_schema for part in parts)


def migrations(parts: Iterable[StorePart]) -> dict[int, list[Migration]]:
    """The kernel's and the parts' migrations, by version (a part's after the kernel's)."""
    out: dict[int, list[Migration]] = {version: list(statements) for version, statements in MIGRATIONS.items()}
    for part in parts:
        for version, statements in part.duckdb_migrations.items():
            out.setdefault(version, []).extend(statements)
    return dict(sorted(out.items()))
