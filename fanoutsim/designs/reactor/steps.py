"""What the reactor's engine steps read of their engine: a typed port.

Each step module (:mod:`.poller`, :mod:`.executor`, :mod:`.firing`,
:mod:`.prune`) is a set of functions of the engine ``e`` and ``now``, bound as
:class:`~.engine.ReactorEngine`'s methods. :class:`Engine` names what they may
touch, so a step is checked against that and nothing more: the store (whose
transactions are the reactor's port, :class:`~.tables.port.ReactorTx`), the
trace, the metrics, the faults, the ids, the config and the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from fanoutsim.kernel.steps import StepEngine

if TYPE_CHECKING:  # names for the checker only: the engine that binds the steps imports them
    import random
    from collections.abc import Callable, Mapping, Sequence
    from contextlib import AbstractContextManager

    from fanoutsim.designs.reactor.config import SchedulerConfig
    from fanoutsim.designs.reactor.predicate import Predicate
    from fanoutsim.designs.reactor.tables.port import ReactorTx, SubscriptionRow
    from fanoutsim.kernel.ids import IdSource
    from fanoutsim.kernel.metrics import Bump, Family, Observe


class ReactorStore(Protocol):
    """A store composed with the reactor's tables: its transactions speak the port.

    (The adapters build their transaction classes from the parts at run time,
    which a type checker cannot follow; this is what the composition promises.)"""

    def transaction(self) -> AbstractContextManager[ReactorTx, Literal[False]]: ...


class Workflow(Protocol):
    """What a step reads of a registered workflow (:class:`~.engine.WorkflowSpec`)."""

    @property
    def fn(self) -> Callable[[dict[str, Any]], Any] | None: ...
    @property
    def duration(self) -> float | Callable[[random.Random], float]: ...


class Registry(Protocol):
    """What a step reads of the engine's :class:`~.engine.Registry` (named here,
    not imported: the engine imports the steps)."""

    @property
    def workflows(self) -> Mapping[str, Workflow]: ...
    # reactor -> its in-process computation graphs, (name, function), in declaration order
    @property
    def graphs(self) -> Mapping[str, Sequence[tuple[str, Callable[[dict[str, Any]], Any]]]]: ...


class Engine(StepEngine, Protocol):
    """What a reactor step reads of :class:`~.engine.ReactorEngine`."""

    store: ReactorStore
    config: SchedulerConfig
    ids: IdSource
    rng: random.Random
    # the trace's actor of this poller ("poller", or "poller#2" for a replica)
    poller: str
    # whether the plan may let a subscription take fewer firings than the batch limit
    limits_polls: bool
    # how far behind the newest firing a watermark stops (config.watermark_settle)
    settle_us: int
    poll_queries: Bump
    # the before_insert and after_insert hooks, each None where no fault acts at it
    insert_hooks: tuple[Callable[..., None] | None, Callable[..., None] | None]
    # each reactor's fire-to-dispatch histogram, by reactor name
    fire_to_dispatch: Family[Observe]

    # a property, read-only: the engine's registry is a subtype of this port, which a
    # (mutable) attribute would have to match exactly
    @property
    def registry(self) -> Registry: ...

    def predicate_for(self, sub: SubscriptionRow) -> Predicate | str | None: ...
