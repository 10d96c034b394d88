"""Stores with every registered design's tables: where the parts meet.

The kernel's store composes the :class:`~fanoutsim.kernel.store.StorePart`
it is given and imports no design; this module knows the registry
(:mod:`fanoutsim.designs`) and gives it every registered design's part
(``Design.store_part``), in registry order. So a store opened here holds every
design's tables, as a DuckDB file of any design does: a file written by one
fanoutsim opens in another with the same schema version, whichever design
wrote it. A design added with :func:`fanoutsim.designs.register` brings its
tables along::

    from fanoutsim.designs.stores import open_store, MemoryStore, DuckDBStore, TABLES

``MemoryStore()`` and ``DuckDBStore(path)`` compose every registered part
unless given ``parts``. ``TABLES``, ``TIMESTAMP_COLUMNS``, ``SCHEMA_VERSION``
and ``sql`` (the composed ``SCHEMA``, ``MIGRATIONS`` and the kernel's
statements) describe the composed schema; ``StoreError`` is a file that cannot
be opened as a store.
"""

from __future__ import annotations

from types import SimpleNamespace

from fanoutsim.designs import get, names
from fanoutsim.kernel.store import Store, StorePart, open_store_with
from fanoutsim.kernel.store import memory as _memory
from fanoutsim.kernel.store.base import tables_of, timestamp_columns_of


def store_parts() -> tuple[StorePart, ...]:
    """Every registered design's tables, in registry order (a design without
    tables of its own is skipped)."""
    return tuple(part for part in (get(name).store_part for name in names()) if part is not None)


class MemoryStore(_memory.MemoryStore):
    """The in-memory store of every registered design's tables (or of ``parts``)."""

    def __init__(self, parts=None) -> None:
        super().__init__(store_parts() if parts is None else parts)


_duckdb_class: type | None = None


def _duckdb_store() -> type:
    """The DuckDB store of every registered design's tables, made on first use
    (importing DuckDB is left until a DuckDB store is wanted)."""
    global _duckdb_class
    if _duckdb_class is None:
        from fanoutsim.kernel.store import duckdb

        class DuckDBStore(duckdb.DuckDBStore):
            """The DuckDB store of every registered design's tables (or of ``parts``)."""

            def __init__(self, path: str = ":memory:", parts=None) -> None:
                super().__init__(path, store_parts() if parts is None else parts)

        DuckDBStore.__module__ = __name__
        _duckdb_class = DuckDBStore
    return _duckdb_class


_postgres_class: type | None = None


def _postgres_store() -> type:
    """The PostgreSQL store of every registered design's tables, made on first use."""
    global _postgres_class
    if _postgres_class is None:
        from fanoutsim.kernel.store import postgres

        class PostgresStore(postgres.PostgresStore):
            """The PostgreSQL store of every registered design's tables (or of ``parts``)."""

            def __init__(self, dsn: str = "postgres", parts=None, *, schema: str | None = None) -> None:
                super().__init__(dsn, store_parts() if parts is None else parts, schema=schema)

        PostgresStore.__module__ = __name__
        _postgres_class = PostgresStore
    return _postgres_class


def open_store(spec: str | Store = "memory") -> Store:
    """``"memory"``, ``"duckdb"`` (in memory), a ``.duckdb`` path, ``"postgres"``
    (a throwaway server), a ``postgresql://`` URI, or a Store (returned as it
    is); a new store holds every registered design's tables."""
    return open_store_with(spec, MemoryStore, lambda path: _duckdb_store()(path), lambda dsn: _postgres_store()(dsn))


def _sql() -> SimpleNamespace:
    from fanoutsim.kernel.store import sql

    parts = store_parts()
    return SimpleNamespace(
        SCHEMA=sql.schema(parts),
        MIGRATIONS=sql.migrations(parts),
        SCHEMA_VERSION=sql.schema_version(parts),
        GET_SCHEMA_VERSION=sql.GET_SCHEMA_VERSION,
        SET_SCHEMA_VERSION=sql.SET_SCHEMA_VERSION,
        HAS_META=sql.HAS_META,
        LOG_RUNNER=sql.LOG_RUNNER,
    )


def __getattr__(name: str):
    # computed when asked for: the registry may have grown since this module was imported
    if name == "TABLES":
        return tables_of(store_parts())
    if name == "TIMESTAMP_COLUMNS":
        return timestamp_columns_of(store_parts())
    if name == "DuckDBStore":
        return _duckdb_store()
    if name == "PostgresStore":
        return _postgres_store()
    if name == "StoreError":
        from fanoutsim.kernel.store.duckdb import StoreError

        return StoreError
    if name == "sql":
        return _sql()
    if name == "SCHEMA_VERSION":
        return _sql().SCHEMA_VERSION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# and, computed when asked for: DuckDBStore, PostgresStore, TABLES, TIMESTAMP_COLUMNS, SCHEMA_VERSION, StoreError, sql
__all__ = ["store_parts", "open_store", "MemoryStore"]
