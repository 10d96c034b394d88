"""Outbox scenario files: a run of the transactional outbox (seed 002) in one TOML file.

A scenario file with ``design = "outbox"`` at the top level describes an
:class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation` instead of a reactor run;
:func:`fanoutsim.scenario.load_scenario` hands such a file to
:func:`parse_outbox_scenario` and returns an :class:`OutboxScenario`::

    design = "outbox"                # required for this schema
    name = "outbox"                  # optional, defaults to the file's stem
    description = "..."              # optional
    [run]                            # as in every scenario: seed, until, store, start
    seed = 0
    until = 3600.0
    [outbox]                         # any fanoutsim.designs.outbox.OutboxConfig field
    safety_poll_interval = 5.0
    read_mode = "all"                # "all" | "settled" | "gap"
    poll_mode = "fixed"              # "fixed" | "idle": an idle timeout per consumer (procrastinate, pgqueuer)
    wake_mode = "before_fetch"       # "before_fetch" | "after_fetch": the flag cleared after a read (lost wake-ups)
    read_cost = 0.003                # seconds a read takes, or a law: {dist = "empirical", samples = [...]}
    [[consumers]]                    # at least one
    name = "indexer"
    duration = 0.01                  # seconds >= 0, or {dist = "exponential", mean = 0.2}, ...
    timeout = 30.0                   # seconds > 0, or "none": a step is never cut off
    backoff = 0.5                    # seconds; doubles per failure ...
    backoff_cap = 60.0               # ... up to this
    jitter = 0.5                     # a fraction in [0, 1]
    retry_budget = 5                 # the retry_budget-th failure on a row parks it
    start = "beginning"              # "beginning" | "end" | a seq (int)
    join_at = 0.0                    # virtual seconds: when the consumer is registered
    fail = 0.0                       # the chance that an attempt fails (transient)
    poison_every = 500               # optional: every 500th seq fails on every attempt
    [[workload]]                     # writers committing page changes at Poisson times
    rate = 5.0                       # commits per virtual second
    pages = 100                      # distinct pages written (default 100)
    topic = "feed"                   # optional: every row's topic (default "page:<id>")
    start = 0.0                      # optional
    stop = 1800.0                    # optional
    [[faults]]                       # crash_at, crash_randomly, crash_at_point,
    kind = "notifications"           # notifications, late_commit, slow_workflow, backfill
    drop = 0.05
    [[faults]]
    kind = "backfill"                # a bulk job holds database pool connections in a window:
    window = [300.0, 900.0]          # with [outbox] reserve_listener = false, hints wait for a
    connections = 10                 # free one (listener_wait) or are lost (optional: all of them)

A consumer's failures are drawn from a ``random.Random`` seeded with the run's
seed and the consumer's name, so a run stays reproducible. A consumer with a
``join_at`` registers at that virtual time (once the dispatcher is up) and
back-fills from its ``start``; an integer ``start`` is checked against the log
then (it must lie between the retention horizon and the last seq), so at
``join_at = 0`` — an empty log — only ``0`` is allowed.

Of the fault kinds (:mod:`fanoutsim.designs.outbox.faults`), those the outbox acts on
are accepted, with the outbox's names for their targets: ``crash_at_point``
takes an outbox crash point (``dispatch.after_handle_before_cursor``, ...);
``late_commit`` matches a row's ``topic`` (optional: every writer);
``slow_workflow`` slows a ``consumer``'s steps in a window; ``backfill`` holds
pool connections in a window (it matters to the listener only when
``reserve_listener = false``). The reactor-only
kinds (``fail_inserts``, ``stall``, ``clock_skew``, ``pollers``, ``ties``) are
refused with an error naming the kind and what an outbox scenario accepts.

As for reactor scenarios, the whole file is read and checked before anything
is built, and every problem is reported in one
:class:`~fanoutsim.kernel.scenario.ScenarioError` naming its key path
(``consumers[1].retry_budget``) and what is allowed there. The schema below
(:data:`SCHEMA`) declares all of this once: the checks, the defaults, the docs
and ``data/schemas/outbox.schema.json``.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from fanoutsim.designs.outbox.config import (
    OUTBOX_FAULT_KINDS,
    POLL_MODES,
    READ_MODES,
    WAKE_MODES,
    ConsumerSpec,
    OutboxConfig,
    OutboxWorkload,
)
from fanoutsim.designs.outbox.faults import CRASH_POINTS
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.scenario import (
    Array,
    FaultRules,
    Faults,
    Item,
    Schema,
    Settings,
    checked_args,
    key,
    refused_at_run,
    seq_start_needs_join,
)
from fanoutsim.kernel.scenariorun import ScenarioRun
from fanoutsim.kernel.validate import (
    Distribution,
    Fraction,
    IntAtLeast,
    Name,
    OrWord,
    Position,
    Seconds,
)

__all__ = [
    "OutboxScenario",
    "ConsumerDef",
    "OutboxWorkload",
    "parse_outbox_scenario",
    "checked_args",
    "PoisonRow",
    "TransientFailure",
    "OUTBOX_FAULT_KINDS",
    "SCHEMA",
]

_SPEC_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ConsumerSpec)}

# key renames: the outbox spelling -> the spec's field (OUTBOX_FAULT_KINDS: in config)
_REACTOR_ONLY_FAULTS = {
    "fail_inserts": "the outbox writes no execution rows",
    "stall": "the outbox has no subscriptions to pause; slow_workflow slows or hangs a consumer",
    "clock_skew": "outbox writers stamp rows with the one clock; late_commit makes a stamp older than its commit",
    "pollers": "the outbox runs one dispatcher",
    "ties": "outbox rows are ordered by seq, not by timestamp",
}


class PoisonRow(Exception):
    """A consumer's ``poison_every``-th row: it fails on every attempt, until parked."""


class TransientFailure(Exception):
    """A consumer's drawn transient failure (its ``fail`` probability): a retry may succeed."""


# -- the tables, declared: what a parsed outbox scenario holds -----------------------
@dataclass(frozen=True)
class ConsumerDef:
    """One ``[[consumers]]`` table: a consumer's guardrails and its scripted failures."""

    name: str = key(Name(), doc="the consumer's name (unique)")
    duration: Dist = key(
        Distribution(),
        Dist("fixed", 0.0),
        doc='how long a step takes: seconds >= 0, or {dist = "exponential", mean = 0.2}, ...',
    )
    timeout: float | None = key(
        OrWord(Seconds(strict=True), "none", "a step is never cut off"),
        _SPEC_DEFAULTS["timeout"],
        doc='seconds > 0, or "none": a step is never cut off',
    )
    backoff: float = key(Seconds(), _SPEC_DEFAULTS["backoff"], doc="seconds; doubles per failure ...")
    backoff_cap: float = key(Seconds(), _SPEC_DEFAULTS["backoff_cap"], doc="... up to this")
    jitter: float = key(
        Fraction("the share of a backoff drawn away at random"),
        _SPEC_DEFAULTS["jitter"],
        doc="a fraction in [0, 1]: the share of a backoff drawn away at random",
    )
    retry_budget: int = key(
        IntAtLeast(1, "the failures on one row that park it"),
        _SPEC_DEFAULTS["retry_budget"],
        doc="the retry_budget-th failure on a row parks it",
    )
    start: str | int = key(Position(), "beginning", doc='"beginning" | "end" | a seq (int; needs join_at > 0)')
    join_at: float = key(Seconds(), 0.0, before_until=True, doc="virtual seconds: when the consumer is registered")
    fail: float = key(
        Fraction("the chance that an attempt fails"), 0.0, doc="the chance that an attempt fails (transient)"
    )
    poison_every: int | None = key(
        IntAtLeast(1, "every poison_every-th seq fails on every attempt"),
        None,
        doc="optional: every poison_every-th seq fails on every attempt",
    )

    def guardrails(self) -> dict:
        """The keyword arguments of ``OutboxSimulation.register_consumer`` (bar ``fn``, ``start``)."""
        d = self.duration
        return {
            "duration": d.a if d.law == "fixed" else d,
            "timeout": self.timeout,
            "backoff": self.backoff,
            "backoff_cap": self.backoff_cap,
            "jitter": self.jitter,
            "retry_budget": self.retry_budget,
        }

    def handler(self, seed: int):
        """The consumer's function for a run with ``seed``: raises :class:`PoisonRow`
        on every ``poison_every``-th seq and :class:`TransientFailure` with
        probability ``fail`` per attempt; None when it never fails."""
        if not self.fail and self.poison_every is None:
            return None
        every, fail = self.poison_every, self.fail
        rng = random.Random(f"fanoutsim:outbox-scenario:fail:{seed}:{self.name}")

        def handle(row: dict) -> None:
            if every is not None and row["seq"] % every == 0:
                raise PoisonRow(f"seq {row['seq']} fails on every attempt (poison_every = {every})")
            if fail and rng.random() < fail:
                raise TransientFailure(f"drawn failure (fail = {fail:g})")

        return handle


def _consumer_rules(item: Item) -> None:
    seq_start_needs_join(item)
    if item.failed:
        return
    v = item.values
    try:  # what ConsumerSpec checks, should it check more than the declaration does
        ConsumerSpec(
            v["name"], None, v["duration"], v["timeout"], v["backoff"], v["backoff_cap"], v["jitter"], v["retry_budget"]
        )
    except (ValueError, TypeError) as exc:
        item.fail("", str(exc))


FAULTS = FaultRules(
    label="an outbox scenario",
    accepted=OUTBOX_FAULT_KINDS,
    refused={
        **{k: f"reactor design ({why})" for k, why in _REACTOR_ONLY_FAULTS.items()},
        "restore_backup": "leases design (the outbox model has no backup and restore)",
    },
    renames={"late_commit": {"topic": "reactor"}, "slow_workflow": {"consumer": "workflow"}},
    refs={"consumer": "consumers"},
    required={"consumer": "the consumer whose steps are slowed"},
    points=CRASH_POINTS,
    points_label="the outbox's points",
)

SCHEMA = Schema(
    design="outbox",
    doc=__doc__,
    title="transactional outbox with NOTIFY hints, safety poll and per-consumer cursors (Subspace)",
    parts=(
        Settings(
            "outbox",
            OutboxConfig,
            choices={"read_mode": READ_MODES, "poll_mode": POLL_MODES, "wake_mode": WAKE_MODES},
            doc="any fanoutsim.designs.outbox.OutboxConfig field",
        ),
        Array(
            "consumers",
            ConsumerDef,
            unique="name",
            noun="consumer",
            rules=_consumer_rules,
            required="at least one [[consumers]] table (a name, and optional duration, timeout, backoff, ...)",
        ),
        Array("workload", OutboxWorkload),
        Faults(FAULTS),
    ),
)
"""The outbox design's scenario files, declared once."""


@dataclass(frozen=True)
class OutboxScenario(ScenarioRun):
    """A checked outbox scenario: build an :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`
    from it, or run it."""

    config: OutboxConfig = OutboxConfig()
    consumers: tuple[ConsumerDef, ...] = ()
    workloads: tuple[OutboxWorkload, ...] = ()
    design = "outbox"  # a class attribute, as Scenario.design

    def build(self, seed: int | None = None, store=None, until: float | None = None):
        """An OutboxSimulation at virtual time 0: the consumers that join at 0
        registered, the later ones and the workloads scheduled, nothing run yet.
        ``seed``, ``store`` and ``until`` override the file's ``[run]`` values."""
        from fanoutsim.designs.outbox.simulation import OutboxSimulation

        sim, seed = self.new_simulation(OutboxSimulation, seed, store, until)
        for i, c in enumerate(self.consumers):
            if c.join_at > 0:  # the dispatcher may be down then: join once it is back
                sim.env.process(self.when_up(sim, c.join_at, self._register, i, c, seed))
            else:
                self._register(sim, i, c, seed)
        for w in self.workloads:
            sim.add_workload(w.rate, pages=w.pages, start=w.start, stop=w.stop, topic=w.topic)
        return sim

    def _register(self, sim, i: int, c: ConsumerDef, seed: int) -> None:
        with refused_at_run(self.source, f"consumers[{i}].start", sim):  # an int start outside the log now
            sim.register_consumer(c.name, c.handler(seed), start=c.start, **c.guardrails())


# -- parsing ---------------------------------------------------------------------
def parse_outbox_scenario(data: dict, *, source: str = "<scenario>", default_name: str = "scenario") -> OutboxScenario:
    """Check a parsed TOML document of the outbox design and make an OutboxScenario;
    raises :class:`ScenarioError` listing every problem."""
    r = SCHEMA.read(data, source=source, default_name=default_name)
    return OutboxScenario(
        **r.header(), config=r["outbox"], consumers=r["consumers"], workloads=r["workload"], faults=r["faults"]
    )


parse_scenario = parse_outbox_scenario  # the package template's name (every design's parser)
