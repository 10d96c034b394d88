"""What the leased-consumer design's two runtimes share: the client spec
(:class:`LeaseClient`), the checks, the public API's plumbing and the table views."""
from __future__ import annotations


import pandas as pd

from fanoutsim.designs.leases.engine import LeaseEngine
from fanoutsim.kernel.frames import store_frame



def checked_lease_config(config, seed):
    """The lease runtimes' common arguments: a LeaseConfig (None: the defaults)
    and an int seed; returns the config."""
    from fanoutsim.designs.leases import LeaseConfig

    config = LeaseConfig() if config is None else config
    if not isinstance(config, LeaseConfig):
        raise TypeError(f"config must be a LeaseConfig, not {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return config


def _fraction(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{where} must be a probability in [0, 1], got {value!r}")
    return float(value)


def _secs(value, where, positive=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (positive and value == 0):
        raise ValueError(f"{where} must be a number of seconds {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


class LeaseClient:
    """A consumer's client code (survives crashes as a binary's code does): how
    long a worker works on a lease (``duration``: seconds, or ``callable(rng)``),
    its chance to fail (``fail``), which leases are poison (``poison(lease)``),
    the delay a failure nacks with, how often the client polls, and an optional
    effect ``fn(lease)`` (an exception from it is a failure: the lease is nacked)."""

    def __init__(self, name, duration=0.01, fail=0.0, poison=None, nack_delay=1.0, poll_interval=0.5,
                 batch_limit=None, fn=None) -> None:
        if not callable(duration):
            _secs(duration, f"consumer {name!r}: duration")
        if poison is not None and not callable(poison):
            raise TypeError(f"consumer {name!r}: poison must be callable(lease) or None, got {poison!r}")
        if fn is not None and not callable(fn):
            raise TypeError(f"consumer {name!r}: fn must be callable(lease) or None, got {fn!r}")
        self.name, self.duration, self.poison, self.fn = name, duration, poison, fn
        self.fail = _fraction(fail, f"consumer {name!r}: fail")
        self.nack_delay = _secs(nack_delay, f"consumer {name!r}: nack_delay")
        self.poll_interval = _secs(poll_interval, f"consumer {name!r}: poll_interval", positive=True)
        self.batch_limit = batch_limit

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


def lease_partitions(rate, partitions) -> list[str]:
    """A lease workload's arguments, checked: the partition names."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0 or rate != rate \
            or rate == float("inf"):
        raise ValueError(f"rate must be events per second > 0, got {rate!r}")
    if isinstance(partitions, int) and not isinstance(partitions, bool):
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
    """Mixin for the lease runtimes (:class:`~.leases.LeaseSimulation`,
    :class:`~.leases_realtime.LeaseRealtime`): the broker API by hand, the table
    views, the trace with this design's names and the metrics. Needs ``store``,
    ``_trace``, ``metrics_registry`` and ``_api(step, *args, **kwargs)`` (one
    step of the live engine now, ``step`` a LeaseEngine function; raises while
    the node is down; None if a crash took it down)."""

    def publish(self, partition: str, kind: str = "event", payload=None) -> str | None:
        """Publish one event now; its event id (None if a crash took the node down)."""
        out = self._api(LeaseEngine.publish, [(partition, kind, payload)])
        return None if out is None else out[0]

    def publish_many(self, events) -> list[str] | None:
        """Publish ``[(partition, kind, payload), ...]`` as one commit."""
        return self._api(LeaseEngine.publish, list(events))

    def consume(self, consumer: str, batch_limit: int | None = None):
        """Lease up to ``batch_limit`` eligible events by hand; a list of Lease."""
        return self._api(LeaseEngine.consume, consumer, batch_limit)

    def ack(self, consumer: str, event_id: str, token: str, incarnation: int) -> str | None:
        """Acknowledge by hand: ``acked`` or the reason it failed closed. An accepted
        ack is the caller's delivery (the trace records it, actor ``caller``, for the
        checker); an effect whose ack failed closed is the caller's to know about."""
        lease = None
        if self.engine is not None and isinstance(consumer, str) and isinstance(event_id, str):
            with self.store.transaction() as tx:
                lease = tx.get_lease(consumer, event_id)
            now = self.now_us()
        result = self._api(LeaseEngine.ack, consumer, event_id, token, incarnation)
        if result == "acked":
            self._trace.add(now, "delivered", "caller", consumer, event_id, lease["partition"],
                            f"attempt {lease['attempt']}")
        return result

    def nack(self, consumer: str, event_id: str, token: str, incarnation: int, delay: float = 0.0,
             error: str | None = None) -> str | None:
        return self._api(LeaseEngine.nack, consumer, event_id, token, incarnation, delay=delay, error=error)

    def recover(self) -> int | None:
        return self._api(LeaseEngine.recover)

    def prune_once(self) -> int | None:
        return self._api(LeaseEngine.prune_once)

    def seek(self, consumer: str, position) -> int | None:
        return self._api(LeaseEngine.seek, consumer, position)

    def retire(self, consumer: str) -> None:
        self._api(LeaseEngine.retire, consumer)

    def status(self, consumer: str) -> dict:
        return self._api(LeaseEngine.status, consumer)

    def restore(self) -> int | None:
        return self._api(LeaseEngine.restore)

    # -- looking at it ----------------------------------------------------------
    def _frame(self, table: str) -> pd.DataFrame:
        return store_frame(self.store, table)

    def events(self) -> pd.DataFrame:
        return self._frame("events")

    def consumers(self) -> pd.DataFrame:
        return self._frame("lease_consumers")

    def checkpoints(self) -> pd.DataFrame:
        return self._frame("checkpoints")

    def leases(self) -> pd.DataFrame:
        return self._frame("leases")

    def retries(self) -> pd.DataFrame:
        return self._frame("retries")

    def dead_letters(self) -> pd.DataFrame:
        return self._frame("dead_letters")

    def history(self) -> pd.DataFrame:
        return self._frame("history")

    def trace(self) -> pd.DataFrame:
        """The trace with this design's names: ``consumer``, ``event_id``,
        ``partition`` and ``process`` (the node's incarnation: 0 until a restart)."""
        return self._trace.frame().rename(columns={
            "subscription": "consumer", "firing": "event_id", "execution": "partition", "attempt": "process"})

    def metrics(self) -> dict[str, float]:
        out = self.metrics_registry.as_dict()
        out["fanoutsim_lease_events_retained"] = len(self.store.rows("events"))
        out["fanoutsim_lease_in_flight"] = len(self.store.rows("leases"))
        out["fanoutsim_lease_dead_letters_retained"] = len(self.store.rows("dead_letters"))
        return out
