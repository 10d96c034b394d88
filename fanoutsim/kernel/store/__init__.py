"""Durable state: where the truth lives.

Every durable fact of a run is a row in a table, and rows change only inside a
transaction (``with store.transaction() as tx: ...``). Leaving the block by an
exception — a crash at a named point among them — rolls back every write made
in it. Two adapters implement one small interface (:mod:`.base`):

* :class:`~fanoutsim.kernel.store.memory.MemoryStore` — dicts and sorted indexes with
  an undo log; the fast default under the virtual clock.
* :class:`~fanoutsim.kernel.store.duckdb.DuckDBStore` — the same tables in DuckDB
  (``":memory:"`` or a ``.duckdb`` file).
* :class:`~fanoutsim.kernel.store.postgres.PostgresStore` — the same tables in
  PostgreSQL, the DuckDB statements run through a dialect layer
  (``"postgres"``: a throwaway server of its own; or a ``postgresql://`` URI).

The kernel keeps what every table shares — transactions, the undo log, failed
transactions, ``runner_log``, schema versions — and imports no design: each
design brings its tables as a :class:`~.base.StorePart` (its ``tables``
module), which a store composes when given it (``MemoryStore(parts=...)``).
:mod:`fanoutsim.designs.stores` opens stores with every registered design's
part. ``tests/test_store_contract.py`` runs one suite unchanged against both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fanoutsim.kernel.store.base import TABLES, Store, StorePart, Tx
from fanoutsim.kernel.store.memory import MemoryStore
from fanoutsim.kernel.validate import is_duckdb_path


def open_store(spec: str | Store = "memory", parts: Iterable[StorePart] = ()) -> Store:
    """``"memory"``, ``"duckdb"`` (in memory), a ``.duckdb`` path, ``"postgres"``
    (a throwaway server), a ``postgresql://`` URI, or a Store (returned as it
    is). A new store holds the kernel's tables and ``parts``'."""

    def duckdb(path: str) -> Store:
        from fanoutsim.kernel.store.duckdb import DuckDBStore

        return DuckDBStore(path, parts)

    def postgres(dsn: str) -> Store:
        from fanoutsim.kernel.store.postgres import PostgresStore

        return PostgresStore(dsn, parts)

    return open_store_with(spec, lambda: MemoryStore(parts), duckdb, postgres)


def is_postgres(spec: object) -> bool:
    """``"postgres"`` or a ``postgresql://`` (``postgres://``) URI."""
    return isinstance(spec, str) and (spec == "postgres" or spec.startswith(("postgresql://", "postgres://")))


def open_store_with(
    spec: str | Store,
    memory: Callable[[], Store],
    duckdb: Callable[[str], Store],
    postgres: Callable[[str], Store] | None = None,
) -> Store:
    """What :func:`open_store` does with its ``spec``, making a memory store with
    ``memory()``, a DuckDB one with ``duckdb(path)`` (``":memory:"`` for
    ``"duckdb"``) and a PostgreSQL one with ``postgres(dsn)``."""
    if isinstance(spec, Store):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f"store must be 'memory', 'duckdb', a .duckdb path, 'postgres', a postgresql:// URI "
            f"or a Store, not {spec!r}"
        )
    if spec == "memory":
        return memory()
    if spec == "duckdb":
        return duckdb(":memory:")
    if is_duckdb_path(spec):
        return duckdb(spec)
    if postgres is not None and is_postgres(spec):
        return postgres(spec)
    raise ValueError(
        f"store {spec!r} is not known; use 'memory', 'duckdb', a path ending in .duckdb, 'postgres' "
        "or a postgresql:// URI"
    )


__all__ = ["Store", "StorePart", "Tx", "TABLES", "MemoryStore", "open_store", "open_store_with", "is_postgres"]
