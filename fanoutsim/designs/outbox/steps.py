"""What the outbox's engine steps read of their engine: a typed port.

Each step module (:mod:`.commit`, :mod:`.consumers`, :mod:`.dispatcher`,
:mod:`.retention`) is a set of functions of the engine ``e`` and ``now``, bound
as :class:`~.engine.OutboxEngine`'s methods. :class:`Engine` names what they may
touch, so a step is checked against that and nothing more: the store (whose
transactions are the outbox's port, :class:`~.tables.port.OutboxTx`), the
trace, the metrics, the faults, the config, the registry and the dispatcher's
memory of one incarnation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from fanoutsim.kernel.steps import StepEngine

if TYPE_CHECKING:  # names for the checker only: the engine that binds the steps imports them
    import random
    from collections.abc import Callable, Mapping
    from contextlib import AbstractContextManager

    from fanoutsim.designs.outbox.config import ConsumerSpec, OutboxConfig
    from fanoutsim.designs.outbox.metrics import Meters
    from fanoutsim.designs.outbox.tables.port import OutboxTx
    from fanoutsim.kernel.metrics import Family, Observe


class OutboxStore(Protocol):
    """A store composed with the outbox's tables: its transactions speak the port.

    (The adapters build their transaction classes from the parts at run time,
    which a type checker cannot follow; this is what the composition promises.)"""

    def transaction(self) -> AbstractContextManager[OutboxTx, Literal[False]]: ...

    def rows(self, table: str) -> list[dict[str, Any]]: ...


class Registry(Protocol):
    """What a step reads of the engine's :class:`~.consumers.OutboxRegistry`
    (named here, not imported: the registry's module is a step module)."""

    @property
    def consumers(self) -> Mapping[str, ConsumerSpec]: ...

    def spec(self, name: str) -> ConsumerSpec: ...


class Engine(StepEngine, Protocol):
    """What an outbox step reads of :class:`~.engine.OutboxEngine`."""

    store: OutboxStore
    config: OutboxConfig
    rng: random.Random
    # the trace's actor of the dispatcher's steps
    actor: str
    # the hint sent after a commit: (now, payloads)
    notify: Callable[[int, list[str]], None]
    # a hint sent inside the commit's transaction (PostgreSQL's pg_notify): (the transaction, payloads)
    notify_in_tx: Callable[[Any, list[str]], None] | None
    # the dispatcher's memory, gone with the incarnation
    gaps: dict[tuple[str, int], int]
    behind_noted: set[tuple[str, int]]
    wake_at: dict[str, int]
    due_at_fetch: dict[str, int | None]
    # consumer -> the last seq it finished since its last status write (None: no status writes)
    unreported: dict[str, int] | None
    # each consumer's commit-to-handled histogram, by consumer
    commit_to_handled: Family[Observe]

    # a property, read-only: the engine's registry is a subtype of this port, which a
    # (mutable) attribute would have to match exactly
    @property
    def registry(self) -> Registry: ...

    def meters(self, consumer: str) -> Meters: ...
