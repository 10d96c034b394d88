"""The write path of a firing (seed 000, "Composition with the in-process path").

1. Every in-process computation graph subscribed to the reactor runs, in
   declaration order, synchronously, with the firing's sources. These are
   at-most-once: nothing durable records that they ran.
2. Only then is one ``reactor_firings`` row written. A crash between 1 and 2
   (the point ``reactor.after_graphs_before_log``) means the graphs saw a
   firing that no workflow subscriber will ever see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fanoutsim.designs.reactor.payload import decode_sources, encode_payload
from fanoutsim.kernel.names import check_name

if TYPE_CHECKING:
    from fanoutsim.designs.reactor.steps import Engine


def fire(
    e: Engine,
    now: int,
    reactor: str,
    sources: Mapping[str, Any],
    tenant: str = "public",
    *,
    graph: str | None = None,
    fired_at: int | None = None,
) -> str:
    """Fire ``reactor``; returns the new firing id. ``fired_at`` defaults to
    ``now``: a writer that stamps earlier than it commits passes its stamp."""
    check_name("reactor name", reactor)
    check_name("tenant name", tenant)
    blob = encode_payload(sources)  # raises before anything runs or is written
    firing_id = e.ids.new()
    # stamped at its commit (no skew, no late writer): one int for fired_at and created_at
    stamp = now if fired_at is None or fired_at == now else fired_at
    trace = e.trace
    trace.add(now, "fired", "reactor", None, firing_id, None, reactor)
    trace.attempted(firing_id, reactor, tenant, stamp, blob)
    for name, fn in e.registry.graphs.get(reactor, ()):
        try:
            fn(decode_sources(blob))
            trace.add(now, "graph_called", "reactor", what=firing_id, detail=name)
        except Exception as exc:  # a failing graph must not stop the durable path
            e.metrics.inc("fanoutsim_reactor_graph_errors_total", graph=name, reactor=reactor)
            trace.add(now, "graph_called", "reactor", what=firing_id, detail=f"{name}: error: {exc}")
    point = e.points["reactor.after_graphs_before_log"]
    if point is not None:
        point("reactor.after_graphs_before_log", now, reactor=reactor, what=firing_id)
    with e.store.transaction() as tx:
        tx.insert_firing(
            {
                "id": firing_id,
                "reactor_name": reactor,
                "tenant_id": tenant,
                "payload": blob,
                "fired_at": stamp,
                "created_at": now,
            }
        )
    e.metrics.inc("fanoutsim_reactor_firings_total", graph=graph or reactor, reactor=reactor)
    trace.logged(firing_id, now)
    trace.add(now, "logged", "reactor", None, firing_id, None, str(stamp))
    return firing_id
