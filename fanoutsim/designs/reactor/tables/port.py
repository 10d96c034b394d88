"""The reactor design's tables: their columns and their part of the transaction interface (the port).

Every adapter — :mod:`.memory`, :mod:`.sql` (DuckDB, and PostgreSQL through the
kernel's dialect layer) — implements it; the contract suite runs each against it."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Protocol, TypedDict

# -- the tables ----------------------------------------------------------------------
# table -> columns, in the order DataFrames show them
TABLES: dict[str, tuple[str, ...]] = {
    "reactor_firings": ("id", "reactor_name", "tenant_id", "payload", "fired_at", "created_at"),
    "reactor_subscriptions": (
        "id",
        "reactor_name",
        "workflow_name",
        "tenant_id",
        "enabled",
        "predicate",
        "last_seen_fired_at",
        "last_seen_firing_id",
        "predicate_error_count",
        "predicate_error_firing_id",
        "last_predicate_error",
        "predicate_degraded",
        "created_at",
        "updated_at",
    ),
    "workflow_executions": (
        "id",
        "workflow_name",
        "tenant_id",
        "context",
        "status",
        "dispatched_at",
        "claimed_at",
        "finished_at",
    ),
}
TIMESTAMP_COLUMNS = frozenset(
    {"fired_at", "created_at", "last_seen_fired_at", "updated_at", "dispatched_at", "claimed_at", "finished_at"}
)

# a subscription is known by its id and its triple; changing either is a new
# subscription (delete and insert), never an update
SUBSCRIPTION_IDENTITY = frozenset({"id", "reactor_name", "workflow_name", "tenant_id"})


#: The columns an update may set: all but the identity ones.
UPDATABLE = frozenset(TABLES["reactor_subscriptions"]) - SUBSCRIPTION_IDENTITY


# -- the rows ------------------------------------------------------------------------
# Rows cross the port as dicts (see fanoutsim.kernel.store.base): timestamps are
# int microseconds since the epoch, ids UUID strings. The TypedDicts say which
# keys each row has and what they hold; the columns above say their order.
class FiringRow(TypedDict):
    """One ``reactor_firings`` row."""

    id: str
    reactor_name: str
    tenant_id: str
    payload: bytes  # the encoded sources (fanoutsim.designs.reactor.payload)
    fired_at: int
    created_at: int


class SubscriptionRow(TypedDict):
    """One ``reactor_subscriptions`` row: a workflow's subscription to a
    reactor's stream of one tenant, and its watermark."""

    id: str
    reactor_name: str
    workflow_name: str
    tenant_id: str
    enabled: bool
    predicate: str | None  # a CEL expression; None: every firing passes
    last_seen_fired_at: int | None  # the watermark; None: never polled
    last_seen_firing_id: str | None
    predicate_error_count: int
    predicate_error_firing_id: str | None
    last_predicate_error: str | None
    predicate_degraded: bool
    created_at: int
    updated_at: int


class SubscriptionChanges(TypedDict, total=False):
    """What :meth:`ReactorTx.update_subscription` may set: any of the columns
    but the identity ones (:data:`SUBSCRIPTION_IDENTITY`)."""

    enabled: bool
    predicate: str | None
    last_seen_fired_at: int | None
    last_seen_firing_id: str | None
    predicate_error_count: int
    predicate_error_firing_id: str | None
    last_predicate_error: str | None
    predicate_degraded: bool
    created_at: int
    updated_at: int


class ExecutionRow(TypedDict):
    """One ``workflow_executions`` row: a dispatched workflow run."""

    id: str
    workflow_name: str
    tenant_id: str
    context: str  # JSON: the firings the run was dispatched for
    status: str  # pending, running, completed or failed
    dispatched_at: int
    claimed_at: int | None
    finished_at: int | None


def check_subscription_changes(changes: Mapping[str, object]) -> None:
    """Reject columns an update may not set, before anything is written."""
    if UPDATABLE.issuperset(changes):  # the poll loop's every watermark move
        return
    unknown = set(changes) - set(TABLES["reactor_subscriptions"])
    if unknown:
        raise KeyError(f"unknown reactor_subscriptions column(s): {sorted(unknown)}")
    identity = SUBSCRIPTION_IDENTITY & set(changes)
    if identity:
        raise ValueError(f"cannot update {sorted(identity)} of a subscription; delete it and insert a new one")


def cursor_of(sub: SubscriptionRow, compound: bool) -> tuple[int | None, str | None]:
    """A subscription's watermark as a fetch's cursor: ``(after, after_id)``,
    the firing id only for the compound cursor of a watermark that has moved."""
    after = sub["last_seen_fired_at"]
    return after, (sub["last_seen_firing_id"] if compound and after is not None else None)


# -- the interface -------------------------------------------------------------------
class ReactorTx(Protocol):
    """The reactor's part of :class:`~fanoutsim.kernel.store.base.Tx`."""

    __slots__ = ()

    # -- reactor_firings -------------------------------------------------
    @abstractmethod
    def insert_firing(self, row: FiringRow) -> None: ...

    @abstractmethod
    def fetch_firings(
        self,
        reactor: str,
        tenant: str,
        after: int | None,
        limit: int,
        after_id: str | None = None,
        until: int | None = None,
    ) -> list[FiringRow]:
        """Up to ``limit`` firings of one stream past a cursor, ordered by
        ``(fired_at, id)``. The cursor is ``fired_at > after`` (all firings when
        ``after`` is None) or, given ``after_id``, the compound
        ``(fired_at, id) > (after, after_id)``; ``until`` keeps only
        ``fired_at <= until`` (a settle horizon)."""

    @abstractmethod
    def prune_firings(self, cutoff: int, conservative: bool, limit: int | None = None) -> list[str]:
        """Delete firings with ``fired_at < cutoff`` (oldest first, at most
        ``limit``); when ``conservative``, only those that every enabled
        subscription of their stream has a watermark at or past. Returns the
        deleted ids in ``(fired_at, id)`` order."""

    @abstractmethod
    def count_firings(self) -> int: ...

    # Questions a step asks before a statement that may find nothing, so that
    # it can skip it. False means certainly nothing; an adapter unsure (one
    # answering from a bound of its committed rows) answers True, and the step
    # runs its statement as before.
    @abstractmethod
    def has_firings_past(self, reactor: str, tenant: str, after: int | None, after_id: str | None = None) -> bool:
        """Whether :meth:`fetch_firings` with this cursor (and no ``until``)
        could return a row: the stream's newest ``(fired_at, id)`` is past it."""

    def first_with_firings_past(self, subs: Sequence[SubscriptionRow], i: int, compound: bool) -> int:
        """The first index ``j >= i`` of ``subs`` (rows as listed) whose
        stream :meth:`has_firings_past` the subscription's cursor, or
        ``len(subs)``: a poll pass's skips over subscriptions with nothing new,
        in one call. The cursor is ``last_seen_fired_at``, with
        ``last_seen_firing_id`` when ``compound``."""
        has = self.has_firings_past
        n = len(subs)
        while i < n:
            sub = subs[i]
            if has(sub["reactor_name"], sub["tenant_id"], *cursor_of(sub, compound)):
                return i
            i += 1
        return n

    @abstractmethod
    def has_firings_before(self, cutoff: int) -> bool:
        """Whether any firing has ``fired_at < cutoff`` (else a prune deletes nothing)."""

    # -- reactor_subscriptions ------------------------------------------
    def lock_subscriptions(self) -> None:
        """Until this transaction ends, no other one subscribes: processes that
        start together on one PostgreSQL would both find a subscription
        missing and both insert it (the second fails on its UNIQUE). Nothing
        where one process holds the store (memory, DuckDB)."""

    @abstractmethod
    def get_subscription(self, reactor: str, workflow: str, tenant: str) -> SubscriptionRow | None: ...

    @abstractmethod
    def insert_subscription(self, row: SubscriptionRow) -> None: ...

    @abstractmethod
    def update_subscription(self, sub_id: str, changes: SubscriptionChanges) -> None:
        """Set ``changes`` (column -> value) on one row; identity columns are refused."""

    @abstractmethod
    def delete_subscription(self, sub_id: str) -> bool: ...

    @abstractmethod
    def list_subscriptions(self, tenant: str | None = None, enabled_only: bool = False) -> list[SubscriptionRow]: ...

    def poll_subscriptions(self) -> Sequence[SubscriptionRow]:
        """The enabled subscriptions in poll order, as ``list_subscriptions(
        enabled_only=True)`` lists them, for a poll pass that only reads them:
        an adapter may hand out rows it shares with later passes (and never
        changes)."""
        return self.list_subscriptions(enabled_only=True)

    # -- workflow_executions --------------------------------------------
    @abstractmethod
    def insert_execution(self, row: ExecutionRow) -> None: ...

    @abstractmethod
    def has_pending_executions(self) -> bool:
        """Whether any execution is ``pending`` (else a claim takes nothing)."""

    @abstractmethod
    def claim_executions(self, now: int, limit: int) -> list[ExecutionRow]:
        """Mark up to ``limit`` pending executions running, oldest first; return them."""

    @abstractmethod
    def requeue_running(self) -> list[str]:
        """Put every ``running`` execution back to ``pending`` (claimed_at NULL):
        the claims of an executor that died. Returns their ids, oldest first."""

    @abstractmethod
    def finish_execution(self, execution_id: str, now: int, status: str) -> None:
        """Set ``status`` and ``finished_at``; the row is no longer pending."""

    @abstractmethod
    def count_executions(self) -> int:
        """The rows of ``workflow_executions``, whatever their status."""
