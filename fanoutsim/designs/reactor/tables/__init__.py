"""The reactor design's tables: its part of the store (seeds 000 and 001).

``reactor_firings`` (the log a reactor writes), ``reactor_subscriptions``
(one watermark each) and ``workflow_executions`` (what the poll loop
dispatches and the executor claims): their columns, their part of the ``Tx``
interface, the memory adapter's state and methods, the DuckDB schema,
migration and statements, composed by the kernel's store as :data:`PART`.

Orderings (part of the contract: they decide which firing a batch takes and
which execution a worker claims):

* firings of a stream: by ``(fired_at, id)``
* subscriptions: by ``(tenant_id, reactor_name, workflow_name)``
* executions: by ``(dispatched_at, id)``

The memory adapter indexes firings per stream ``(reactor_name, tenant_id)`` by
the key ``(fired_at, id)``, which makes the poll loop's fetch a bisection;
every index (streams, triples, pending executions) is kept in step with the
rows by each write and by its undo.

The package: :mod:`.port` (the columns and the transaction interface),
:mod:`.memory` and :mod:`.sql` (its adapters), :mod:`.statements` (the SQL);
:data:`PART` is what the kernel's store composes.
"""

from __future__ import annotations

from fanoutsim.kernel.store.base import StorePart

from .memory import ReactorMemoryTx
from .port import TABLES, TIMESTAMP_COLUMNS, ReactorTx, cursor_of
from .sql import ReactorDuckDBTx

PART = StorePart.from_package(
    __package__, "reactor", tx=ReactorTx, memory_tx=ReactorMemoryTx, duckdb_tx=ReactorDuckDBTx
)

# what the design's modules read from here; the rest: .port, .memory, .sql, .statements
__all__ = ["PART", "TABLES", "TIMESTAMP_COLUMNS", "ReactorTx", "cursor_of"]
