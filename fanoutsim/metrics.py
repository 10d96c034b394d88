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
        key = (name, tuple(sorted(labels.items())))
        self._values[key] = self._values.get(key, 0) + amount

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

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return super().as_dict()
