"""Who may do what: the caller credential the leased-consumer API takes.

Seed 003 compiles roles to exact, least-authority permissions: a consumer's
permission lets a client pull, acknowledge and negatively acknowledge *its
own* durable consumer, and "SeekEventStreamConsumer is separate administrative
authority. Normal role compilation never grants it as a consequence of
consuming a stream." In RiffDB's code the check is made at the service
boundary (``riffdb-service``), before a storage transition runs; the storage
transitions themselves take no credential. fanoutsim does the same: the
engine steps (:mod:`.leasing`, :mod:`.consumers`) are the storage transitions,
and the public API of the runtimes (:class:`~.host.LeaseHost`: ``consume``,
``ack``, ``nack``, ``status``, ``seek``, ``retire``, ``restore``, ``backup``,
``restore_backup``, and :meth:`~.simulation.LeaseSimulation.administer`) calls
:func:`authorize` first.

A :class:`Credential` is either a *consumer credential* (``Credential.consumer("indexer")``)
or the *admin grant* (:data:`ADMIN`). The rules (:data:`RULES`):

========================================  ==========================================
``consume``, ``ack``, ``nack``            the consumer's own credential only
``status``                                the consumer's own credential, or the admin grant
``seek``, ``retire``                      the admin grant only
``restore``, ``backup``, ``restore_backup``  the admin grant only (the whole database)
========================================  ==========================================

Anything else fails closed: :func:`authorize` raises :class:`Unauthorized`
(a :class:`PermissionError`) naming the operation, the consumer, the
credential held and the one needed, before any transaction opens — so a
refused call changes no table and writes no trace row. A caller that is not a
:class:`Credential` at all is refused the same way.

The runtimes' own client loops are each consumer's own client and hold its
credential; a by-hand call that passes no ``caller`` acts with the credential
its operation needs (the consumer's own for a pull, the admin grant for a
seek), as the operator at a console holding both would. Pass ``caller=`` to
call as someone else.
"""
from __future__ import annotations

from dataclasses import dataclass

from fanoutsim.kernel.names import check_name

OWN, ADMIN_GRANT, OWN_OR_ADMIN = "own", "admin", "own_or_admin"
RULES: dict[str, str] = {
    "consume": OWN, "ack": OWN, "nack": OWN,
    "status": OWN_OR_ADMIN,
    "seek": ADMIN_GRANT, "retire": ADMIN_GRANT,
    "restore": ADMIN_GRANT, "backup": ADMIN_GRANT, "restore_backup": ADMIN_GRANT,
}


class Unauthorized(PermissionError):
    """A call the caller's credential does not allow; nothing was changed."""


@dataclass(frozen=True)
class Credential:
    """A consumer credential (``consumer`` set, ``admin`` False) or the admin
    grant (``consumer`` None, ``admin`` True). Build them with
    :meth:`Credential.consumer` and :data:`ADMIN`."""

    consumer_name: str | None = None
    admin: bool = False

    def __post_init__(self):
        if not isinstance(self.admin, bool):
            raise TypeError(f"admin must be a bool, got {self.admin!r}")
        if self.admin == (self.consumer_name is not None):
            raise ValueError("a credential is either one consumer's (consumer_name set) or the admin grant "
                             f"(admin=True), got consumer_name={self.consumer_name!r}, admin={self.admin!r}")
        if self.consumer_name is not None:
            check_name("consumer_name", self.consumer_name)

    @classmethod
    def consumer(cls, name: str) -> "Credential":
        """The credential of consumer ``name``: its own lease, ack, nack and status."""
        return cls(consumer_name=name)

    def __str__(self) -> str:
        return "the admin grant" if self.admin else f"consumer {self.consumer_name!r}'s credential"


ADMIN = Credential(admin=True)


def needed(op: str, consumer: str | None = None) -> Credential:
    """The credential ``op`` on ``consumer`` needs (the consumer's own for
    ``status``): what a by-hand call without ``caller`` acts with."""
    rule = RULES.get(op)
    if rule is None:
        raise ValueError(f"op must be one of {', '.join(RULES)}, got {op!r}")
    return ADMIN if rule == ADMIN_GRANT else Credential.consumer(consumer)


def authorize(caller, op: str, consumer: str | None = None) -> Credential:
    """``caller`` if it may do ``op`` (on ``consumer``); else :class:`Unauthorized`."""
    rule = RULES.get(op)
    if rule is None:
        raise ValueError(f"op must be one of {', '.join(RULES)}, got {op!r}")
    on = "" if rule == ADMIN_GRANT and consumer is None else f" on consumer {consumer!r}"
    if not isinstance(caller, Credential):
        raise Unauthorized(f"{op}{on} refused: the caller must be a Credential "
                           f"(Credential.consumer(name) or ADMIN), got {caller!r}; nothing was changed")
    own = not caller.admin and caller.consumer_name == consumer
    ok = {OWN: own, ADMIN_GRANT: caller.admin, OWN_OR_ADMIN: own or caller.admin}[rule]
    if not ok:
        want = {OWN: f"consumer {consumer!r}'s own credential", ADMIN_GRANT: "the admin grant",
                OWN_OR_ADMIN: f"consumer {consumer!r}'s own credential or the admin grant"}[rule]
        raise Unauthorized(f"{op}{on} refused: it needs {want}, the caller holds {caller}; nothing was changed")
    return caller


__all__ = ["ADMIN", "Credential", "RULES", "Unauthorized", "authorize", "needed"]
