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

from .memory import LeaseMemoryTx
from .port import DEFAULT_DATABASE, TABLES, LeaseTx, check_database, database_rows, in_database
from .sql import LeaseDuckDBTx

PART = StorePart.from_package(__package__, "leases", tx=LeaseTx, memory_tx=LeaseMemoryTx, duckdb_tx=LeaseDuckDBTx)

# what the design's modules read from here; the rest: .port, .memory, .sql, .statements
__all__ = ["PART", "DEFAULT_DATABASE", "TABLES", "check_database", "database_rows", "in_database"]
