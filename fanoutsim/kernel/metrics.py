"""Counters in the Prometheus style: ``name{label="v",...}`` -> number.

Like a real process's metrics these are not transactional: a counter bumped
just before a crash stays bumped, which is exactly how an operator would see it.
They belong to the run, not to one engine incarnation, so a restart does not
zero them (a scraper would have kept the series).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


class Bump(Protocol):
    """A counter as :meth:`Metrics.counter` hands it out: ``c()`` bumps it by one, ``c(n)`` by ``n``."""

    def __call__(self, amount: float = 1) -> None: ...


# a series: its name and its labels' (name, value) pairs, sorted when two or more
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


class Metrics:
    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[SeriesKey, float] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        # one label (the common case) needs no sorting; every step bumps a counter
        items = tuple(labels.items())
        key = (name, items if len(items) < 2 else tuple(sorted(items)))
        values = self._values
        values[key] = values.get(key, 0) + amount

    def counter(self, name: str, **labels: str) -> Bump:
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

    def counter(self, name: str, **labels: str) -> Bump:
        bump, lock = super().counter(name, **labels), self._lock

        def locked(amount: float = 1) -> None:
            with lock:
                bump(amount)

        return locked

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return super().as_dict()


# -- the Prometheus text format (``GET /metrics`` of ``fanoutsim serve``) -------------
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_series(key: str) -> tuple[str, dict[str, str]]:
    """``'name{a="x",b="y"}'`` (what :meth:`Metrics.as_dict` writes) as ``(name, labels)``."""
    import re

    name, brace, rest = key.partition("{")
    if not brace:
        return name, {}
    return name, dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest.rstrip("}")))


class _Families:
    """A prometheus_client collector over a dict of ``metrics()``: a name ending
    in ``_total`` is a counter, any other a gauge; names and values as given."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import Metric

        families: dict[str, Metric] = {}
        for key, value in sorted(self.values.items()):
            name, labels = parse_series(key)
            counter = name.endswith("_total")
            family_name = name[: -len("_total")] if counter else name
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(
                    family_name, f"{name}, as fanoutsim metrics() counts it", "counter" if counter else "gauge"
                )
            family.add_sample(name, labels, float(value))
        yield from families.values()


def prometheus_text(values: dict[str, float]) -> bytes:
    """``metrics()`` (``{'name{label="v"}': value}``) in the Prometheus text
    exposition format, written by prometheus_client: the same names, labels
    and values, a ``# TYPE`` per family (counter for ``*_total``, else gauge)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(values))
    return generate_latest(registry)
