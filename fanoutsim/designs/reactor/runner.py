"""The ``runner``: the registration API a user of the real system calls.

Method names and arguments follow seed 001's Python API
(``subscribe_workflow_to_reactor`` and friends). The runner is a thin facade:
durable calls go through the runtime's *current* engine at the runtime's
current time, so they keep working across crashes and restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fanoutsim.designs.reactor.engine import ReactorEngine
from fanoutsim.designs.reactor.tables import TABLES, TIMESTAMP_COLUMNS
from fanoutsim.kernel.frames import record

#: The columns :meth:`Runner.list_reactor_subscriptions` gives, as the real API lists
#: them: every subscription column but ``last_seen_firing_id``, the compound cursor
#: of the fixed watermark strategies, which is ours (``sim.subscriptions()`` has it).
LISTED = tuple(c for c in TABLES["reactor_subscriptions"] if c != "last_seen_firing_id")


class Runner:
    """The registration API of a reactor runtime (``sim.runner``, ``rt.runner``), as
    a user of the real system calls it: subscriptions (durable: rows of the store,
    which outlive a crash) and declarations of workflows, computation graphs and
    triggers (code: kept by the runtime across its crashes, as a binary's code is).
    Each durable call runs on the runtime's live engine at its current time, and
    raises RuntimeError while the runner is down."""

    def __init__(self, runtime) -> None:
        self._rt = runtime

    # -- subscriptions (durable) --------------------------------------------
    def subscribe_workflow_to_reactor(
        self, reactor: str, workflow: str, tenant: str = "public", *, when: str | None = None
    ) -> str:
        """Upsert the subscription of ``workflow`` to ``reactor`` in ``tenant``;
        returns its id (the same id on every call for the same triple; a call again
        replaces the filter and enables it). ``when`` is an optional CEL filter over
        ``payload``, ``reactor`` and ``tenant``. Refuses, writing nothing: a malformed
        filter (:class:`fanoutsim.InvalidPredicate`), an empty name (ValueError), and a
        workflow not declared when any are (ValueError naming the declared ones)."""
        return self._rt._api(ReactorEngine.subscribe, reactor, workflow, tenant, when=when)

    def unsubscribe_workflow_from_reactor(self, reactor: str, workflow: str, tenant: str = "public") -> bool:
        """Delete the subscription of ``workflow`` to ``reactor`` in ``tenant``:
        True, or False if there was none."""
        return self._rt._api(ReactorEngine.unsubscribe, reactor, workflow, tenant)

    def set_subscription_enabled(self, reactor: str, workflow: str, tenant: str = "public", *, enabled: bool) -> bool:
        """Pause (``enabled=False``) or resume a subscription: the poll loop skips a
        disabled one, and its watermark waits. True, or False if there was none."""
        return self._rt._api(ReactorEngine.set_enabled, reactor, workflow, tenant, enabled)

    def list_reactor_subscriptions(self, tenant: str | None = "public") -> list[dict[str, Any]]:
        """Subscriptions of ``tenant`` (``None``: every tenant), as dicts keyed by column."""
        with self._rt.store.transaction() as tx:
            rows = tx.list_subscriptions(tenant=tenant)
        return [{k: v for k, v in record(row, TIMESTAMP_COLUMNS).items() if k in LISTED} for row in rows]

    # -- declarations (code: survive restarts) ----------------------------------
    def register_workflow(
        self, name: str, fn: Callable[[dict], Any] | None = None, duration: float | Callable = 0.0, *, triggers=()
    ) -> None:
        """Declare the workflow ``name``: its body ``fn(context)`` (None: it does
        nothing), how long a run takes in seconds (a number >= 0, or a callable
        drawing from a ``random.Random``), and the ``triggers`` it subscribes to.
        Declaring it again replaces it. Refuses an empty name (ValueError), an ``fn``
        that is not callable (TypeError) and a negative or infinite duration
        (ValueError)."""
        self._rt.registry.register_workflow(name, fn, duration, triggers)

    def register_computation_graph(self, reactor: str, fn: Callable[[dict], Any], *, name: str | None = None) -> None:
        """Declare an in-process computation graph: ``fn(sources)`` is called on every
        firing of ``reactor``, synchronously, before the firing's row is written (at
        most once: nothing durable records it; an error in it is counted, not
        raised). ``name`` labels its metrics (default: the function's name). Refuses
        an empty reactor name (ValueError) and an ``fn`` that is not callable (TypeError)."""
        self._rt.registry.register_computation_graph(reactor, fn, name)

    def register_trigger(self, name: str, *, on: str) -> None:
        """Declare the trigger ``name`` whose primary workflow is ``on`` (trigger-name
        fan-out: :meth:`~fanoutsim.designs.reactor.simulation.Simulation.fire_trigger`
        starts it and every workflow that names the trigger). Refuses an empty name
        (ValueError)."""
        self._rt.registry.register_trigger(name, on)
