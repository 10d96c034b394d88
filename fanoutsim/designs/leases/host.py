"""What the leased-consumer design's two runtimes share: the client spec
(:class:`LeaseClient`), the checks, the public API's plumbing and the table views."""

from __future__ import annotations

import pandas as pd

from fanoutsim.designs.leases.authority import authorize, needed
from fanoutsim.designs.leases.config import LEASE_FAULT_KINDS, MAX_RETRY_DELAY, check_limits, check_nack_delay
from fanoutsim.designs.leases.engine import LeaseEngine
from fanoutsim.designs.leases.faults import FAULTS
from fanoutsim.designs.leases.identity import consumer_key
from fanoutsim.designs.leases.tables import DEFAULT_DATABASE, TABLES, database_rows, in_database
from fanoutsim.kernel.frames import store_frame, table_frame
from fanoutsim.kernel.names import check_name
from fanoutsim.kernel.runtime.faces import checked_config
from fanoutsim.kernel.runtime.views import table_view
from fanoutsim.kernel.validate import Invalid, Seconds, is_real, is_whole


def checked_lease_config(config, seed):
    """The lease runtimes' common arguments: a LeaseConfig (None: the defaults)
    and an int seed; returns the config."""
    from fanoutsim.designs.leases import LeaseConfig

    return checked_config(config, seed, LeaseConfig)


def _fraction(value, where):
    if not is_real(value) or not 0 <= value <= 1:
        raise ValueError(f"{where} must be a probability in [0, 1], got {value!r}")
    return float(value)


def _checked(validator, value, where):
    """``validator`` (a scenario file's check of the same key) on an API argument:
    its message, behind ``where``, as a ValueError."""
    try:
        return validator.check(value)
    except Invalid as exc:
        raise ValueError(f"{where} {exc.message}") from None


def _secs(value, where, positive=False):
    return _checked(Seconds(strict=positive), value, where)


PULL_MODES = ("poll", "wait")
POISON_ACTIONS = ("nack", "term")


class LeaseClient:
    """A consumer's client code (survives crashes as a binary's code does): how
    long a worker works on a lease (``duration``: seconds, or ``callable(rng)``),
    its chance to fail (``fail``), which leases are poison (``poison(lease)``),
    the delay a failure nacks with, how often the client polls, and an optional
    effect ``fn(lease)`` (an exception from it is a failure: the lease is nacked).
    While ``paused`` the client takes no new leases (an operator's seek or
    retire waits for the consumer to hold none).

    What a broker's client does, beside RiffDB's (each off by default):

    * ``pull_mode``: ``"poll"`` (the default) pulls every ``poll_interval``;
      ``"wait"`` pulls as a JetStream ``fetch`` or a Redis ``XREADGROUP ...
      BLOCK`` does: again as soon as a worker ends, and a pull that finds
      nothing waits up to ``poll_interval`` for a publish or a retry or lease
      coming due;
    * ``in_progress_every``: seconds; a worker tells the broker it is still
      working this often (JetStream's ``Msg.in_progress()``), which extends its
      lease (None: never);
    * ``poison_action``: a poison event is nacked (``"nack"``) or terminated
      (``"term"``: JetStream's ``Msg.term()``, no redelivery)."""

    def __init__(
        self,
        name,
        duration=0.01,
        fail=0.0,
        poison=None,
        nack_delay=1.0,
        poll_interval=0.5,
        batch_limit=None,
        fn=None,
        *,
        max_retry_delay=MAX_RETRY_DELAY,
        pull_mode="poll",
        in_progress_every=None,
        poison_action="nack",
    ) -> None:
        if not callable(duration):
            _secs(duration, f"consumer {name!r}: duration")
        if poison is not None and not callable(poison):
            raise TypeError(f"consumer {name!r}: poison must be callable(lease) or None, got {poison!r}")
        if fn is not None and not callable(fn):
            raise TypeError(f"consumer {name!r}: fn must be callable(lease) or None, got {fn!r}")
        self.name, self.duration, self.poison, self.fn = name, duration, poison, fn
        self.fail = _fraction(fail, f"consumer {name!r}: fail")
        try:  # checked now, not at the first nack: LeaseConfig.max_retry_delay bounds it
            self.nack_delay = check_nack_delay(nack_delay, max_retry_delay)
        except ValueError as exc:
            raise ValueError(f"consumer {name!r}: {exc}") from None
        self.poll_interval = _secs(poll_interval, f"consumer {name!r}: poll_interval", positive=True)
        self.batch_limit = batch_limit
        if pull_mode not in PULL_MODES:
            raise ValueError(f"consumer {name!r}: pull_mode must be one of {PULL_MODES}, got {pull_mode!r}")
        if poison_action not in POISON_ACTIONS:
            raise ValueError(f"consumer {name!r}: poison_action must be one of {POISON_ACTIONS}, got {poison_action!r}")
        if in_progress_every is not None:
            in_progress_every = _secs(in_progress_every, f"consumer {name!r}: in_progress_every", positive=True)
        self.pull_mode, self.in_progress_every, self.poison_action = pull_mode, in_progress_every, poison_action
        self.paused = False

    def settings(self) -> dict:
        """What a caller chose for this client (callables compared as objects)."""
        return {
            "duration": self.duration,
            "fail": self.fail,
            "poison": self.poison,
            "nack_delay": self.nack_delay,
            "poll_interval": self.poll_interval,
            "fn": self.fn,
            "pull_mode": self.pull_mode,
            "in_progress_every": self.in_progress_every,
            "poison_action": self.poison_action,
        }

    def draw(self, rng) -> float:
        """This attempt's working time, in seconds (before a fault plan's say)."""
        return float(self.duration(rng) if callable(self.duration) else self.duration)

    def failure(self, lease, rng) -> str | None:
        """Why this attempt fails before its effect (None: it does not); draws
        from ``rng`` only when ``fail`` > 0."""
        if self.poison is not None and self.poison(lease):
            return "poison"
        if self.fail > 0 and rng.random() < self.fail:
            return "transient failure"
        return None


def same_consumer(
    name, row: dict, limits: dict, spec: LeaseClient | None, held: LeaseClient | None, open_limits: str = "riffdb"
) -> None:
    """Registering ``name`` again, which exists as ``row`` (``held``: its client in
    this runtime, if any): the same ask is a no-op, as RiffDB's create-if-absent
    is; a different one raises ValueError naming every setting that differs —
    nothing would apply it, and keeping the old one silently hides that.
    ``limits`` are the registration's, as the row would hold them."""
    checked = check_limits(**limits, limits=open_limits)
    differ = [f"{k}={checked[k]!r} (it has {row[k]!r})" for k in checked if checked[k] != row[k]]
    if spec is not None and held is not None:
        mine, theirs = spec.settings(), held.settings()
        differ += [f"{k}={mine[k]!r} (its client has {theirs[k]!r})" for k in mine if mine[k] != theirs[k]]
    elif spec is None and held is not None:
        differ.append("client=False (it has a client)")
    if differ:
        raise ValueError(
            f"consumer {name!r} exists with other settings: {'; '.join(differ)}. Register it again "
            f"with its settings (a no-op), or retire it and register it afresh"
        )


def lease_window(kind, start, stop) -> tuple[float, float | None]:
    """A lease workload's kind and window, checked: ``(start, stop)`` in seconds
    since the start (``stop`` None: never)."""
    check_name("kind", kind)
    start = _secs(start, "start")
    if stop is not None:
        stop = _secs(stop, "stop")
        if stop <= start:
            raise ValueError(f"stop must be after start ({start:g}), got {stop!r}")
    return start, stop


def lease_partitions(rate, partitions) -> list[str]:
    """A lease workload's arguments, checked: the partition names."""
    if not is_real(rate) or rate <= 0 or rate != rate or rate == float("inf"):
        raise ValueError(f"rate must be events per second > 0, got {rate!r}")
    if is_whole(partitions):
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions!r}")
        partitions = [f"p{i}" for i in range(partitions)]
    if isinstance(partitions, str):
        raise ValueError(f"partitions must be a count or a list of non-empty names, got {partitions!r}")
    partitions = list(partitions)
    if not partitions or not all(isinstance(p, str) and p for p in partitions):
        raise ValueError(f"partitions must be a count or a list of non-empty names, got {partitions!r}")
    return partitions


class LeaseHost:
    """Mixin for the lease runtimes (:class:`~.simulation.LeaseSimulation`,
    :class:`~.realtime.LeaseRealtime`): the broker API by hand, the table
    views, the trace with this design's names and the metrics. Needs ``store``,
    ``_trace``, ``metrics_registry`` and ``_api(step, *args, **kwargs)`` (one
    step of the live engine now, ``step`` a LeaseEngine function; raises while
    the node is down; None if a crash took it down).

    Every broker call takes ``caller=``, a :class:`~.authority.Credential` of
    this runtime's database; left out, the call acts with the credential it
    needs (the consumer's own, or the admin grant), as an operator holding both
    would. A call on a consumer that does not exist is refused by its result,
    ``not_found`` (see :mod:`.authority`)."""

    # what a plan may hold, checked as the runtime is made (a fault it would not act on is refused)
    fault_kinds = LEASE_FAULT_KINDS
    crash_points = FAULTS.points
    fault_hooks = FAULTS.hook_names

    def publish(self, partition: str, kind: str = "event", payload=None) -> str | None:
        """Append one event to ``partition`` now, a commit of its own: ``kind`` names
        it, ``payload`` is stored as a string (anything else as JSON). Returns its
        event id, ``"<commit>:<ordinal>"`` (None if a crash took the node down in the
        commit). Refuses, writing nothing: an empty partition or kind, a payload
        JSON cannot hold (NaN, infinity; ValueError); while the node is down, a
        RuntimeError."""
        out = self._api(LeaseEngine.publish, [(partition, kind, payload)])
        self._published()
        return None if out is None else out[0]

    def publish_many(self, events) -> list[str] | None:
        """Append ``[(partition, kind, payload), ...]`` as one commit (the events get
        consecutive seqs and one commit seq). Returns their event ids, in order (None
        if a crash took the node down in the commit). Refuses, writing nothing: an
        empty list, an item that is not such a triple, or a bad partition, kind or
        payload (ValueError); while the node is down, a RuntimeError."""
        out = self._api(LeaseEngine.publish, list(events))
        self._published()
        return out

    def _published(self) -> None:
        """An event was published (a runtime wakes what waits for one)."""

    def _granted(self) -> None:
        """A pull may have granted leases (a runtime wakes what times their expiry)."""

    def _authorize(self, op: str, consumer, caller) -> None:
        """The service boundary (:mod:`.authority`): ``caller`` (None: the
        credential ``op`` needs, of this runtime's database) may do ``op`` on
        ``consumer`` in this runtime's database, or Unauthorized is raised
        before anything runs."""
        authorize(needed(op, consumer, self.database) if caller is None else caller, op, consumer, self.database)

    def _registered(self, name: str, limits: dict, spec: LeaseClient | None) -> dict | None:
        """Before a registration changes anything: ``name``'s row if it exists
        (None: it does not), after :func:`same_consumer` has refused other
        settings than it holds — the one check both clocks make."""
        with self._tx() as tx:
            existing = tx.get_lease_consumer(name)
        if existing is not None:
            same_consumer(name, existing, limits, spec, self.clients.get(name), self.config.limits)
        return existing

    def consume(self, consumer: str, batch_limit: int | None = None, *, caller=None):
        """Lease up to ``batch_limit`` (None: the consumer's own limit) eligible
        events of ``consumer`` by hand, as its client does: its expired leases are
        first turned into retries, then the pull leases in partition order within
        the consumer's in-flight limit and each partition's window. Returns a
        :class:`~.leasing.Pull`: the list of :class:`~.leasing.Lease` granted (maybe
        none), whose ``result`` is ``applied``, or ``not_found`` if the consumer does
        not exist (None if a crash took the node down). ``caller``: a
        :class:`~.authority.Credential` (None: the consumer's own); another raises
        :class:`~.authority.Unauthorized` before anything runs. A batch limit outside
        the config's limits (1 through 8 under RiffDB's) raises ValueError; while the
        node is down, a RuntimeError."""
        consumer = consumer_key(consumer)
        self._authorize("consume", consumer, caller)
        out = self._api(LeaseEngine.consume, consumer, batch_limit)
        self._granted()
        return out

    def ack(self, consumer: str, event_id: str, token: str, incarnation: int, *, caller=None) -> str | None:
        """Acknowledge one leased event by hand, with the lease's ``token`` and
        history ``incarnation`` (both from the :class:`~.leasing.Lease`): the event is
        resolved and the checkpoint moves past it once every earlier event of its
        partition is. Returns ``acked``, or the reason it failed closed, with nothing
        changed: ``not_found`` (no such consumer), ``stale_incarnation`` (a restore
        since), ``no_lease``, ``wrong_token`` or ``expired``. An accepted ack is the
        caller's delivery (the trace records it, actor ``caller``, for the checker) —
        once its commit is in, even if the node crashes right after it (then this
        returns None); an effect whose ack failed closed is the caller's to know
        about. ``caller`` must be the consumer's own credential (None: it is), else
        :class:`~.authority.Unauthorized`; while the node is down, a RuntimeError."""
        consumer = consumer_key(consumer)
        self._authorize("ack", consumer, caller)
        return self._api(LeaseEngine.ack, consumer, event_id, token, incarnation, delivered_by="caller")

    def nack(
        self,
        consumer: str,
        event_id: str,
        token: str,
        incarnation: int,
        delay: float = 0.0,
        error: str | None = None,
        *,
        caller=None,
    ) -> str | None:
        """Report a failed attempt on one leased event by hand (``token`` and
        ``incarnation`` from its :class:`~.leasing.Lease`; ``error`` says why, for the
        dead letter): the lease ends and the event is retried after ``delay`` seconds,
        or, at its 10th failed attempt, dead-lettered. Returns ``retry_scheduled``,
        ``dead_lettered``, or the reason it failed closed, with nothing changed (as
        :meth:`ack`'s); None if a crash took the node down. Refuses a delay outside 0
        through ``config.max_retry_delay`` seconds (ValueError); ``caller`` must be
        the consumer's own credential (None: it is), else
        :class:`~.authority.Unauthorized`; while the node is down, a RuntimeError."""
        consumer = consumer_key(consumer)
        self._authorize("nack", consumer, caller)
        return self._api(LeaseEngine.nack, consumer, event_id, token, incarnation, delay=delay, error=error)

    def in_progress(self, consumer: str, event_id: str, token: str, incarnation: int, *, caller=None) -> str | None:
        """Still working on a leased event (JetStream's ``+WPI``, nats.py
        ``Msg.in_progress()``): its lease runs again from now, for the lease of
        its delivery (``extended``), or the reason it failed closed, as ``ack``'s.
        Not a delivery: the attempt count stays. The consumer's own credential."""
        consumer = consumer_key(consumer)
        self._authorize("in_progress", consumer, caller)
        return self._api(LeaseEngine.in_progress, consumer, event_id, token, incarnation)

    def term(
        self, consumer: str, event_id: str, token: str, incarnation: int, reason: str | None = None, *, caller=None
    ) -> str | None:
        """Stop redelivering a leased event now, without acknowledging it as
        processed (JetStream's ``+TERM``, nats.py ``Msg.term()``): ``terminated``,
        or the reason it failed closed, as ``ack``'s. The checkpoint passes it as
        it passes an ack (nats-server: "Treat like an ack to suppress
        redelivery"); it is never reported delivered. The consumer's own credential."""
        consumer = consumer_key(consumer)
        self._authorize("term", consumer, caller)
        return self._api(LeaseEngine.term, consumer, event_id, token, incarnation, reason=reason)

    def recover(self) -> int | None:
        """One pass of recovery now, by hand (the node runs it every
        ``recovery_interval``): every lease whose time is up expires, a failed
        attempt each — an immediate retry, or at the 10th the dead letter. Returns
        how many expired (None if a crash took the node down); RuntimeError while
        it is down."""
        return self._api(LeaseEngine.recover)

    def prune_once(self) -> int | None:
        """One pass of retention now, by hand (the node runs it every
        ``retention_interval``): delete the events older than ``config.retention``,
        never one a consumer still needs (the retention fence). Returns how many
        were deleted (None if a crash took the node down); RuntimeError while it
        is down."""
        return self._api(LeaseEngine.prune_once)

    def seek(self, consumer: str, position, *, caller=None) -> str | None:
        """Move ``consumer`` to ``position`` — ``"beginning"`` (the oldest retained
        event), ``"end"`` or a seq — clearing its checkpoints, retries and dead
        letters: it reads from there on. Returns ``applied``, ``outstanding_lease``
        (it holds a live lease: nothing changed; :meth:`administer` waits for it) or
        ``not_found`` (None if a crash took the node down). Refuses a position that
        is none of those, past the end of the log (ValueError) or inside pruned
        history (:class:`~.log.HistoryPruned`, a ValueError). Needs the admin grant
        (``caller`` None: it; another raises :class:`~.authority.Unauthorized`);
        while the node is down, a RuntimeError."""
        consumer = consumer_key(consumer)
        self._authorize("seek", consumer, caller)
        return self._api(LeaseEngine.seek, consumer, position)

    def retire(self, consumer: str, *, caller=None) -> str | None:
        """Delete ``consumer`` for good, with its checkpoints, retries and dead
        letters, releasing its retention fence (the same name registered later starts
        afresh). Returns ``applied``, ``outstanding_lease`` (it holds a live lease:
        nothing changed) or ``not_found`` (None if a crash took the node down). Needs
        the admin grant (``caller`` None: it; another raises
        :class:`~.authority.Unauthorized`); while the node is down, a RuntimeError."""
        consumer = consumer_key(consumer)
        self._authorize("retire", consumer, caller)
        return self._api(LeaseEngine.retire, consumer)

    def status(self, consumer: str, *, caller=None) -> dict | None:
        """What ``riffdb event status`` tells of ``consumer``: its row (start,
        limits, revision) with the history incarnation, its checkpoint per partition,
        and counts of live leases, retries and dead letters; None if there is no such
        consumer. Needs the consumer's own credential or the admin grant (``caller``
        None: the one it needs; another raises :class:`~.authority.Unauthorized`);
        while the node is down, a RuntimeError."""
        consumer = consumer_key(consumer)
        self._authorize("status", consumer, caller)
        return self._api(LeaseEngine.status, consumer)

    def restore(self, *, caller=None) -> int | None:
        """Publish a new history incarnation, as a restore from backup does: every
        live lease becomes a failed attempt (a retry now, or the dead letter), and a
        lease token of the old incarnation fails closed (``stale_incarnation``).
        Returns the new incarnation (None if a crash took the node down). Needs the
        admin grant (``caller`` None: it; another raises
        :class:`~.authority.Unauthorized`); while the node is down, a RuntimeError."""
        self._authorize("restore", None, caller)
        return self._api(LeaseEngine.restore)

    def backup(self, *, caller=None):
        """A copy of this runtime's database now (:class:`~.backup.Backup`,
        kept outside the store: a crash does not touch it); the admin grant."""
        self._authorize("backup", None, caller)
        return self._api(LeaseEngine.backup)

    def restore_backup(self, backup, *, caller=None) -> int | None:
        """Put ``backup`` back and publish a new history incarnation (see
        :mod:`.backup`); returns it. The admin grant."""
        self._authorize("restore_backup", None, caller)
        return self._api(LeaseEngine.restore_backup, backup)

    # -- looking at it ----------------------------------------------------------
    #: The named database this runtime's broker serves (``database=``; a credential of
    #: another is refused).
    database = DEFAULT_DATABASE  # the named database this runtime's broker serves

    def _tx(self) -> in_database:
        """A transaction on this runtime's database."""
        return in_database(self.store, self.database)

    def table_rows(self, table: str) -> list[dict]:
        """The committed rows of ``table``: of this runtime's database for the
        leases tables, of the store for the kernel's."""
        if table in TABLES:
            return database_rows(self.store, table, self.database)
        return self.store.rows(table)

    def _frame(self, table: str) -> pd.DataFrame:
        if self.database == DEFAULT_DATABASE:
            return store_frame(self.store, table)
        return table_frame(table, self.table_rows(table), self.store.tables[table], self.store.timestamp_columns)

    events = table_view("events")
    consumers = table_view("lease_consumers")
    checkpoints = table_view("checkpoints")
    resolutions = table_view(
        "resolutions", "Sparse resolutions: events acknowledged or dead-lettered past their partition's checkpoint."
    )
    leases = table_view("leases")
    retries = table_view("retries")
    dead_letters = table_view("dead_letters")
    history = table_view("history")

    def trace(self) -> pd.DataFrame:
        """The trace with this design's names: ``consumer``, ``event_id``,
        ``partition`` and ``process`` (the node's incarnation: 0 until a restart)."""
        return self._trace.frame()

    def metrics(self) -> dict[str, float]:
        """Every metric now, in the Prometheus style (``{'name{label="value"}': number}``):
        the run's counters and histograms, and its gauges read from the
        tables now (:mod:`fanoutsim.designs.leases.metrics` says what each means)."""
        from fanoutsim.designs.leases.metrics import checkpoint_lags

        out = self.metrics_registry.as_dict()
        out["fanoutsim_lease_events_retained"] = len(self.table_rows("events"))
        out["fanoutsim_lease_in_flight"] = len(self.table_rows("leases"))
        out["fanoutsim_lease_dead_letters_retained"] = len(self.table_rows("dead_letters"))
        out.update(checkpoint_lags(self.table_rows, self.now_us()))
        return out
