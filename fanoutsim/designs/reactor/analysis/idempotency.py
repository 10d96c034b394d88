"""The idempotency recipe: make a workflow's effect idempotent per firing.

Delivery is at-least-once: a crash between an execution insert and the
watermark commit that passes it dispatches the same firing again, so a
workflow body can run more than once per firing. Seeds 000 and 001 give the
recipe: key the effect on the dispatched context's ``reactor_firing_id`` —
write to the same logical record (an UPSERT) — and a re-delivery overwrites
what the first delivery wrote instead of adding to it.

:class:`EffectTable` stands for the external system a workflow writes to
(a database table, a ledger, a message sent): it lives outside the runner, so
a crash of the runner does not forget what was written. With ``key=None`` it
appends one record per body run — the naive workflow; with
``key="reactor_firing_id"`` it upserts — the recipe. :func:`recording_body`
writes every run's record to any number of tables, so *one* run shows both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fanoutsim.designs.reactor.analysis.faults import crash_run
from fanoutsim.designs.reactor.checker import check

__all__ = ["EffectTable", "recording_body", "dedup_report", "idempotency_run", "FIRING_KEY"]

#: The context field that names a firing: the idempotency recipe's key.
FIRING_KEY = "reactor_firing_id"


class EffectTable:
    """An external table a workflow body writes to.

    ``key=None``: append one record per write (the naive body). ``key`` a
    context field (``"reactor_firing_id"``): upsert on it, so writing the same
    firing twice leaves one record (the recipe). ``writes`` counts calls,
    ``applied`` the records that exist, ``overwrites`` the writes that landed
    on an existing record."""

    def __init__(self, key: str | None = FIRING_KEY) -> None:
        self.key = key
        self.records: dict[Any, dict] | list[dict] = {} if key is not None else []
        self.writes = 0
        self.overwrites = 0

    def write(self, context: dict) -> None:
        """The body's effect for one execution's ``context``: append a record, or
        upsert it on ``key`` (a second write of one firing overwrites the first).
        Raises KeyError when the context has no ``key`` field."""
        record = {k: v for k, v in context.items() if k != "reactor_fired_at"} | {
            "reactor_fired_at": context.get("reactor_fired_at")
        }
        self.writes += 1
        if self.key is None:
            self.records.append(record)
            return
        if self.key not in context:
            raise KeyError(f"the context has no {self.key!r} to key the effect on; it has {', '.join(context)}")
        if context[self.key] in self.records:
            self.overwrites += 1
        self.records[context[self.key]] = record  # UPSERT: the last write wins, one row per key

    @property
    def applied(self) -> int:
        """The records that exist: one per write (append), or per key (upsert)."""
        return len(self.records)

    def __repr__(self) -> str:
        how = "append" if self.key is None else f"upsert on {self.key}"
        return f"EffectTable({how}: {self.applied} records from {self.writes} writes)"


def recording_body(*tables: EffectTable) -> Callable[[dict], None]:
    """A workflow body that writes its context to each table."""

    def body(context: dict) -> None:
        for table in tables:
            table.write(context)

    return body


def dedup_report(sim, naive: EffectTable, upsert: EffectTable, report=None) -> dict[str, int]:
    """One run, counted three ways: ``firings`` logged, ``executions``
    dispatched (``extra_deliveries`` of them duplicates), ``bodies_run``
    (claimed and run), and the records each table holds — ``naive_records``
    (one per body run) and ``upserted_records`` (one per firing) — with
    ``absorbed`` the writes the upsert turned into overwrites."""
    report = check(sim) if report is None else report
    ex = sim.executions()
    ran = ex[ex["status"].isin(["completed", "failed"])]
    return {
        "firings": int(len(sim.trace().history["logged_at"].dropna())),
        "firings_delivered": int(ex["reactor_firing_id"].nunique()),
        "executions": int(len(ex)),
        "extra_deliveries": int(report.total["extra_deliveries"]),
        "bodies_run": int(len(ran)),
        "naive_records": naive.applied,
        "upserted_records": upsert.applied,
        "absorbed": upsert.overwrites,
    }


def idempotency_run(batch_limit: int = 50, watermark_commit: str = "per_batch", *, drain_s: float = 120.0, **kwargs):
    """A :func:`~fanoutsim.designs.reactor.analysis.faults.crash_run` whose workflow body
    writes every run to a naive table and to one keyed on
    ``reactor_firing_id``, drained for ``drain_s`` after the last firing so
    every execution has run; returns ``(sim, naive, upsert)``."""
    naive, upsert = EffectTable(key=None), EffectTable(key=FIRING_KEY)
    sim = crash_run(batch_limit, watermark_commit, body=recording_body(naive, upsert), drain_s=drain_s, **kwargs)
    return sim, naive, upsert
