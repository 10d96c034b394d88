"""The outbox design's tables: its part of the store (seed 002).

A domain table (``pages``), the log (``outbox``, with its sequence, which
only grows: a pruned or rolled-back seq is never reused), per-consumer
``cursors``, ``parked`` (poison) rows and ``deferred`` work: their columns,
their part of the ``Tx`` interface, the memory adapter's state and methods,
the DuckDB schema and statements, composed by the kernel's store as :data:`PART`.

The package: :mod:`.port` (the columns and the transaction interface),
:mod:`.memory` and :mod:`.sql` (its adapters), :mod:`.statements` (the SQL);
:data:`PART` is what the kernel's store composes.
"""

from __future__ import annotations

from fanoutsim.kernel.store.base import StorePart

from . import statements
from .memory import MEMORY_ROWS, OutboxMemoryTx, memory_init
from .port import TABLES, TIMESTAMP_COLUMNS, OutboxTx
from .sql import OutboxDuckDBTx

PART = StorePart(
    name="outbox",
    tables=TABLES,
    timestamp_columns=TIMESTAMP_COLUMNS,
    tx=OutboxTx,
    memory_tx=OutboxMemoryTx,
    memory_init=memory_init,
    memory_rows=MEMORY_ROWS,
    duckdb_tx=OutboxDuckDBTx,
    duckdb_migrations=statements.MIGRATIONS,
    duckdb_rows=statements.ALL_ROWS,
)

__all__ = [
    "OutboxTx",
    "TABLES",
    "TIMESTAMP_COLUMNS",
    "MEMORY_ROWS",
    "OutboxMemoryTx",
    "memory_init",
    "OutboxDuckDBTx",
    "PART",
]
