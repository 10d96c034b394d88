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
``ack``, ``nack``, ``in_progress``, ``term``, ``status``, ``seek``, ``retire``,
``restore``, ``backup``, ``restore_backup``, and :meth:`~.simulation.LeaseSimulation.administer`) calls
:func:`authorize` first.

A :class:`Credential` is either a *consumer credential* (``Credential.consumer("indexer")``,
or of a :class:`~.identity.ConsumerIdentity`, as the calls take one) or the
*admin grant* (``Credential.admin_grant()``; :data:`ADMIN` is the default
database's). Each is granted in **one named database** (``database=``, by
default ``"default"``): in RiffDB authority is granted per database, and
"consumers in sibling named databases remain isolated", so a credential of
``orders`` does nothing in ``tickets`` — not even on a consumer of the same
name there — and no grant covers every database. A runtime serves one
database (``LeaseSimulation(database=...)``) and refuses a credential of
another. The rules (:data:`RULES`):

===========================================================  ==========================================
``consume``, ``ack``, ``nack``, ``in_progress``, ``term``    the consumer's own credential only
``status``                                                   the consumer's own credential, or the admin grant
``seek``, ``retire``                                         the admin grant only
``restore``, ``backup``, ``restore_backup``                  the admin grant only (the whole database)
===========================================================  ==========================================

Anything else fails closed: :func:`authorize` raises :class:`Unauthorized`
(a :class:`PermissionError`) naming the operation, the consumer, the
credential held and the one needed, before any transaction opens — so a
refused call changes no table and writes no trace row. A caller that is not a
:class:`Credential` at all is refused the same way.

The runtimes' own client loops are each consumer's own client and hold its
credential; a by-hand call that passes no ``caller`` acts with the credential
its operation needs (the consumer's own for a pull, the admin grant for a
seek, both of the runtime's database), as the operator at a console holding
both would. Pass ``caller=`` to call as someone else.

Authority is checked before the call looks for the consumer. A call the
credential allows on a consumer that does not exist (retired, or never added)
is then refused the one way every transition refuses — by its result, RiffDB's
``NotFound``: ``not_found`` from ``ack``, ``nack``, ``seek`` and ``retire``, a
:class:`~.leasing.Pull` whose ``result`` is ``not_found`` (and no lease) from
``consume``, None from ``status``; nothing changes and nothing is raised, so a
worker that outlived its consumer's retire sees a refusal, not an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from fanoutsim.designs.leases.identity import consumer_key
from fanoutsim.designs.leases.tables import DEFAULT_DATABASE, check_database
from fanoutsim.kernel.names import check_name

OWN, ADMIN_GRANT, OWN_OR_ADMIN = "own", "admin", "own_or_admin"
RULES: dict[str, str] = {
    "consume": OWN,
    "ack": OWN,
    "nack": OWN,
    "in_progress": OWN,
    "term": OWN,
    "status": OWN_OR_ADMIN,
    "seek": ADMIN_GRANT,
    "retire": ADMIN_GRANT,
    "restore": ADMIN_GRANT,
    "backup": ADMIN_GRANT,
    "restore_backup": ADMIN_GRANT,
}


class Unauthorized(PermissionError):
    """A call the caller's credential does not allow; nothing was changed."""


@dataclass(frozen=True)
class Credential:
    """A consumer credential (``consumer`` set, ``admin`` False) or the admin
    grant (``consumer`` None, ``admin`` True), granted in ``database``. Build
    them with :meth:`Credential.consumer` and :meth:`Credential.admin_grant`
    (:data:`ADMIN`: the default database's)."""

    consumer_name: str | None = None
    admin: bool = False
    database: str = DEFAULT_DATABASE

    def __post_init__(self) -> None:
        if not isinstance(self.admin, bool):
            raise TypeError(f"admin must be a bool, got {self.admin!r}")
        if self.admin == (self.consumer_name is not None):
            raise ValueError(
                "a credential is either one consumer's (consumer_name set) or the admin grant "
                f"(admin=True), got consumer_name={self.consumer_name!r}, admin={self.admin!r}"
            )
        if self.consumer_name is not None:
            check_name("consumer_name", self.consumer_name)
        check_database(self.database)

    @classmethod
    def consumer(cls, name: object, database: str = DEFAULT_DATABASE) -> Credential:
        """The credential of consumer ``name`` (a name or a
        :class:`~.identity.ConsumerIdentity`) in ``database``: its own lease,
        ack, nack and status."""
        key = consumer_key(name)
        if not isinstance(key, str):
            raise ValueError(f"a consumer credential needs a consumer name or a ConsumerIdentity, got {name!r}")
        return cls(consumer_name=key, database=database)

    @classmethod
    def admin_grant(cls, database: str = DEFAULT_DATABASE) -> Credential:
        """The admin grant of ``database``: seek, retire, restores and status."""
        return cls(admin=True, database=database)

    def __str__(self) -> str:
        who = "the admin grant" if self.admin else f"consumer {self.consumer_name!r}'s credential"
        return f"{who} in database {self.database!r}"


ADMIN = Credential.admin_grant()


def needed(op: str, consumer: str | None = None, database: str = DEFAULT_DATABASE) -> Credential:
    """The credential ``op`` on ``consumer`` in ``database`` needs (the
    consumer's own for ``status``): what a by-hand call without ``caller`` acts with."""
    rule = RULES.get(op)
    if rule is None:
        raise ValueError(f"op must be one of {', '.join(RULES)}, got {op!r}")
    return Credential.admin_grant(database) if rule == ADMIN_GRANT else Credential.consumer(consumer, database)


def authorize(caller: object, op: str, consumer: str | None = None, database: str = DEFAULT_DATABASE) -> Credential:
    """``caller`` if it may do ``op`` (on ``consumer``) in ``database``; else :class:`Unauthorized`."""
    rule = RULES.get(op)
    if rule is None:
        raise ValueError(f"op must be one of {', '.join(RULES)}, got {op!r}")
    on = "" if rule == ADMIN_GRANT and consumer is None else f" on consumer {consumer!r}"
    if not isinstance(caller, Credential):
        raise Unauthorized(
            f"{op}{on} refused: the caller must be a Credential "
            f"(Credential.consumer(name) or ADMIN), got {caller!r}; nothing was changed"
        )
    if caller.database != database:
        raise Unauthorized(
            f"{op}{on} refused: the caller holds {caller}; this is database {database!r}, "
            f"and a credential is granted in one database; nothing was changed"
        )
    own = not caller.admin and caller.consumer_name == consumer
    ok = {OWN: own, ADMIN_GRANT: caller.admin, OWN_OR_ADMIN: own or caller.admin}[rule]
    if not ok:
        want = {
            OWN: f"consumer {consumer!r}'s own credential",
            ADMIN_GRANT: "the admin grant",
            OWN_OR_ADMIN: f"consumer {consumer!r}'s own credential or the admin grant",
        }[rule]
        raise Unauthorized(f"{op}{on} refused: it needs {want}, the caller holds {caller}; nothing was changed")
    return caller


__all__ = ["ADMIN", "Credential", "RULES", "Unauthorized", "authorize", "needed"]
