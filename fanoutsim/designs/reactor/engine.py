"""One incarnation of the runner process.

Everything a :class:`ReactorEngine` holds in memory — the compiled-predicate
cache above all — dies with it when the process crashes; a restart builds a
new engine over the same store. The engine never asks what time it is and never
sleeps: every method takes ``now`` (epoch microseconds) and does one step.
Runtimes — the SimPy one, the wall-clock one — decide *when* to call it.

The :class:`Registry` is different: it is the program's code (which workflow
bodies, graphs and triggers exist), so it survives restarts, as the code of a
restarted binary would.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from fanoutsim.designs.reactor import executor, firing, poller, prune, subscriptions, triggers
from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.faults import AFTER_INSERT, BEFORE_INSERT, limits_polls
from fanoutsim.designs.reactor.metrics import FIRE_TO_DISPATCH
from fanoutsim.designs.reactor.predicate import Predicate, compile_predicate
from fanoutsim.kernel.faults import Faults
from fanoutsim.kernel.ids import IdSource
from fanoutsim.kernel.metrics import Metrics
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.steps import StepEngineBase
from fanoutsim.kernel.store import Store
from fanoutsim.kernel.timeutil import seconds_to_us
from fanoutsim.kernel.trace import Trace, TraceSchema
from fanoutsim.kernel.validate import is_number

if TYPE_CHECKING:
    from fanoutsim.designs.reactor.steps import Engine, ReactorStore
    from fanoutsim.designs.reactor.tables.port import SubscriptionRow

    # for mypy only: binding the steps as methods checks nothing until one is called
    def _bound_to(e: ReactorEngine) -> Engine:
        """The engine the steps are bound to reads as :class:`~.steps.Engine` (mypy says where not)."""
        return e


# a workflow body, and a computation graph's function: each takes the firing's context
Body = Callable[[dict[str, Any]], Any]


@dataclass
class WorkflowSpec:
    name: str
    fn: Body | None = None
    # seconds, or a callable taking a random.Random and returning seconds
    duration: float | Callable[[random.Random], float] = 0.0
    triggers: tuple[str, ...] = ()


@dataclass
class Registry:
    """Declarations of the program: workflow bodies, graphs, triggers."""

    workflows: dict[str, WorkflowSpec] = field(default_factory=dict)
    graphs: dict[str, list[tuple[str, Body]]] = field(default_factory=dict)
    triggers: dict[str, str] = field(default_factory=dict)  # trigger -> primary workflow

    def register_workflow(
        self,
        name: str,
        fn: Body | None = None,
        duration: float | Callable[[random.Random], float] = 0.0,
        triggers: str | Iterable[str] = (),
    ) -> None:
        check_name("workflow name", name)
        if fn is not None and not callable(fn):
            raise TypeError(f"workflow {name!r}: fn must be callable or None")
        if not callable(duration):
            if not is_number(duration) or duration < 0:  # nan or inf: the execution would never finish
                raise ValueError(
                    f"workflow {name!r}: duration must be a finite number of seconds >= 0 or a callable, "
                    f"got {duration!r}"
                )
        if isinstance(triggers, str):
            triggers = (triggers,)
        for t in triggers:
            check_name("trigger name", t)
        self.workflows[name] = WorkflowSpec(name, fn, duration, tuple(triggers))

    def register_computation_graph(self, reactor: str, fn: Body, name: str | None = None) -> None:
        check_name("reactor name", reactor)
        if not callable(fn):
            raise TypeError(f"computation graph for {reactor!r} must be callable")
        name = name or getattr(fn, "__name__", None) or f"graph{len(self.graphs.get(reactor, ()))}"
        self.graphs.setdefault(reactor, []).append((name, fn))

    def register_trigger(self, name: str, on: str) -> None:
        check_name("trigger name", name)
        check_name("workflow name", on)
        self.triggers[name] = on

    def trigger_subscribers(self, name: str) -> list[str]:
        """Primary first, then every workflow naming the trigger, in registration order."""
        if name not in self.triggers:
            raise KeyError(f"unknown trigger {name!r}; registered: {sorted(self.triggers) or 'none'}")
        primary = self.triggers[name]
        return [primary] + [w.name for w in self.workflows.values() if name in w.triggers and w.name != primary]


# the trace in the reactor's words; its history holds every firing a writer attempted
TRACE = TraceSchema(
    who="subscription",
    what="firing",
    where="execution",
    history=("firing", "reactor_name", "tenant_id", "fired_at", "logged_at", "payload", "attempt"),
)


class ReactorEngine(StepEngineBase):
    """Sans-IO core of the reactor subscription design: call a step, get a result."""

    def __init__(
        self,
        store: Store,
        config: SchedulerConfig,
        registry: Registry,
        ids: IdSource,
        metrics: Metrics,
        trace: Trace,
        faults: Faults | None = None,
        rng: random.Random | None = None,
        replica: int = 0,
    ) -> None:
        # the store composed with the reactor's tables: its transactions speak the port
        self.store = cast("ReactorStore", store)
        self.config = config
        self.registry = registry
        self.ids = ids
        super().__init__(metrics, trace, faults)
        # whether the plan may let a subscription take fewer firings than the batch limit (asked once)
        self.limits_polls = limits_polls(self.faults)
        self.rng = rng or random.Random(0)
        self.poller = "poller" if replica == 0 else f"poller#{replica}"  # the trace's actor
        self.settle_us = seconds_to_us(config.watermark_settle)
        self.poll_queries = metrics.counter("fanoutsim_reactor_poll_queries_total")
        # the hooks asked at each dispatch, None where no fault acts at them (asked once)
        self.insert_hooks = (BEFORE_INSERT.active(self.faults), AFTER_INSERT.active(self.faults))
        # each reactor's fire-to-dispatch histogram, bound at its first dispatch
        self.fire_to_dispatch = metrics.histograms(FIRE_TO_DISPATCH, "reactor")
        # in-memory only: lost on crash, rebuilt lazily
        self._predicates: dict[str, tuple[str, Predicate | str]] = {}

    def predicate_for(self, sub: SubscriptionRow) -> Predicate | str | None:
        """The cached compiled filter of a subscription (None: no filter;
        a str: the stored text does not compile, and why)."""
        text = sub["predicate"]
        if text is None:
            return None
        hit = self._predicates.get(sub["id"])
        if hit is not None and hit[0] == text:
            return hit[1]
        try:
            compiled: Predicate | str = compile_predicate(text)
        except ValueError as exc:  # a row written around the API
            compiled = str(exc)
        self._predicates[sub["id"]] = (text, compiled)
        return compiled

    # the write path
    fire = firing.fire
    # the runner API's durable half
    subscribe = subscriptions.subscribe
    unsubscribe = subscriptions.unsubscribe
    set_enabled = subscriptions.set_enabled
    list_subscriptions = subscriptions.list_subscriptions
    # the loops, one pass each
    poll_once = poller.poll_once
    poll_subscriptions = poller.poll_subscriptions
    fetch = poller.fetch
    fetch_next = poller.fetch_next
    start_pass = poller.start_pass
    repeats_until_written = poller.repeats_until_written
    drain = poller.drain
    drain_next = poller.drain_next
    prune_once = prune.prune_once
    claim = executor.claim
    claim_next = executor.claim_next
    has_pending = executor.has_pending
    recover = executor.recover
    run_body = executor.run_body
    duration_of = executor.duration_of
    finish = executor.finish
    # the contrast case
    fire_trigger = triggers.fire_trigger
