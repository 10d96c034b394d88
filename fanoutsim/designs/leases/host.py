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


class LeaseClient:
    """A consumer's client code (survives crashes as a binary's code does): how
    long a worker works on a lease (``duration``: seconds, or ``callable(rng)``),
    its chance to fail (``fail``), which leases are poison (``poison(lease)``),
    the delay a failure nacks with, how often the client polls, and an optional
    effect ``fn(lease)`` (an exception from it is a failure: the lease is nacked).
    While ``paused`` the client takes no new leases (an operator's seek or
    retire waits for the consumer to hold none)."""

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


def same_consumer(name, row: dict, limits: dict, spec: LeaseClient | None, held: LeaseClient | None) -> None:
    """Registering ``name`` again, which exists as ``row`` (``held``: its client in
    this runtime, if any): the same ask is a no-op, as RiffDB's create-if-absent
    is; a different one raises ValueError naming every setting that differs —
    nothing would apply it, and keeping the old one silently hides that."""
    checked = check_limits(**limits)
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
        """Publish one event now; its event id (None if a crash took the node down)."""
        out = self._api(LeaseEngine.publish, [(partition, kind, payload)])
        return None if out is None else out[0]

    def publish_many(self, events) -> list[str] | None:
        """Publish ``[(partition, kind, payload), ...]`` as one commit."""
        return self._api(LeaseEngine.publish, list(events))

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
            same_consumer(name, existing, limits, spec, self.clients.get(name))
        return existing

    def consume(self, consumer: str, batch_limit: int | None = None, *, caller=None):
        """Lease up to ``batch_limit`` eligible events by hand: a
        :class:`~.leasing.Pull`, the list of Lease granted, whose ``result`` is
        ``not_found`` if the consumer does not exist. ``caller``: a
        :class:`~.authority.Credential` (None: the consumer's own)."""
        consumer = consumer_key(consumer)
        self._authorize("consume", consumer, caller)
        return self._api(LeaseEngine.consume, consumer, batch_limit)

    def ack(self, consumer: str, event_id: str, token: str, incarnation: int, *, caller=None) -> str | None:
        """Acknowledge by hand: ``acked`` or the reason it failed closed. An accepted
        ack is the caller's delivery (the trace records it, actor ``caller``, for the
        checker) — once its commit is in, even if the node crashes right after it
        (then this returns None); an effect whose ack failed closed is the caller's
        to know about."""
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
        consumer = consumer_key(consumer)
        self._authorize("nack", consumer, caller)
        return self._api(LeaseEngine.nack, consumer, event_id, token, incarnation, delay=delay, error=error)

    def recover(self) -> int | None:
        return self._api(LeaseEngine.recover)

    def prune_once(self) -> int | None:
        return self._api(LeaseEngine.prune_once)

    def seek(self, consumer: str, position, *, caller=None) -> str | None:
        """Move ``consumer`` to ``position``: ``applied``, ``outstanding_lease``
        (it holds a live lease: nothing changed) or ``not_found``. Needs the
        admin grant (``caller`` None: it)."""
        consumer = consumer_key(consumer)
        self._authorize("seek", consumer, caller)
        return self._api(LeaseEngine.seek, consumer, position)

    def retire(self, consumer: str, *, caller=None) -> str | None:
        """Delete ``consumer`` for good: ``applied``, ``outstanding_lease`` or
        ``not_found``. Needs the admin grant (``caller`` None: it)."""
        consumer = consumer_key(consumer)
        self._authorize("retire", consumer, caller)
        return self._api(LeaseEngine.retire, consumer)

    def status(self, consumer: str, *, caller=None) -> dict | None:
        """What ``riffdb event status`` tells (None: no such consumer); the
        consumer's own credential or the admin grant."""
        consumer = consumer_key(consumer)
        self._authorize("status", consumer, caller)
        return self._api(LeaseEngine.status, consumer)

    def restore(self, *, caller=None) -> int | None:
        """Publish a new history incarnation (the admin grant)."""
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
        """The run's counters and histograms, and its gauges read from the
        tables now (:mod:`fanoutsim.designs.leases.metrics` says what each means)."""
        from fanoutsim.designs.leases.metrics import checkpoint_lags

        out = self.metrics_registry.as_dict()
        out["fanoutsim_lease_events_retained"] = len(self.table_rows("events"))
        out["fanoutsim_lease_in_flight"] = len(self.table_rows("leases"))
        out["fanoutsim_lease_dead_letters_retained"] = len(self.table_rows("dead_letters"))
        out.update(checkpoint_lags(self.table_rows, self.now_us()))
        return out
