"""Durable state: where the truth lives.

Every durable fact of a run is a row in a table, and rows change only inside a
transaction (``with store.transaction() as tx: ...``). Leaving the block by an
exception — a crash at a named point among them — rolls back every write made
in it. Two adapters implement one small interface (:mod:`.base`):

* :class:`~fanoutsim.kernel.store.memory.MemoryStore` — dicts and sorted indexes with
  an undo log; the fast default under the virtual clock.
* :class:`~fanoutsim.kernel.store.duckdb.DuckDBStore` — the same tables in DuckDB
  (``":memory:"`` or a ``.duckdb`` file), its SQL kept together in ``sql.py``.

``tests/test_store_contract.py`` runs one suite unchanged against both.
"""
from __future__ import annotations

from fanoutsim.kernel.store.base import Store, Tx, TABLES
from fanoutsim.kernel.store.memory import MemoryStore


def open_store(spec: "str | Store" = "memory") -> Store:
    """``"memory"``, ``"duckdb"`` (in memory), a ``.duckdb`` path, or a Store."""
    if isinstance(spec, Store):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"store must be 'memory', 'duckdb', a .duckdb path or a Store, not {spec!r}")
    if spec == "memory":
        return MemoryStore()
    from fanoutsim.kernel.store.duckdb import DuckDBStore

    if spec == "duckdb":
        return DuckDBStore(":memory:")
    if spec.endswith(".duckdb") or spec.endswith(".db"):
        return DuckDBStore(spec)
    raise ValueError(
        f"store {spec!r} is not known; use 'memory', 'duckdb' or a path ending in .duckdb"
    )


__all__ = ["Store", "Tx", "TABLES", "MemoryStore", "open_store"]
