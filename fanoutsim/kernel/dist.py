"""Distributions of durations: a number, or a small table naming a law.

Fault plans and scenarios describe run times, downtimes and commit delays the
same way, and draw from the run's seeded RNG so a run stays reproducible:

``5.0``                                   always 5 s
``{dist = "exponential", mean = 30}``     exponential with that mean
``{dist = "uniform", low = 0, high = 2}`` uniform on [low, high)
``{dist = "lognormal", median = 1, sigma = 0.5}``
``{dist = "empirical", samples = [0.0011, 0.0013, 0.0042]}``
                                          one of the measured samples, each as likely
                                          (:meth:`Dist.empirical`; a preset's measured
                                          hint latency is one)
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

_LAWS = {
    "fixed": ("value",),
    "exponential": ("mean",),
    "uniform": ("low", "high"),
    "lognormal": ("median", "sigma"),
    "empirical": ("samples",),
}

EMPIRICAL_MAX_SAMPLES = 100_000  # a scenario file holds them inline; more is a mistake, not a measurement


LOGNORMAL_MAX_SIGMA = 50.0  # exp(z * sigma) fits a float for every draw z a run meets (|z| < 14)


@dataclass(frozen=True)
class Dist:
    law: str
    a: float = 0.0
    b: float = 0.0
    samples: tuple[float, ...] = ()  # the empirical law's values, sorted

    @classmethod
    def empirical(cls, samples: object) -> Dist:
        """The empirical law of measured ``samples`` (seconds >= 0): a draw is one of
        them, each as likely (the bootstrap), from the run's seeded RNG. Checked as a
        scenario file's ``{dist = "empirical", samples = [...]}`` is."""
        return parse_dist({"dist": "empirical", "samples": samples}, "empirical")

    def sample(self, rng: random.Random) -> float:
        if self.law == "empirical":
            return self.samples[rng.randrange(len(self.samples))]
        if self.law == "fixed":
            return self.a
        if self.law == "exponential":
            return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0
        if self.law == "uniform":
            return rng.uniform(self.a, self.b)
        return self.a * math.exp(rng.gauss(0.0, self.b))

    @property
    def mean(self) -> float:
        if self.law == "empirical":
            return math.fsum(self.samples) / len(self.samples)
        if self.law in ("fixed", "exponential"):
            return self.a
        if self.law == "uniform":
            return (self.a + self.b) / 2
        return self.a * math.exp(self.b**2 / 2)

    def __call__(self, rng: random.Random) -> float:
        return self.sample(rng)

    def as_table(self) -> dict[str, object]:
        """The law as a scenario file writes it: ``{"dist": law, <parameter>: ...}``."""
        if self.law == "empirical":
            return {"dist": "empirical", "samples": list(self.samples)}
        return {"dist": self.law, **dict(zip(_LAWS.get(self.law, ()), (self.a, self.b)))}


def _unknown_law(law: Any, where: str) -> NoReturn:
    raise ValueError(f"{where}.dist must be one of {', '.join(map(repr, _LAWS))}, got {law!r}")


def check_dist(d: Dist, where: str = "duration") -> Dist:
    """``d`` if its law and parameters are ones a scenario file takes (a Dist
    made in Python skips :func:`parse_dist`); the same error otherwise."""
    return parse_dist(d.as_table(), where)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _samples(value: Any, where: str) -> tuple[float, ...]:
    """An empirical law's samples: a non-empty list of seconds >= 0, sorted."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{where} must be a list of seconds >= 0 (measured values), got {value!r}")
    if not value:
        raise ValueError(f"{where} must hold at least one value, got an empty list")
    if len(value) > EMPIRICAL_MAX_SAMPLES:
        raise ValueError(f"{where} may hold at most {EMPIRICAL_MAX_SAMPLES} values, got {len(value)}")
    out = []
    for i, v in enumerate(value):
        x = _number(v, f"{where}[{i}]")
        if x < 0:
            raise ValueError(f"{where}[{i}] must be >= 0 seconds, got {v!r}")
        out.append(x)
    return tuple(sorted(out))


def parse_dist(value: Any, where: str = "duration") -> Dist:
    """A Dist from a number or a ``{dist=..., ...}`` mapping; errors name ``where``.
    A Dist is checked as its table would be (one made in Python skips this parser)."""
    if isinstance(value, Dist):
        return parse_dist(value.as_table(), where) if value.law in _LAWS else _unknown_law(value.law, where)
    if not isinstance(value, Mapping):
        x = _number(value, where)
        if x < 0:
            raise ValueError(f"{where} must be >= 0 seconds, got {value!r}")
        return Dist("fixed", x)
    law = value.get("dist")
    if law not in _LAWS:
        raise ValueError(f"{where}.dist must be one of {', '.join(map(repr, _LAWS))}, got {law!r}")
    params = _LAWS[law]
    extra = sorted(set(value) - {"dist", *params})
    if extra:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(map(repr, extra))} for {law!r}; allowed: dist, {', '.join(params)}"
        )
    missing = [p for p in params if p not in value]
    if missing:
        raise ValueError(f"{where}: {law!r} needs {', '.join(missing)}")
    if law == "empirical":
        return Dist("empirical", samples=_samples(value["samples"], f"{where}.samples"))
    nums = [_number(value[p], f"{where}.{p}") for p in params]
    if any(n < 0 for n in nums):
        raise ValueError(f"{where}: parameters must be >= 0, got {dict(value)!r}")
    if law == "uniform" and nums[1] < nums[0]:
        raise ValueError(f"{where}: uniform needs low <= high, got {dict(value)!r}")
    if law == "lognormal" and nums[1] > LOGNORMAL_MAX_SIGMA:
        # exp(z * sigma) overflows a float past sigma ~ 700 / |z|: a draw would fail mid-run
        raise ValueError(
            f"{where}.sigma must be at most {LOGNORMAL_MAX_SIGMA:g} (a wider law overflows a float "
            f"in its draws), got {nums[1]!r}"
        )
    return Dist(law, nums[0], nums[1] if len(nums) > 1 else 0.0)  # a law has one or two parameters
