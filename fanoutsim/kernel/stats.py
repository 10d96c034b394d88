"""The statistics a comparison of two runs needs: percentiles, the two-sample
Kolmogorov-Smirnov test, and exact intervals for a count.

A model is held against a real system in two ways:

* a *distribution* (latencies, delays): :func:`ks_2samp`, the largest gap
  between the two empirical CDFs, against :func:`ks_critical`, its asymptotic
  critical value — two samples of sizes n and m differ at level alpha when
  ``D > c(alpha) * sqrt((n + m) / (n * m))``, ``c(alpha) = sqrt(-ln(alpha/2) / 2)``
  (1.358 at 5%);
* a *rate* (duplicates per message): a count is exact, so its interval is
  computed from the binomial or Poisson law itself, not from a normal
  approximation that is wrong for small counts. :func:`binomial_interval` is
  Clopper-Pearson's (the p whose tail puts ``k`` at alpha/2 on either side),
  :func:`poisson_interval` Garwood's (the same for a Poisson mean), and
  :func:`rates_agree` compares two Poisson rates — ``k1`` events in ``n1``
  trials against ``k2`` in ``n2`` — by the exact conditional test: given
  ``k1 + k2``, ``k1`` is binomial with ``p = n1 / (n1 + n2)`` when the rates
  are equal, so the rates agree at ``alpha`` when that ``p`` lies in
  Clopper-Pearson's interval of ``k1`` out of ``k1 + k2``.

The tails are summed term by term in log space (``math.lgamma``) and the
bounds found by bisection: exact to ~1e-12 for counts up to tens of
thousands, with nothing beyond the standard library and NumPy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BISECTIONS = 64  # halvings of the search interval: down to a double's resolution


def _array(x: Iterable[float]) -> np.ndarray:
    """``x`` (an array, a list, any iterable of numbers) as a float array."""
    return np.asarray(x if isinstance(x, (np.ndarray, list, tuple)) else list(x), dtype=float)


def percentiles(x: Iterable[float], qs: Sequence[int] = (50, 90, 99)) -> dict[int, float]:
    """The ``qs`` percentiles of ``x`` (linear interpolation), in the units of ``x``."""
    a = _array(x)
    if a.size == 0:
        raise ValueError("percentiles of an empty sample")
    return {q: float(np.percentile(a, q)) for q in qs}


def sample_line(who: str, key: str, samples: Sequence[float], width: int = 18) -> str:
    """One line of a measurement's summary: how many ``samples`` (seconds) of ``key``,
    and their p50 / p90 / p99 in milliseconds."""
    p = percentiles(np.asarray(samples, dtype=float) * 1000)
    return f"{who}  {key:<{width}} n={len(samples):>4}  p50 {p[50]:7.3f} ms  p90 {p[90]:7.3f} ms  p99 {p[99]:7.3f} ms"


_NUMBERS = re.compile(r"\[\s*([-0-9.e+,\s]+?)\s*\]")  # a list of numbers, over many lines


def samples_json(data: object) -> str:
    """A measurement file's text: JSON indented by one, each list of numbers on one line."""
    return _NUMBERS.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", json.dumps(data, indent=1)) + "\n"


def keep_measurement(data: object, summary: str, path: Path | None) -> None:
    """A measuring command's end: print its ``summary``; with ``path``, write ``data``
    there (:func:`samples_json`) and say so."""
    print(summary)
    if path is not None:
        path.write_text(samples_json(data), encoding="utf-8")
        print(f"wrote {path.name}")


def ks_critical(n: int, m: int, alpha: float = 0.05) -> float:
    """The asymptotic critical value of the two-sample KS statistic."""
    if n < 1 or m < 1:
        raise ValueError(f"both samples need at least one value, got sizes {n} and {m}")
    _check_alpha(alpha)
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


def ks_2samp(x: Iterable[float], y: Iterable[float]) -> float:
    """The two-sample KS statistic: the largest gap between the two empirical CDFs
    (0: the same sample, 1: disjoint)."""
    a, b = np.sort(_array(x)), np.sort(_array(y))
    if a.size == 0 or b.size == 0:
        raise ValueError("the KS statistic needs two non-empty samples")
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def _count(k: object, where: str) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"{where} must be a whole number >= 0, got {k!r}")
    return int(k)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X binomial(n, p), summed exactly in log space."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq, ln = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    terms = (ln - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k + 1))
    return min(1.0, math.fsum(math.exp(t) for t in terms))


def poisson_cdf(k: int, mean: float) -> float:
    """P(X <= k) for X Poisson(``mean``), summed exactly in log space."""
    if k < 0:
        return 0.0
    if mean <= 0.0:
        return 1.0
    lm = math.log(mean)
    return min(1.0, math.fsum(math.exp(-mean + i * lm - math.lgamma(i + 1)) for i in range(k + 1)))


def _solve(falls: Callable[[float], float], target: float, low: float, high: float) -> float:
    """The x in [low, high] where ``falls`` (decreasing in x) crosses ``target``."""
    for _ in range(BISECTIONS):
        mid = (low + high) / 2
        if falls(mid) > target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def binomial_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson's exact interval for a proportion: ``k`` successes in ``n`` trials."""
    k, n = _count(k, "k"), _count(n, "n")
    if n == 0 or k > n:
        raise ValueError(f"k must be 0 through n and n at least 1, got k={k}, n={n}")
    _check_alpha(1 - confidence)
    tail = (1 - confidence) / 2
    # P(X >= k | p) rises with p: the lower bound puts it at the tail; P(X <= k | p) falls: the upper
    low = 0.0 if k == 0 else _solve(lambda p: binomial_cdf(k - 1, n, p), 1 - tail, 0.0, 1.0)
    high = 1.0 if k == n else _solve(lambda p: binomial_cdf(k, n, p), tail, 0.0, 1.0)
    return low, high


def poisson_interval(k: int, confidence: float = 0.95) -> tuple[float, float]:
    """Garwood's exact interval for a Poisson mean, ``k`` events observed."""
    k = _count(k, "k")
    _check_alpha(1 - confidence)
    tail = (1 - confidence) / 2
    top = k + 20 * math.sqrt(k + 1) + 20  # far past the upper bound
    low = 0.0 if k == 0 else _solve(lambda m: poisson_cdf(k - 1, m), 1 - tail, 0.0, top)
    high = _solve(lambda m: poisson_cdf(k, m), tail, 0.0, top)
    return low, high


@dataclass(frozen=True)
class RateComparison:
    """Two Poisson rates, ``k1`` events in ``n1`` trials against ``k2`` in ``n2``."""

    k1: int
    n1: float
    k2: int
    n2: float
    ratio_low: float  # the exact interval of rate1 / rate2 at the confidence asked
    ratio_high: float

    @property
    def rate1(self) -> float:
        return self.k1 / self.n1

    @property
    def rate2(self) -> float:
        return self.k2 / self.n2

    @property
    def agree(self) -> bool:
        """The interval of the ratio holds 1: the test cannot tell the two rates apart."""
        return self.ratio_low <= 1.0 <= self.ratio_high


def rates_agree(k1: int, n1: float, k2: int, n2: float, alpha: float = 0.05) -> RateComparison:
    """The exact conditional comparison of two Poisson rates (see the module's
    docstring): the interval of ``rate1 / rate2`` at ``1 - alpha``, from
    Clopper-Pearson's interval of ``k1`` out of ``k1 + k2``."""
    k1, k2 = _count(k1, "k1"), _count(k2, "k2")
    for name, n in (("n1", n1), ("n2", n2)):
        if isinstance(n, bool) or not isinstance(n, (int, float, np.integer, np.floating)) or not n > 0:
            raise ValueError(f"{name} must be a number > 0 (the trials the count is out of), got {n!r}")
    _check_alpha(alpha)
    if k1 + k2 == 0:  # no event on either side: nothing tells them apart
        return RateComparison(k1, float(n1), k2, float(n2), 0.0, math.inf)
    low, high = binomial_interval(k1, k1 + k2, 1 - alpha)
    # p = n1 r1 / (n1 r1 + n2 r2), so r1 / r2 = (p / (1 - p)) * (n2 / n1)
    scale = float(n2) / float(n1)

    def ratio(p: float) -> float:
        return math.inf if p >= 1.0 else p / (1 - p) * scale

    return RateComparison(k1, float(n1), k2, float(n2), ratio(low), ratio(high))
