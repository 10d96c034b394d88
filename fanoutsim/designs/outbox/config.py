"""The knobs of the outbox dispatcher, and the declaration of a consumer.

:class:`OutboxConfig` is the dispatcher's (one per run); :class:`ConsumerSpec`
is one consumer's code and guardrails (one per registered consumer). Both check
their values when built, and an error names the field and the value.

``read_mode`` chooses how a wake-up reads past a cursor. Seqs are handed out at
insert but become visible at commit, so a transaction that commits late can
put a row *under* a cursor that already moved past its seq:

``"all"``      read every visible row past the cursor (as the seed describes;
               the late-commit hole is open);
``"settled"``  read rows past the cursor only while their ``ts`` is at least
               ``settle`` seconds old, stopping at the first younger one:
               closes the hole for commits later than their stamp by less than
               ``settle``, at that cost in latency;
``"gap"``      stop at the first missing seq until it fills, or until it has
               been missing for ``gap_timeout`` seconds (a writer that died
               with its seq leaves a gap forever): no latency cost while seqs
               commit in order.

The hint's connection (seed 002: "A single dispatcher task holds one reserved
Postgres connection just for LISTEN. The postgres.js pool sets aside this
connection so a Gmail backfill or a burst of keystrokes can never starve the
propagation path"): the database pool has ``pool_size`` connections
(postgres.js's default ``max`` is 10). With ``reserve_listener=True`` (the
seed's design, the default) one of them is set aside for LISTEN, so a
:class:`~fanoutsim.designs.outbox.faults.Backfill` holding the rest leaves every hint
alone. With ``reserve_listener=False`` the listener takes a connection from
the shared pool for each hint: while a backfill holds all of them, a hint waits
for one to come free — at most ``listener_wait`` seconds — or is lost, and the
consumers wait for the safety poll (see :mod:`.notify`). Only the listener is
modelled on the pool; the dispatcher's reads and writes are not.

How a consumer's loop wakes, polls and reads (issue 28: the rules the PostgreSQL
job queues people run use; each default is the seed's loop, and the presets of
:mod:`~fanoutsim.designs.outbox.presets` set the libraries' values):

``poll_mode``
    ``"fixed"`` (the default): one safety poll ticks every
    ``safety_poll_interval`` and wakes every consumer, whatever hints came.
    ``"idle"``: each consumer's own timeout of ``safety_poll_interval``,
    started anew after each round of reads, so it fires only after that long
    without a wake-up (procrastinate 3.10: ``Worker._run_loop`` waits
    ``asyncio.sleep(fetch_job_polling_interval)`` afresh each time; pgqueuer
    1.6: ``QueueManager.run`` waits ``dequeue_timeout`` for the next event).
``wake_mode``
    ``"before_fetch"`` (the default): the consumer arms its wake before each
    read, so a hint that lands while it reads means "read again".
    ``"after_fetch"``: the wake flag is cleared after each read
    (procrastinate 3.10: ``_fetch_and_process_jobs`` calls
    ``self._new_job_event.clear()`` in the ``finally`` of every fetch): a hint
    that lands during the last, empty read is erased, and its row waits for the
    next hint or the poll — the lost wake-up.
``catch_up``
    ``False`` (the default): when the listener connects again (the end of a
    ``silent`` window; over PostgreSQL, a reconnect after its backend was
    lost) nothing is read until the next hint or poll (procrastinate 3.10's
    ``PsycopgConnector.listen_notify`` LISTENs again and tells the worker
    nothing). ``True``: every consumer reads at once, for the rows whose hints
    the gap swallowed.
``read_until_empty``
    ``False`` (the default): a round ends with a short batch (everything
    visible at that read was taken). ``True``: it reads again until a read
    finds nothing (pgqueuer 1.6's ``QueueManager.fetch_jobs``); a row that
    commits while the batch is handled is taken then, hint or not. With
    ``batch_limit = 1`` (one job per fetch, procrastinate 3.10's
    ``procrastinate_fetch_job_v2 ... LIMIT 1``) both are the same: a full
    batch always reads again, so a round ends only at an empty read.
``read_cost``
    how long a read that finds rows takes (seconds, or a law of
    :mod:`fanoutsim.kernel.dist`, e.g. the empirical law of the fetch times
    measured in ``hint_cost.json``): the read sees the rows committed when it
    starts, and the consumer handles them when it ends; what commits meanwhile
    is not in it. 0 (the default): reads take no time.
``empty_read_cost``
    how long a read that finds nothing takes (None, the default: as
    ``read_cost``). An empty fetch is cheaper than one that takes a job (no row
    to lock, update and return), and with ``wake_mode = "after_fetch"`` it is
    the window in which a hint is erased.
``repoll``
    seconds, or None (the default): after a round, the consumer asks whether
    rows are ready past its cursor (rows that committed after its last read
    began); if so it reads again after ``repoll`` seconds rather than at the
    poll (pgqueuer 1.6: ``_effective_dequeue_timeout`` returns
    ``min_dequeue_poll_interval`` = 0.1 s when ``eligible_queued_work`` finds
    a job).
``self_hint_every``
    seconds (or a law) between a consumer's status writes, or None (the
    default: none). Each write that records rows the consumer finished since
    the last one sends a hint of its own, through the channel like any (it can
    be dropped or delayed): the consumer wakes itself, and reads a row whose
    own hint was lost (pgqueuer 1.6: the ``JobStatusLogBuffer`` flushes every
    0.1 s x uniform(0.8, 1.2) with a DELETE on the queue table, and its
    statement trigger NOTIFYs ``table_changed_event``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fanoutsim.designs.outbox.faults import FAULTS
from fanoutsim.kernel.dist import Dist, check_dist, parse_dist
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.scenario import key
from fanoutsim.kernel.validate import IntAtLeast, Name, Rate, Seconds, duration, is_real, is_whole, plain_fields

READ_MODES = ("all", "settled", "gap")
POLL_MODES = ("fixed", "idle")
WAKE_MODES = ("before_fetch", "after_fetch")
NO_COST = Dist("fixed", 0.0)


def _seconds(value, where, *, positive=False, optional=False):
    if value is None and optional:
        return None
    return duration(value, where, positive=positive)  # 0 or at least 1 µs, the clock's unit


# the fault kinds the outbox runtimes act on (a plan with another is refused): its faults module's
OUTBOX_FAULT_KINDS = FAULTS.kind_names

# the scenario file's table of the OutboxConfig fields (a sweep grid key naming one is set there)
TABLE = "outbox"


@dataclass(frozen=True)
class OutboxConfig:
    """The dispatcher's knobs (one per run; the module's text explains the read,
    poll and wake rules at length). A scenario file's ``[outbox]`` table sets the
    same fields; :meth:`preset` gives a real job queue's. Every field is checked
    when the config is made: a bad value raises ValueError naming the field and
    what is allowed.

    Attributes
    ----------
    safety_poll_interval : float
        How often the safety poll wakes the consumers, whatever the hints
        (``poll_mode="fixed"``), or how long a consumer waits for a wake-up before
        it reads anyway (``"idle"``): a lost hint costs at most this.

        :Unit: seconds
        :Default: ``5.0``
        :Allowed: a finite number >= 1e-06 (1 µs, the clock's unit)
    batch_limit : int
        The most rows one fetch takes, per consumer.

        :Unit: rows
        :Default: ``100``
        :Allowed: an integer >= 1
    retention : float
        How long the outbox keeps a row: retention prunes a row older than this,
        whatever the cursors say (a consumer behind it loses it, cause ``pruned``),
        except deferred work still owed.

        :Unit: seconds
        :Default: ``604800.0`` (7 days)
        :Allowed: a finite number >= 1e-06
    retention_interval : float
        How often the retention step prunes the outbox rows past ``retention``.

        :Unit: seconds
        :Default: ``3600.0`` (an hour)
        :Allowed: a finite number >= 1e-06
    notify : bool
        Whether a commit sends a hint (``NOTIFY`` with the row's seq) after it
        commits; without hints, consumers wait for the safety poll.

        :Unit: none (a switch)
        :Default: ``True``
        :Allowed: ``True`` or ``False``
    read_mode : str
        How a wake-up reads past a cursor: ``"all"`` (every visible row; the
        late-commit hole is open), ``"settled"`` (only rows at least ``settle``
        seconds old) or ``"gap"`` (stop at the first missing seq until it fills or
        ``gap_timeout`` passes).

        :Unit: none (a name)
        :Default: ``"all"``
        :Allowed: ``"all"``, ``"settled"`` or ``"gap"``
    settle : float
        With ``read_mode="settled"``: how old a row's ``ts`` must be before it is
        read; closes the hole for commits later than their stamp by less, at that
        cost in latency.

        :Unit: seconds
        :Default: ``1.0``
        :Allowed: 0, or a finite number >= 1e-06
    gap_timeout : float
        With ``read_mode="gap"``: how long a missing seq holds the reads behind it
        before the consumer goes past it (a writer that died leaves a gap forever).

        :Unit: seconds
        :Default: ``10.0``
        :Allowed: 0, or a finite number >= 1e-06
    pool_size : int
        The database pool's connections (postgres.js's default ``max``); only the
        listener is modelled on the pool.

        :Unit: connections
        :Default: ``10``
        :Allowed: an integer >= 1; >= 2 with ``reserve_listener=True``
    reserve_listener : bool
        Whether one connection of the pool is set aside for LISTEN (the seed's
        design): a :class:`~fanoutsim.designs.outbox.faults.Backfill` holding the
        rest leaves the hints alone. Otherwise each hint takes a connection from the
        shared pool, and waits for one (``listener_wait``) or is lost.

        :Unit: none (a switch)
        :Default: ``True``
        :Allowed: ``True`` or ``False``
    listener_wait : float
        With ``reserve_listener=False``: how long a hint waits for a free
        connection before it is lost.

        :Unit: seconds
        :Default: ``1.0``
        :Allowed: 0, or a finite number >= 1e-06
    poll_mode : str
        ``"fixed"``: one safety poll ticks every ``safety_poll_interval`` and wakes
        every consumer; ``"idle"``: each consumer's own timeout, started anew after
        each round of reads (procrastinate, pgqueuer).

        :Unit: none (a name)
        :Default: ``"fixed"``
        :Allowed: ``"fixed"`` or ``"idle"``
    wake_mode : str
        ``"before_fetch"``: a consumer arms its wake before each read, so a hint
        landing during a read means "read again"; ``"after_fetch"``: the wake flag
        is cleared after each read, erasing a hint that landed during it (the lost
        wake-up of procrastinate 3.10).

        :Unit: none (a name)
        :Default: ``"before_fetch"``
        :Allowed: ``"before_fetch"`` or ``"after_fetch"``
    catch_up : bool
        Whether every consumer reads at once when the listener connects again (the
        end of a silent window, a reconnect), for the rows whose hints the gap
        swallowed; else they wait for the next hint or poll.

        :Unit: none (a switch)
        :Default: ``False``
        :Allowed: ``True`` or ``False``
    read_until_empty : bool
        Whether a round of reads goes on until a read finds nothing (pgqueuer);
        else a short batch ends it.

        :Unit: none (a switch)
        :Default: ``False``
        :Allowed: ``True`` or ``False``
    read_cost : Dist
        How long a read that finds rows takes: the read sees the rows committed as
        it starts, and the consumer handles them as it ends.

        :Unit: seconds (or a law of seconds)
        :Default: ``0.0`` (reads take no time)
        :Allowed: a finite number >= 0, or a law of seconds: a table such as
            ``{dist = "exponential", mean = 0.002}`` (laws: fixed, exponential,
            uniform, lognormal, empirical) or a :class:`~fanoutsim.kernel.dist.Dist`
    empty_read_cost : Dist or None
        How long a read that finds nothing takes (None: as ``read_cost``); with
        ``wake_mode="after_fetch"`` it is the window in which a hint is erased.

        :Unit: seconds (or a law of seconds)
        :Default: ``None``
        :Allowed: None, or a finite number >= 0, or a law of seconds: a table such
            as ``{dist = "exponential", mean = 0.001}`` or a
            :class:`~fanoutsim.kernel.dist.Dist`
    repoll : float or None
        After a round, when rows committed since its last read began are ready, read
        again after this long rather than at the poll (pgqueuer's 0.1 s); None: never.

        :Unit: seconds
        :Default: ``None``
        :Allowed: None, or a finite number >= 1e-06
    self_hint_every : Dist or None
        Time between a consumer's status writes, each a hint of its own (pgqueuer's
        status log): a consumer wakes itself, and reads a row whose own hint was
        lost. None: no status writes.

        :Unit: seconds (or a law of seconds)
        :Default: ``None``
        :Allowed: None, or a finite number > 0, or a law of seconds with a mean > 0:
            a table such as ``{dist = "uniform", low = 0.08, high = 0.12}`` or a
            :class:`~fanoutsim.kernel.dist.Dist`
    """

    safety_poll_interval: float = 5.0  # a wake-up with no hint, so a lost hint costs at most this
    batch_limit: int = 100  # rows one fetch takes per consumer
    retention: float = 7 * 86400.0  # rows older than this are pruned
    retention_interval: float = 3600.0  # how often the retention step runs
    notify: bool = True  # send a hint (the seq) after each commit
    read_mode: str = "all"
    settle: float = 1.0  # seconds, for read_mode="settled"
    gap_timeout: float = 10.0  # seconds, for read_mode="gap"
    pool_size: int = 10  # database pool connections (postgres.js's default max)
    reserve_listener: bool = True  # one of them set aside for LISTEN (the seed's design)
    listener_wait: float = 1.0  # seconds a hint waits for a free connection (unreserved)
    poll_mode: str = (
        "fixed"  # "fixed": one poll wakes all every interval; "idle": each consumer's, after its last round
    )
    wake_mode: str = (
        "before_fetch"  # "before_fetch": armed before each read; "after_fetch": cleared after it (lost wake-ups)
    )
    catch_up: bool = False  # every consumer reads when the listener connects again
    read_until_empty: bool = False  # a round reads until a read finds nothing (else a short batch ends it)
    read_cost: Dist = NO_COST  # how long a read that finds rows takes: seconds, or a law ({dist = "empirical", ...})
    empty_read_cost: Dist | None = None  # how long a read that finds nothing takes (None: read_cost)
    repoll: float | None = None  # seconds: read again this soon when a round ends with rows ready (None: never)
    self_hint_every: Dist | None = (
        None  # seconds between a consumer's status writes, each a hint of its own (None: none)
    )

    @classmethod
    def preset(cls, name: str, **overrides) -> OutboxConfig:
        """A real library's defaults and worker-loop rules in the dispatcher's options
        (``"procrastinate-3.10"``, ``"pgqueuer-1.6"``), with its read costs as measured;
        see :mod:`fanoutsim.designs.outbox.presets` for each number's source and the
        measured hint latency. ``overrides`` set any field, e.g. ``safety_poll_interval=2.0``."""
        from fanoutsim.designs.outbox.presets import preset

        return cls(**{**preset(name).config_values(), **overrides})

    def __post_init__(self):
        plain_fields(self)  # NumPy numbers kept as Python's
        _seconds(self.safety_poll_interval, "safety_poll_interval", positive=True)
        if not is_whole(self.batch_limit) or self.batch_limit < 1:
            raise ValueError(f"batch_limit must be an int >= 1, got {self.batch_limit!r}")
        _seconds(self.retention, "retention", positive=True)
        _seconds(self.retention_interval, "retention_interval", positive=True)
        if not isinstance(self.notify, bool):
            raise ValueError(f"notify must be True or False, got {self.notify!r}")
        if self.read_mode not in READ_MODES:
            raise ValueError(f"read_mode must be one of {', '.join(map(repr, READ_MODES))}, got {self.read_mode!r}")
        _seconds(self.settle, "settle")
        _seconds(self.gap_timeout, "gap_timeout")
        if not is_whole(self.pool_size) or self.pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {self.pool_size!r}")
        if not isinstance(self.reserve_listener, bool):
            raise ValueError(f"reserve_listener must be True or False, got {self.reserve_listener!r}")
        if self.reserve_listener and self.pool_size < 2:
            raise ValueError(
                f"pool_size must be >= 2 with reserve_listener=True (one connection is set "
                f"aside for LISTEN), got {self.pool_size!r}"
            )
        _seconds(self.listener_wait, "listener_wait")
        if self.poll_mode not in POLL_MODES:
            raise ValueError(f"poll_mode must be one of {', '.join(map(repr, POLL_MODES))}, got {self.poll_mode!r}")
        if self.wake_mode not in WAKE_MODES:
            raise ValueError(f"wake_mode must be one of {', '.join(map(repr, WAKE_MODES))}, got {self.wake_mode!r}")
        for name in ("catch_up", "read_until_empty"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        # a number, a law's table (as a scenario file gives it) or a Dist: kept as a checked Dist
        object.__setattr__(self, "read_cost", parse_dist(self.read_cost, "read_cost"))
        if self.empty_read_cost is not None:
            object.__setattr__(self, "empty_read_cost", parse_dist(self.empty_read_cost, "empty_read_cost"))
        _seconds(self.repoll, "repoll", positive=True, optional=True)
        if self.self_hint_every is not None:
            every = parse_dist(self.self_hint_every, "self_hint_every")
            if every.mean <= 0:  # a loop that never sleeps would stall the virtual clock
                raise ValueError(f"self_hint_every must be > 0 seconds on average, got {self.self_hint_every!r}")
            object.__setattr__(self, "self_hint_every", every)


@dataclass(frozen=True)
class ConsumerSpec:
    """One consumer, by its ``name``: what it does with a row, and the guardrails
    around it. Every field is checked as the spec is made (ValueError or TypeError
    naming the consumer and the field).

    ``fn(row)`` handles one outbox row; raising means a transient failure
    (retried). ``duration`` is how long a step takes in virtual seconds (or a
    callable of a ``random.Random``); a step longer than ``timeout`` is cut off
    at ``timeout`` and counts as a failure. Failures back off
    ``backoff * 2**(attempt-1)`` seconds, capped at ``backoff_cap``, times a
    jitter factor in ``[1 - jitter, 1]``; the ``retry_budget``-th failure on a
    row parks it. ``rebuild`` (optional) rebuilds the consumer's derived state
    from base tables when it is reset: such a consumer is *rebuildable*.
    """

    name: str
    fn: Callable[[dict], Any] | None = None
    duration: float | Callable[[random.Random], float] = 0.0
    timeout: float | None = 30.0
    backoff: float = 0.5
    backoff_cap: float = 60.0
    jitter: float = 0.5
    retry_budget: int = 5
    rebuild: Callable[[list[dict]], Any] | None = None

    def __post_init__(self):
        plain_fields(self)  # NumPy numbers kept as Python's
        check_name("consumer name", self.name)
        where = f"consumer {self.name!r}"
        if self.fn is not None and not callable(self.fn):
            raise TypeError(f"{where}: fn must be callable or None, got {self.fn!r}")
        if self.rebuild is not None and not callable(self.rebuild):
            raise TypeError(f"{where}: rebuild must be callable or None, got {self.rebuild!r}")
        if isinstance(self.duration, Dist):  # a law's parameters, checked as a scenario file's are
            check_dist(self.duration, f"{where}: duration")
        elif not callable(self.duration):
            _seconds(self.duration, f"{where}: duration")
        _seconds(self.timeout, f"{where}: timeout", positive=True, optional=True)
        _seconds(self.backoff, f"{where}: backoff")
        _seconds(self.backoff_cap, f"{where}: backoff_cap")
        if not is_real(self.jitter) or not 0 <= self.jitter <= 1:
            raise ValueError(f"{where}: jitter must be a fraction in [0, 1], got {self.jitter!r}")
        rb = self.retry_budget
        if not is_whole(rb) or rb < 1:
            raise ValueError(f"{where}: retry_budget must be an int >= 1, got {rb!r}")

    def backoff_for(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the ``attempt``-th failure (1, 2, ...)."""
        base = min(self.backoff_cap, self.backoff * 2 ** (attempt - 1))
        return base * (1 - self.jitter * rng.random())


@dataclass(frozen=True)
class OutboxWorkload:
    """One ``[[workload]]`` table: writers committing page changes at Poisson times."""

    rate: float = key(Rate("commits"), doc="commits per virtual second")
    pages: int = key(
        IntAtLeast(1, "distinct pages the writers change"), 100, doc="distinct pages written (default 100)"
    )
    start: float = key(Seconds(), 0.0, doc="optional: when the writers start, in virtual seconds")
    stop: float | None = key(
        Seconds(low=None, unit="virtual seconds"), None, after="start", doc="optional: when they stop"
    )
    topic: str | None = key(Name(), None, doc='optional: every row\'s topic (default "page:<id>")')
