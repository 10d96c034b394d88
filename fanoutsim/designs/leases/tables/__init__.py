"""The leased-consumer design's tables: its part of the store (seed 003).

The event log (``events``), durable consumers (``lease_consumers``) and their
per-partition ``checkpoints`` and sparse ``resolutions``, ``leases``,
``retries``, ``dead_letters``, and the one ``history`` row (the incarnation a
restore bumps, and the log's counters): their columns, their part of the
``Tx`` interface, the memory adapter's state and methods, the DuckDB schema
and statements, composed by the kernel's store as :data:`PART`. Each named
database (:func:`check_database`, :class:`in_database`) has its own.

The package: :mod:`.port` (the columns, the transaction interface and named
databases), :mod:`.memory` and :mod:`.sql` (its adapters), :mod:`.statements`
(the SQL); :data:`PART` is what the kernel's store composes.
"""

from __future__ import annotations

from fanoutsim.kernel.store.base import StorePart

from . import statements
from .memory import MEMORY_ROWS, LeaseMemoryTx, memory_init
from .port import DEFAULT_DATABASE, TABLES, TIMESTAMP_COLUMNS, LeaseTx, check_database, database_rows, in_database
from .sql import LeaseDuckDBTx

PART = StorePart(
    name="leases",
    tables=TABLES,
    timestamp_columns=TIMESTAMP_COLUMNS,
    tx=LeaseTx,
    memory_tx=LeaseMemoryTx,
    memory_init=memory_init,
    memory_rows=MEMORY_ROWS,
    duckdb_tx=LeaseDuckDBTx,
    duckdb_migrations=statements.MIGRATIONS,
    duckdb_rows=statements.ALL_ROWS,
)

__all__ = [
    "LeaseTx",
    "TABLES",
    "TIMESTAMP_COLUMNS",
    "DEFAULT_DATABASE",
    "check_database",
    "in_database",
    "database_rows",
    "MEMORY_ROWS",
    "LeaseMemoryTx",
    "memory_init",
    "LeaseDuckDBTx",
    "PART",
]
