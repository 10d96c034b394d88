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

# The columns the real API lists: every subscription column but
# ``last_seen_firing_id``, the compound cursor of the fixed watermark
# strategies, which is ours (see sim.subscriptions()).
LISTED = tuple(c for c in TABLES["reactor_subscriptions"] if c != "last_seen_firing_id")


class Runner:
    def __init__(self, runtime) -> None:
        self._rt = runtime

    # -- subscriptions (durable) --------------------------------------------
    def subscribe_workflow_to_reactor(
        self, reactor: str, workflow: str, tenant: str = "public", *, when: str | None = None
    ) -> str:
        """Upsert the subscription of ``workflow`` to ``reactor`` in ``tenant``;
        returns its id (the same id on every call for the same triple). ``when``
        is an optional CEL filter over ``payload``, ``reactor`` and ``tenant``;
        a malformed one raises :class:`fanoutsim.InvalidPredicate`, writing nothing."""
        return self._rt._api(ReactorEngine.subscribe, reactor, workflow, tenant, when=when)

    def unsubscribe_workflow_from_reactor(self, reactor: str, workflow: str, tenant: str = "public") -> bool:
        """Delete the subscription; False if there was none."""
        return self._rt._api(ReactorEngine.unsubscribe, reactor, workflow, tenant)

    def set_subscription_enabled(self, reactor: str, workflow: str, tenant: str = "public", *, enabled: bool) -> bool:
        """Pause or resume a subscription (the poll loop skips disabled ones)."""
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
        """Declare a workflow body ``fn(context)`` and its run time in seconds
        (a number, or a callable drawing from a ``random.Random``)."""
        self._rt.registry.register_workflow(name, fn, duration, triggers)

    def register_computation_graph(self, reactor: str, fn: Callable[[dict], Any], *, name: str | None = None) -> None:
        """Declare an in-process graph called with the sources on every firing of ``reactor``."""
        self._rt.registry.register_computation_graph(reactor, fn, name)

    def register_trigger(self, name: str, *, on: str) -> None:
        """Declare a trigger whose primary workflow is ``on`` (trigger-name fan-out)."""
        self._rt.registry.register_trigger(name, on)
