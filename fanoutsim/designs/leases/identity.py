"""Durable consumer identity (seed 003).

"A durable consumer is identified by the complete tuple of reactive module
hash, operation name, canonical typed parameters, and consumer name. It is
therefore not silently rebound when a module changes." :class:`ConsumerIdentity`
is that tuple; its :attr:`~ConsumerIdentity.key` is the consumer's name in the
tables (``lease_consumers.consumer`` and every row keyed by it), so two
identities that differ in any part are two durable consumers, each with its
own checkpoints, leases and retention fence.

Deploying a changed module therefore makes a *new* consumer
(:meth:`ConsumerIdentity.with_module`), which starts where its start policy
says (``"beginning"``: the oldest retained event; ``"end"``: only what comes
next; a seq), while the old identity stays exactly as it was — its checkpoint
and so its retention fence included — until someone retires it. A forgotten
old identity holds history back for ever: see
``identity_run`` (``notebooks/experiments/leases.py``) and :meth:`~.simulation.LeaseSimulation.deploy`.

The key is ``<consumer name>@<operation>:<digest>``, the digest being the
first 16 hex digits of the sha256 of the canonical tuple (parameters as JSON
with sorted keys, so their order does not matter): readable in a trace and
distinct for distinct tuples (a 64-bit digest).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from fanoutsim.kernel.names import check_name

_HEX64 = re.compile(r"[0-9a-f]{64}")
T = TypeVar("T")


def _canonical(parameters: object) -> str:
    if not isinstance(parameters, Mapping):
        raise ValueError(f"parameters must be a mapping of NAME to a JSON value, got {parameters!r}")
    for k in parameters:
        check_name("parameter name", k)
    try:
        return json.dumps(dict(parameters), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"parameters must be JSON values: {exc}") from None


@dataclass(frozen=True)
class ConsumerIdentity:
    """``(module_hash, operation, parameters, name)``: one durable consumer."""

    module_hash: str
    operation: str
    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.module_hash, str) or not _HEX64.fullmatch(self.module_hash):
            raise ValueError(
                f"module_hash must be 64 lowercase hex digits (the module hash from the "
                f"application lock), got {self.module_hash!r}"
            )
        check_name("operation", self.operation)
        check_name("consumer name", self.name)
        object.__setattr__(self, "parameters", json.loads(_canonical(self.parameters)))

    @property
    def canonical(self) -> str:
        """The whole tuple, canonical: what the key's digest is taken of."""
        return json.dumps(
            [self.module_hash, self.operation, self.parameters, self.name], sort_keys=True, separators=(",", ":")
        )

    @property
    def key(self) -> str:
        """The consumer's name in the tables."""
        return f"{self.name}@{self.operation}:{hashlib.sha256(self.canonical.encode()).hexdigest()[:16]}"

    def with_module(self, module_hash: str) -> ConsumerIdentity:
        """The same consumer under a changed module: a different durable consumer."""
        return replace(self, module_hash=module_hash)

    def __str__(self) -> str:
        return self.key


def module_hash(source: str) -> str:
    """A stand-in module hash: sha256 of a module's source text (RiffDB's is
    domain-separated over the compiled module; any 64-hex digest will do here)."""
    return hashlib.sha256(f"fanoutsim-module\0{source}".encode()).hexdigest()


def consumer_key(consumer: T) -> T | str:
    """A consumer's name in the tables: ``consumer`` itself (a str) or a
    :class:`ConsumerIdentity`'s key (anything else is handed back, for the caller to refuse)."""
    return consumer.key if isinstance(consumer, ConsumerIdentity) else consumer


__all__ = ["ConsumerIdentity", "consumer_key", "module_hash"]
