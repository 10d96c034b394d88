"""The store interface: the only way the engine reads or writes durable state.

Rows cross this interface as plain dicts whose timestamps are ``int``
microseconds since the epoch (see :mod:`fanoutsim.kernel.timeutil`) and whose ids are
UUID strings. Orderings are part of the contract, because they decide which
firing a batch takes and which execution a worker claims; both adapters must
produce the same sequence for the same calls, or runs would differ by store:

* firings of a stream: by ``(fired_at, id)``
* subscriptions: by ``(tenant_id, reactor_name, workflow_name)``
* executions: by ``(dispatched_at, id)``
* runner_log: by ``seq``

Both adapters also fail alike:

* a duplicate key raises :class:`KeyError` and *fails the transaction*, as
  SQL aborts it: should the caller catch the error, every later call in the
  block raises :class:`RuntimeError`, and so does leaving the block normally,
  which commits nothing (DuckDB's COMMIT of an aborted transaction would roll
  back without a word);
* an update or finish of an id that does not exist changes nothing (SQL's
  ``UPDATE ... WHERE id = ?`` matching no row);
* a negative ``limit`` raises :class:`ValueError`, before anything runs;
* ``rows()`` on the thread holding the open transaction raises
  :class:`RuntimeError`: it reads committed rows, which that thread would
  wait for forever.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

# table -> columns, in the order DataFrames show them
TABLES: dict[str, tuple[str, ...]] = {
    "reactor_firings": ("id", "reactor_name", "tenant_id", "payload", "fired_at", "created_at"),
    "reactor_subscriptions": (
        "id", "reactor_name", "workflow_name", "tenant_id", "enabled", "predicate",
        "last_seen_fired_at", "last_seen_firing_id", "predicate_error_count", "predicate_error_firing_id",
        "last_predicate_error", "predicate_degraded", "created_at", "updated_at",
    ),
    "workflow_executions": (
        "id", "workflow_name", "tenant_id", "context", "status",
        "dispatched_at", "claimed_at", "finished_at",
    ),
    # the runner process's own life: one row per start and per clean stop, so a
    # start with no stop before it marks a crash, even a kill -9
    "runner_log": ("seq", "happened_at", "event", "detail"),
    # -- the outbox design (seed 002): a domain table, the log, its cursors --
    "pages": ("id", "body", "updated_at"),
    "outbox": ("seq", "ts", "topic", "kind", "ref", "due_at"),
    "cursors": ("consumer", "seq"),
    "parked": ("consumer", "seq", "error", "attempts", "parked_at"),
    "deferred": ("consumer", "seq", "due_at"),
    # -- the leased-consumer design (seed 003): the event log, consumers, their
    # per-partition checkpoints and sparse resolutions, leases, retries, dead
    # letters, the history row --
    "events": ("seq", "event_id", "commit_seq", "ordinal", "partition", "kind", "payload", "committed_at"),
    "lease_consumers": ("consumer", "start_seq", "start_commit", "batch_limit", "in_flight_limit",
                        "lease_seconds", "revision"),
    "checkpoints": ("consumer", "partition", "seq", "commit_seq"),
    "resolutions": ("consumer", "event_id", "seq", "partition", "commit_seq", "kind"),
    "leases": ("consumer", "event_id", "seq", "partition", "token", "incarnation", "attempt",
               "leased_at", "expires_at"),
    "retries": ("consumer", "event_id", "seq", "partition", "attempts", "not_before", "error"),
    "dead_letters": ("consumer", "event_id", "seq", "partition", "attempts", "error", "payload", "dead_at"),
    "history": ("incarnation", "last_commit", "last_seq", "leases_granted"),
}
TIMESTAMP_COLUMNS = frozenset(
    {"fired_at", "created_at", "last_seen_fired_at", "updated_at",
     "dispatched_at", "claimed_at", "finished_at", "happened_at",
     "ts", "due_at", "parked_at",
     "committed_at", "leased_at", "expires_at", "not_before", "dead_at"}
)
# what a call on a transaction that a failed write ended says, in both adapters
FAILED_TX = "a write in this transaction failed ({}); leave the block so it rolls back"
SWALLOWED_TX = "transaction rolled back: a write in it failed ({})"

# a subscription is known by its id and its triple; changing either is a new
# subscription (delete and insert), never an update
SUBSCRIPTION_IDENTITY = frozenset({"id", "reactor_name", "workflow_name", "tenant_id"})


def check_limit(limit: int) -> int:
    """A row limit as SQL's ``LIMIT`` takes it: an int >= 0 (a negative slice
    bound would silently mean "all but the last few" in Python)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    return limit


def check_subscription_changes(changes: dict) -> None:
    """Reject columns an update may not set, before anything is written."""
    unknown = set(changes) - set(TABLES["reactor_subscriptions"])
    if unknown:
        raise KeyError(f"unknown reactor_subscriptions column(s): {sorted(unknown)}")
    identity = SUBSCRIPTION_IDENTITY & set(changes)
    if identity:
        raise ValueError(
            f"cannot update {sorted(identity)} of a subscription; delete it and insert a new one"
        )


class Tx(ABC):
    """One open transaction. Obtain it from :meth:`Store.transaction`."""

    # the error of a write that failed in this transaction; it can no longer commit
    failed: BaseException | None = None

    # -- reactor_firings -------------------------------------------------
    @abstractmethod
    def insert_firing(self, row: dict) -> None: ...

    @abstractmethod
    def fetch_firings(self, reactor: str, tenant: str, after: int | None, limit: int,
                      after_id: str | None = None, until: int | None = None) -> list[dict]:
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

    # -- reactor_subscriptions ------------------------------------------
    @abstractmethod
    def get_subscription(self, reactor: str, workflow: str, tenant: str) -> dict | None: ...

    @abstractmethod
    def insert_subscription(self, row: dict) -> None: ...

    @abstractmethod
    def update_subscription(self, sub_id: str, changes: dict) -> None:
        """Set ``changes`` (column -> value) on one row; identity columns are refused."""

    @abstractmethod
    def delete_subscription(self, sub_id: str) -> bool: ...

    @abstractmethod
    def list_subscriptions(self, tenant: str | None = None, enabled_only: bool = False) -> list[dict]: ...

    # -- workflow_executions --------------------------------------------
    @abstractmethod
    def insert_execution(self, row: dict) -> None: ...

    @abstractmethod
    def claim_executions(self, now: int, limit: int) -> list[dict]:
        """Mark up to ``limit`` pending executions running, oldest first; return them."""

    @abstractmethod
    def requeue_running(self) -> list[str]:
        """Put every ``running`` execution back to ``pending`` (claimed_at NULL):
        the claims of an executor that died. Returns their ids, oldest first."""

    # -- runner_log -----------------------------------------------------
    @abstractmethod
    def log_runner(self, at: int, event: str, detail: str | None = None) -> int:
        """Append one row to ``runner_log``; returns its ``seq`` (1, 2, ...)."""

    @abstractmethod
    def finish_execution(self, execution_id: str, now: int, status: str) -> None:
        """Set ``status`` and ``finished_at``; the row is no longer pending."""

    # == the outbox design (seed 002) =====================================
    # Orderings: outbox by ``seq``; cursors by ``consumer``; parked and
    # deferred by ``(consumer, seq)``; pages by ``id``.

    # -- outbox ------------------------------------------------------------
    @abstractmethod
    def reserve_outbox_seq(self) -> int:
        """The next outbox seq (1, 2, ...), never handed out twice: a sequence's
        nextval. A seq reserved and never inserted stays a gap."""

    @abstractmethod
    def insert_outbox(self, row: dict) -> None:
        """Append one outbox row (``seq`` from :meth:`reserve_outbox_seq`); a
        seq already in the table raises :class:`KeyError`."""

    @abstractmethod
    def fetch_outbox(self, after: int, limit: int) -> list[dict]:
        """Up to ``limit`` rows with ``seq > after``, in seq order."""

    @abstractmethod
    def outbox_bounds(self) -> tuple[int | None, int]:
        """``(oldest retained seq or None, last reserved seq or 0)``."""

    @abstractmethod
    def prune_outbox(self, cutoff: int, limit: int | None = None) -> list[int]:
        """Delete rows with ``ts < cutoff`` (lowest seq first, at most
        ``limit``), except rows still deferred for some consumer; returns the
        deleted seqs in order."""

    # -- cursors -------------------------------------------------------------
    @abstractmethod
    def get_cursor(self, consumer: str) -> int | None: ...

    @abstractmethod
    def set_cursor(self, consumer: str, seq: int) -> None:
        """Insert or overwrite the consumer's cursor."""

    @abstractmethod
    def list_cursors(self) -> list[dict]: ...

    # -- parked and deferred rows ------------------------------------------------
    @abstractmethod
    def park(self, row: dict) -> None:
        """Record a poison row (consumer, seq, error, attempts, parked_at);
        parking the same (consumer, seq) again overwrites it."""

    @abstractmethod
    def list_parked(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def defer(self, consumer: str, seq: int, due_at: int) -> None:
        """Remember that ``consumer`` owes the row ``seq`` at ``due_at``."""

    @abstractmethod
    def fetch_due(self, consumer: str, now: int, limit: int) -> list[dict]:
        """Deferred entries of ``consumer`` with ``due_at <= now``, by ``(due_at, seq)``."""

    @abstractmethod
    def next_due(self, consumer: str) -> int | None:
        """The earliest ``due_at`` the consumer still owes, or None."""

    @abstractmethod
    def delete_deferred(self, consumer: str, seq: int) -> bool: ...

    # -- the domain table ------------------------------------------------------
    @abstractmethod
    def upsert_page(self, row: dict) -> None: ...

    @abstractmethod
    def get_page(self, page_id: str) -> dict | None: ...

    # == the leased-consumer design (seed 003) ==============================
    # Orderings: events by ``seq``; lease_consumers by ``consumer``;
    # checkpoints by ``(consumer, partition)``; leases, retries, dead_letters
    # and resolutions by ``(consumer, seq)``. ``history`` is one row.

    # -- history: the incarnation and the log's counters ----------------------
    @abstractmethod
    def get_history(self) -> dict:
        """The one history row: ``incarnation`` (1 at first), ``last_commit``,
        ``last_seq`` and ``leases_granted`` (0 at first); they only grow."""

    @abstractmethod
    def set_history(self, row: dict) -> None:
        """Overwrite the history row with ``row``'s four columns."""

    # -- events -----------------------------------------------------------------
    @abstractmethod
    def insert_event(self, row: dict) -> None:
        """Append one event; a ``seq`` or ``event_id`` already there raises :class:`KeyError`."""

    @abstractmethod
    def get_event(self, event_id: str) -> dict | None: ...

    @abstractmethod
    def get_event_at(self, seq: int) -> dict | None:
        """The retained event at log position ``seq``, or None."""

    @abstractmethod
    def event_window(self, consumer: str, after: int, limit: int, partition: str | None = None) -> list[dict]:
        """Per partition (only ``partition``, if given), the first ``limit``
        retained events with ``seq > after`` and past ``consumer``'s checkpoint
        of that partition; all of them by ``seq``. (``limit`` 1: each
        partition's first required event.)"""

    @abstractmethod
    def event_bounds(self) -> tuple[int | None, int | None]:
        """``(lowest, highest)`` retained seq, or ``(None, None)``."""

    @abstractmethod
    def prune_events(self, cutoff: int, fence: int | None, limit: int | None = None) -> list[str]:
        """Delete events with ``committed_at < cutoff`` and, unless ``fence``
        is None, ``commit_seq < fence`` (lowest seq first, at most ``limit``);
        returns their event ids in seq order."""

    # -- consumers and checkpoints ----------------------------------------------
    @abstractmethod
    def get_lease_consumer(self, consumer: str) -> dict | None: ...

    @abstractmethod
    def put_lease_consumer(self, row: dict) -> None:
        """Insert or overwrite one consumer row."""

    @abstractmethod
    def delete_lease_consumer(self, consumer: str) -> bool:
        """Delete the consumer's row (not its other rows); whether there was one."""

    @abstractmethod
    def list_lease_consumers(self) -> list[dict]: ...

    @abstractmethod
    def list_checkpoints(self, consumer: str) -> list[dict]:
        """The consumer's checkpoint rows, by partition: ``seq`` and
        ``commit_seq`` of the last event of the contiguous done prefix."""

    @abstractmethod
    def set_checkpoint(self, consumer: str, partition: str, seq: int, commit_seq: int) -> None: ...

    @abstractmethod
    def clear_checkpoints(self, consumer: str) -> int:
        """Delete the consumer's checkpoints; how many there were."""

    # -- sparse resolutions: done events past a checkpoint ----------------------
    @abstractmethod
    def insert_resolution(self, row: dict) -> None:
        """Hold one resolved event past its partition's checkpoint; the same
        ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_resolutions(self, consumer: str, partition: str | None = None) -> list[dict]: ...

    @abstractmethod
    def delete_resolution(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def clear_resolutions(self, consumer: str) -> int:
        """Delete the consumer's resolutions; how many there were."""

    # -- leases -------------------------------------------------------------------
    @abstractmethod
    def insert_lease(self, row: dict) -> None:
        """A lease of ``(consumer, event_id)``; a second one raises :class:`KeyError`."""

    @abstractmethod
    def get_lease(self, consumer: str, event_id: str) -> dict | None: ...

    @abstractmethod
    def list_leases(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def delete_lease(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def expired_leases(self, now: int, limit: int) -> list[dict]:
        """Leases with ``expires_at <= now``, by ``(expires_at, consumer, seq)``."""

    # -- retries and dead letters ---------------------------------------------------
    @abstractmethod
    def put_retry(self, row: dict) -> None:
        """Insert or overwrite the retry of ``(consumer, event_id)``."""

    @abstractmethod
    def get_retry(self, consumer: str, event_id: str) -> dict | None: ...

    @abstractmethod
    def delete_retry(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def list_retries(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def clear_retries(self, consumer: str) -> int:
        """Delete the consumer's retries; how many there were."""

    @abstractmethod
    def insert_dead_letter(self, row: dict) -> None:
        """Retain a dead letter; the same ``(consumer, event_id)`` again raises :class:`KeyError`."""

    @abstractmethod
    def list_dead_letters(self, consumer: str | None = None) -> list[dict]: ...

    @abstractmethod
    def clear_dead_letters(self, consumer: str) -> int:
        """Delete the consumer's dead letters; how many there were."""


class Store(ABC):
    """A set of tables with transactions. Not re-entrant: one open tx at a time."""

    @abstractmethod
    def _begin(self) -> Tx: ...

    @abstractmethod
    def _commit(self, tx: Tx) -> None: ...

    @abstractmethod
    def _rollback(self, tx: Tx) -> None: ...

    def transaction(self) -> "Transaction":
        """``with store.transaction() as tx:`` — commit on normal exit; roll back
        every write on any exception (a Crash included)."""
        return Transaction(self)

    @abstractmethod
    def rows(self, table: str) -> list[dict]:
        """Committed rows of a table, in the contract's order (for DataFrames)."""

    def close(self) -> None:
        pass


class Transaction:
    """The ``with`` block of :meth:`Store.transaction`. A small class rather than
    a generator-based context manager: the engine opens one for nearly every
    step, so its fixed cost is on every hot path."""

    __slots__ = ("store", "tx")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tx: Tx | None = None

    def __enter__(self) -> Tx:
        self.tx = self.store._begin()
        return self.tx

    def __exit__(self, exc_type, exc, tb) -> bool:
        tx = self.tx
        if exc_type is not None:
            self.store._rollback(tx)
            return False  # re-raise
        if tx.failed is not None:  # the block swallowed a failed write
            self.store._rollback(tx)
            raise RuntimeError(SWALLOWED_TX.format(tx.failed)) from tx.failed
        self.store._commit(tx)
        return False
