"""Workloads: who fires, how often, with what payload.

A workload is a Poisson stream of firings of one reactor in one tenant (gaps
drawn from an exponential distribution with its own seeded RNG, so adding a
workload never shifts another's times). Payloads come from a named generator:

``quote``    ``{"quote": {"symbol", "region", "price"}}``: a pricing feed whose
             prices are lognormal around 100, so ``price > 100`` passes about half
``counter``  ``{"n": k}``: the k-th firing of this workload
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fanoutsim.kernel.validate import is_number

REGIONS = ("us-east", "us-west", "eu-central", "ap-south")
SYMBOLS = ("ACME", "GLOBX", "INITECH", "UMBRL", "HOOLI")


def quote(rng: random.Random, k: int) -> dict[str, Any]:
    return {
        "quote": {
            "symbol": rng.choice(SYMBOLS),
            "region": rng.choice(REGIONS),
            "price": round(100 * rng.lognormvariate(0.0, 0.25), 2),
        }
    }


def counter(rng: random.Random, k: int) -> dict[str, Any]:
    return {"n": k}


GENERATORS: dict[str, Callable[[random.Random, int], dict]] = {"quote": quote, "counter": counter}


@dataclass(frozen=True)
class Workload:
    reactor: str
    rate: float  # firings per virtual second
    tenant: str = "public"
    payload: str = "quote"
    start: float = 0.0
    stop: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reactor, str) or not self.reactor:
            raise ValueError(f"workload reactor must be a non-empty string, got {self.reactor!r}")
        if not isinstance(self.tenant, str) or not self.tenant:
            raise ValueError(f"workload tenant must be a non-empty string, got {self.tenant!r}")
        if not is_number(self.rate) or not self.rate > 0:  # inf would fire forever at one instant
            raise ValueError(f"workload rate must be a finite number of firings per second > 0, got {self.rate!r}")
        if self.payload not in GENERATORS:
            raise ValueError(f"workload payload {self.payload!r} is not known; allowed: {', '.join(GENERATORS)}")
        if not is_number(self.start) or self.start < 0:
            raise ValueError(f"workload start must be a finite number of seconds >= 0, got {self.start!r}")
        if self.stop is not None and (not is_number(self.stop) or self.stop <= self.start):
            raise ValueError(
                f"workload stop must be a finite number of seconds after start ({self.start}), got {self.stop!r}"
            )
