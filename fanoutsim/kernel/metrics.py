"""Metrics in the Prometheus style: ``name{label="v",...}`` -> number.

Counters (``inc``, ``counter``) and histograms (``observe``, ``histogram``)
are kept here; a runtime's ``metrics()`` adds its gauges, read from its tables
when asked. Like a real process's metrics these are not transactional: a
counter bumped just before a crash stays bumped, which is exactly how an
operator would see it. They belong to the run, not to one engine incarnation,
so a restart does not zero them (a scraper would have kept the series).

A histogram shows in :meth:`Metrics.as_dict` as Prometheus writes one: a
cumulative ``<name>_bucket{le="..."}`` per bound (``+Inf`` last), then
``<name>_count`` and ``<name>_sum`` — so the dict and ``GET /metrics`` name the
same series. What each metric means is its :class:`Help` (each design declares
its own, the kernel its few): the ``# HELP`` and ``# TYPE`` lines of the text
format, and the metrics page of the documentation.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


class Bump(Protocol):
    """A counter as :meth:`Metrics.counter` hands it out: ``c()`` bumps it by one, ``c(n)`` by ``n``."""

    def __call__(self, amount: float = 1) -> None: ...


class Observe(Protocol):
    """A histogram as :meth:`Metrics.histogram` hands it out: ``h(x)`` observes ``x``."""

    def __call__(self, value: float) -> None: ...


B = TypeVar("B", bound="Bump | Observe")  # a bound series: a counter's bump or a histogram's observe


class Help(NamedTuple):
    """What a metric is: its ``kind`` (``"counter"``, ``"gauge"`` or
    ``"histogram"``) and ``text``, the ``# HELP`` line — what it measures, in
    which unit, and when it moves (never its name again)."""

    kind: str
    text: str


# a series: its name and its labels' (name, value) pairs, sorted when two or more
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]

# Upper bounds (seconds) of the latency histograms: from a few milliseconds (a
# hint, an in-process dispatch) through poll intervals and lease lengths to
# minutes (a backlog, a restore): one set for every design, so that they compare
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    1800.0,
)

# the kernel's own metrics (the runtimes count them, whatever the design)
KERNEL_METRICS: dict[str, Help] = {
    "fanoutsim_runner_crashes_total": Help(
        "counter",
        "Crashes of the process, planned or injected: each threw away the engine and its open transaction "
        "(the run's metrics survive it, as a scraper's would).",
    ),
}


def bucket_label(bound: float) -> str:
    """A histogram bound as the ``le`` label writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


class _Histogram:
    """One histogram series: its bounds, the count in each bucket (the last one
    past every bound), the sum and the count of what it observed."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1  # le: a value on a bound counts in it
        self.sum += value
        self.count += 1

    def series(self, name: str, labels: tuple[tuple[str, str], ...]) -> Iterator[tuple[str, float]]:
        """``(key, value)`` of its ``_bucket`` (cumulative), ``_count`` and ``_sum`` series."""
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            running += n
            yield _key(f"{name}_bucket", (*labels, ("le", bucket_label(bound)))), running
        yield _key(f"{name}_count", labels), self.count
        yield _key(f"{name}_sum", labels), self.sum


def _key(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels))
    return f"{name}{{{inner}}}"


def series(name: str, **labels: str) -> str:
    """The key of the series ``name{labels}`` as :meth:`Metrics.as_dict` writes
    it (labels sorted): for a gauge a runtime's ``metrics()`` adds."""
    return _key(name, tuple(labels.items()))


class Metrics:
    """A run's counters, gauges and histograms, keyed by name and labels: what a
    step counts as it goes (:meth:`inc`, :meth:`observe`) and what ``metrics()`` and
    ``GET /metrics`` read back (:meth:`as_dict`, :func:`prometheus_text`)."""

    __slots__ = ("_values", "_histograms")

    def __init__(self) -> None:
        self._values: dict[SeriesKey, float] = {}
        self._histograms: dict[SeriesKey, _Histogram] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        """Add ``amount`` (1 by default) to the counter ``name{labels}``, which starts at 0."""
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

    def observe(self, name: str, value: float, buckets: tuple[float, ...] = LATENCY_BUCKETS, **labels: str) -> None:
        """Count ``value`` in the histogram ``name{labels}`` (bounds ``buckets``, sorted)."""
        items = tuple(labels.items())  # one label (the common case) needs no sorting
        key = (name, items if len(items) < 2 else tuple(sorted(items)))
        h = self._histograms.get(key)
        if h is None or h.bounds is not buckets:  # a new series, or other bounds given: checked
            h = self._histogram(key, buckets)
        h.observe(value)

    def histogram(self, name: str, buckets: tuple[float, ...] = LATENCY_BUCKETS, **labels: str) -> Observe:
        """The histogram ``name{labels}`` as a callable: ``h(x)`` observes ``x``.
        For hot paths, which then skip building the key."""
        return self._histogram((name, tuple(sorted(labels.items()))), buckets).observe

    def counters(self, name: str, label: str) -> Family[Bump]:
        """The counter ``name`` by the value of ``label``: ``family[value]()`` bumps ``name{label=value}``."""
        return Family(lambda value: self.counter(name, **{label: value}))

    def histograms(self, name: str, label: str, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> Family[Observe]:
        """The histogram ``name`` by the value of ``label``: ``family[value](x)`` observes ``x``."""
        return Family(lambda value: self.histogram(name, buckets, **{label: value}))

    def _histogram(self, key: SeriesKey, buckets: tuple[float, ...]) -> _Histogram:
        h = self._histograms.get(key)
        if h is None:
            h = self._histograms[key] = _Histogram(tuple(buckets))
        elif h.bounds != tuple(buckets):
            raise ValueError(f"histogram {key[0]} has the buckets {h.bounds}, not {tuple(buckets)}")
        return h

    def get(self, name: str, **labels: str) -> float:
        """The value of ``name{labels}`` now (0 if it was never counted)."""
        return self._values.get((name, tuple(sorted(labels.items()))), 0)

    def as_dict(self) -> dict[str, float]:
        """Every series in the Prometheus style, ``{'name{label="value"}': number}``,
        sorted by name and labels; a histogram as its ``_bucket``, ``_sum`` and
        ``_count`` series."""
        out = {_key(name, labels): value for (name, labels), value in sorted(self._values.items())}
        for (name, labels), h in sorted(self._histograms.items()):
            out.update(h.series(name, labels))
        return out


class Family(dict[str, B]):
    """One metric's series told apart by one label, each bound at its first use
    (:meth:`Metrics.counters`, :meth:`Metrics.histograms`): a hot path's
    ``family[value](x)`` is a dict lookup (in C: a dict of the values bound so
    far) and a call, with no key to build. Like :meth:`Metrics.inc`, a
    counter's series appears at its first bump."""

    __slots__ = ("_bind",)

    def __init__(self, bind: Callable[[str], B]) -> None:
        super().__init__()
        self._bind = bind  # a label's value -> its series, bound

    def __missing__(self, value: str) -> B:
        bound = self[value] = self._bind(value)
        return bound


class LockedMetrics(Metrics):
    """Metrics that several threads bump (the wall-clock runtime)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        import threading

        super().__init__()
        self._lock = threading.Lock()

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        """:meth:`Metrics.inc` under the lock."""
        with self._lock:
            super().inc(name, amount, **labels)

    def counter(self, name: str, **labels: str) -> Bump:
        bump, lock = super().counter(name, **labels), self._lock

        def locked(amount: float = 1) -> None:
            with lock:
                bump(amount)

        return locked

    def histogram(self, name: str, buckets: tuple[float, ...] = LATENCY_BUCKETS, **labels: str) -> Observe:
        lock = self._lock
        with lock:  # made under the lock: two threads binding one new series get one histogram
            observe = super().histogram(name, buckets, **labels)

        def locked(value: float) -> None:
            with lock:
                observe(value)

        return locked

    def observe(self, name: str, value: float, buckets: tuple[float, ...] = LATENCY_BUCKETS, **labels: str) -> None:
        with self._lock:
            super().observe(name, value, buckets, **labels)

    def as_dict(self) -> dict[str, float]:
        """:meth:`Metrics.as_dict` under the lock: a consistent reading."""
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


_HISTOGRAM_PARTS = ("_bucket", "_count", "_sum")


def family_of(name: str, described: Mapping[str, Help]) -> tuple[str, str]:
    """The family a series' ``name`` belongs to and its kind: a described
    histogram's ``_bucket``/``_count``/``_sum`` go to the histogram; otherwise
    the description's kind, or, undescribed, a counter for ``*_total`` and a gauge."""
    for part in _HISTOGRAM_PARTS:
        base = name.removesuffix(part)
        if base != name and described.get(base, Help("", "")).kind == "histogram":
            return base, "histogram"
    help_ = described.get(name)
    if help_ is not None:
        return name, help_.kind
    return name, "counter" if name.endswith("_total") else "gauge"


class _Families:
    """A prometheus_client collector over a dict of ``metrics()``, each family
    typed and explained by ``described`` (name -> :class:`Help`); names,
    labels and values as given."""

    def __init__(self, values: dict[str, float], described: Mapping[str, Help]) -> None:
        self.values = values
        self.described = described

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import Metric

        families: dict[str, Metric] = {}
        for key, value in sorted(self.values.items()):
            name, labels = parse_series(key)
            family_name, kind = family_of(name, self.described)
            family = families.get(family_name)
            if family is None:
                text = self.described.get(family_name, Help(kind, "")).text or "(not described)"
                # the client adds _total to a counter's samples itself: its family is named without it
                family_name_written = family_name.removesuffix("_total") if kind == "counter" else family_name
                family = families[family_name] = Metric(family_name_written, text, kind)
            family.add_sample(name, labels, float(value))
        yield from families.values()


def prometheus_text(values: dict[str, float], described: Mapping[str, Help] | None = None) -> bytes:
    """``metrics()`` (``{'name{label="v"}': value}``) in the Prometheus text
    exposition format, written by prometheus_client: the same names, labels
    and values, a ``# HELP`` and ``# TYPE`` per family from ``described``
    (name -> :class:`Help`, the kernel's own :data:`KERNEL_METRICS` added);
    a histogram's ``_bucket``, ``_count`` and ``_sum`` series are its one
    family. An undescribed name ending in ``_total`` is a counter, any other
    a gauge."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(values, {**KERNEL_METRICS, **(described or {})}))
    return generate_latest(registry)
