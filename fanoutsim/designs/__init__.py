"""The designs fanoutsim models, one package each, and the registry that
names them. A design is one line here: its name and the module whose
``DESIGN`` (a :class:`fanoutsim.kernel.design.Design`) describes it.

=========  =====================================================  ==========
name       what it models                                         seed
=========  =====================================================  ==========
reactor    reactor -> workflow subscriptions, timestamp            000, 001
           watermarks, CEL filters (Cloacina)
outbox     transactional outbox, NOTIFY hints, safety poll,        002
           per-consumer cursors (Subspace)
leases     leased durable consumers, ack/nack, dead letters,       003
           retention fences (RiffDB)
=========  =====================================================  ==========
"""

from __future__ import annotations

from fanoutsim.kernel.design import Design, Registry

#: The built-in designs: name -> the module whose ``DESIGN`` describes it.
BUILTIN = {
    "reactor": "fanoutsim.designs.reactor.design",
    "outbox": "fanoutsim.designs.outbox.design",
    "leases": "fanoutsim.designs.leases.design",
}

#: The registry every cross-design tool reads (the command, the report, sweeps, the server);
#: the four functions below are its methods.
REGISTRY = Registry(BUILTIN)
register = REGISTRY.register
unregister = REGISTRY.unregister
get = REGISTRY.get
names = REGISTRY.names


def design_of(obj) -> Design:
    """The design of a scenario or a runtime (its ``design`` attribute)."""
    name = getattr(obj, "design", None)
    if not isinstance(name, str):
        raise TypeError(f"{type(obj).__name__} does not say which design it belongs to (no .design)")
    return get(name)


__all__ = ["BUILTIN", "REGISTRY", "Design", "register", "unregister", "get", "names", "design_of"]
