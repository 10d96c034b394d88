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

from .memory import OutboxMemoryTx
from .port import OutboxTx
from .sql import OutboxDuckDBTx

PART = StorePart.from_package(__package__, "outbox", tx=OutboxTx, memory_tx=OutboxMemoryTx, duckdb_tx=OutboxDuckDBTx)

# what the design's modules read from here; the rest: .port, .memory, .sql, .statements
__all__ = ["PART"]
