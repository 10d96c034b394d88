"""Counters in the Prometheus style: ``name{label="v",...}`` -> number.

Like a real process's metrics these are not transactional: a counter bumped
just before a crash stays bumped, which is exactly how an operator would see it.
They belong to the run, not to one engine incarnation, so a restart does not
zero them (a scraper would have kept the series).
"""
from __future__ import annotations


class Metrics:
    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[tuple, float] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        # one label (the common case) needs no sorting; every step bumps a counter
        items = tuple(labels.items())
        key = (name, items if len(items) < 2 else tuple(sorted(items)))
        values = self._values
        values[key] = values.get(key, 0) + amount

    def counter(self, name: str, **labels: str):
        """The series ``name{labels}`` as a callable: ``c()`` bumps it by one,
        ``c(n)`` by ``n``. For hot paths, which then skip building the key."""
        key = (name, tuple(sorted(labels.items())))
        values = self._values

        def bump(amount: float = 1) -> None:
            values[key] = values.get(key, 0) + amount

        return bump

    def get(self, name: str, **labels: str) -> float:
        return self._values.get((name, tuple(sorted(labels.items()))), 0)

    def as_dict(self) -> dict[str, float]:
        out = {}
        for (name, labels), value in sorted(self._values.items()):
            if labels:
                inner = ",".join(f'{k}="{v}"' for k, v in labels)
                out[f"{name}{{{inner}}}"] = value
            else:
                out[name] = value
        return out


class LockedMetrics(Metrics):
    """Metrics that several threads bump (the wall-clock runtime)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        import threading

        super().__init__()
        self._lock = threading.Lock()

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        with self._lock:
            super().inc(name, amount, **labels)

    def counter(self, name: str, **labels: str):
        bump, lock = super().counter(name, **labels), self._lock

        def locked(amount: float = 1) -> None:
            with lock:
                bump(amount)

        return locked

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return super().as_dict()
