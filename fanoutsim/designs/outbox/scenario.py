"""Outbox scenario files: a run of the transactional outbox (seed 002) in one TOML file.

A scenario file with ``design = "outbox"`` at the top level describes an
:class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation` instead of a reactor run;
:func:`fanoutsim.designs.reactor.scenario.load_scenario` hands such a file to
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
    kind = "notifications"           # notifications, late_commit, slow_workflow
    drop = 0.05

A consumer's failures are drawn from a ``random.Random`` seeded with the run's
seed and the consumer's name, so a run stays reproducible. A consumer with a
``join_at`` registers at that virtual time (once the dispatcher is up) and
back-fills from its ``start``; an integer ``start`` is checked against the log
then (it must lie between the retention horizon and the last seq), so at
``join_at = 0`` — an empty log — only ``0`` is allowed.

Of the fault kinds of :mod:`fanoutsim.kernel.faults.plan`, those the outbox acts on
are accepted, with the outbox's names for their targets: ``crash_at_point``
takes an outbox crash point (``dispatch.after_handle_before_cursor``, ...);
``late_commit`` matches a row's ``topic`` (optional: every writer);
``slow_workflow`` slows a ``consumer``'s steps in a window. The reactor-only
kinds (``fail_inserts``, ``stall``, ``clock_skew``, ``pollers``, ``ties``) are
refused with an error naming the kind and what an outbox scenario accepts.

As for reactor scenarios, the whole file is read and checked before anything
is built, and every problem is reported in one
:class:`~fanoutsim.designs.reactor.scenario.ScenarioError` naming its key path
(``consumers[1].retry_budget``) and what is allowed there.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.faults import FaultPlan
from fanoutsim.kernel.faults.points import OUTBOX_CRASH_POINTS, REACTOR_CRASH_POINTS
from fanoutsim.designs.reactor.scenario import (
    _REACTOR_ONLY_KEYS, _Errors, ScenarioError, _array, _check_item, _check_str, _is_number, _kind,
    _parse_duration, _show, _table, _unknown_keys, check_overrides, parse_header,
    consumer_tables, parse_fault_tables, parse_run, refuse_existing_store, unknown_top_keys,
)
from fanoutsim.designs.outbox.config import ConsumerSpec, OutboxConfig

__all__ = ["OutboxScenario", "ConsumerDef", "OutboxWorkload", "parse_outbox_scenario",
           "PoisonRow", "TransientFailure", "OUTBOX_FAULT_KINDS"]

_TOP_KEYS = ("design", "name", "description", "run", "outbox", "consumers", "workload", "faults")
_CONSUMER_KEYS = ("name", "duration", "timeout", "backoff", "backoff_cap", "jitter", "retry_budget",
                  "start", "join_at", "fail", "poison_every")
_WORKLOAD_KEYS = ("rate", "pages", "start", "stop", "topic")
_SPEC_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ConsumerSpec)}

# fault kinds the outbox runtime acts on; key renames: the outbox spelling -> the spec's field
OUTBOX_FAULT_KINDS = ("crash_at", "crash_randomly", "crash_at_point", "notifications", "late_commit",
                      "slow_workflow")
_RENAMES = {"late_commit": {"topic": "reactor"}, "slow_workflow": {"consumer": "workflow"}}
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


# -- what a parsed outbox scenario holds -------------------------------------------
@dataclass(frozen=True)
class ConsumerDef:
    """One ``[[consumers]]`` table: a consumer's guardrails and its scripted failures."""

    name: str
    duration: Dist = Dist("fixed", 0.0)
    timeout: float | None = _SPEC_DEFAULTS["timeout"]
    backoff: float = _SPEC_DEFAULTS["backoff"]
    backoff_cap: float = _SPEC_DEFAULTS["backoff_cap"]
    jitter: float = _SPEC_DEFAULTS["jitter"]
    retry_budget: int = _SPEC_DEFAULTS["retry_budget"]
    start: str | int = "beginning"
    join_at: float = 0.0
    fail: float = 0.0
    poison_every: int | None = None

    def guardrails(self) -> dict:
        """The keyword arguments of ``OutboxSimulation.register_consumer`` (bar ``fn``, ``start``)."""
        d = self.duration
        return {"duration": d.a if d.law == "fixed" else d, "timeout": self.timeout, "backoff": self.backoff,
                "backoff_cap": self.backoff_cap, "jitter": self.jitter, "retry_budget": self.retry_budget}

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


@dataclass(frozen=True)
class OutboxWorkload:
    """One ``[[workload]]`` table: writers committing page changes at Poisson times."""

    rate: float
    pages: int = 100
    start: float = 0.0
    stop: float | None = None
    topic: str | None = None


@dataclass(frozen=True)
class OutboxScenario:
    """A checked outbox scenario: build an :class:`~fanoutsim.designs.outbox.simulation.OutboxSimulation`
    from it, or run it."""

    name: str
    source: str
    until: float
    seed: int = 0
    store: str = "memory"
    start: str | datetime | None = None
    description: str = ""
    config: OutboxConfig = OutboxConfig()
    consumers: tuple[ConsumerDef, ...] = ()
    workloads: tuple[OutboxWorkload, ...] = ()
    faults: Any = None  # a FaultPlan, from [[faults]]
    design = "outbox"  # a class attribute, as Scenario.design

    def build(self, seed: int | None = None, store=None, until: float | None = None):
        """An OutboxSimulation at virtual time 0: the consumers that join at 0
        registered, the later ones and the workloads scheduled, nothing run yet.
        ``seed``, ``store`` and ``until`` override the file's ``[run]`` values."""
        from fanoutsim.designs.outbox.simulation import OutboxSimulation

        seed, store, _ = check_overrides(self, seed, store, until)
        refuse_existing_store(self.source, store)
        sim = OutboxSimulation(self.config, seed=seed, store=store, start=self.start, faults=self.faults)
        for i, c in enumerate(self.consumers):
            if c.join_at > 0:
                sim.env.process(self._join(sim, i, c, seed))
            else:
                self._register(sim, i, c, seed)
        for w in self.workloads:
            sim.add_workload(w.rate, pages=w.pages, start=w.start, stop=w.stop, topic=w.topic)
        return sim

    def run(self, seed: int | None = None, until: float | None = None, store=None):
        """Build, then run the virtual clock to ``until`` (the file's by default)."""
        _, _, until = check_overrides(self, seed, store, until)
        sim = self.build(seed=seed, store=store, until=until)
        sim.run(until)
        return sim

    def _register(self, sim, i: int, c: ConsumerDef, seed: int) -> None:
        try:
            sim.register_consumer(c.name, c.handler(seed), start=c.start, **c.guardrails())
        except ValueError as exc:  # an int start outside the log as it is now
            raise ScenarioError(self.source, [(f"consumers[{i}].start", f"at t={sim.now:g}: {exc}")]) from None

    def _join(self, sim, i: int, c: ConsumerDef, seed: int):
        yield sim.env.timeout(c.join_at)
        while not sim.up:  # the dispatcher is down: join once it is back
            yield sim.env.timeout(0.1)
        self._register(sim, i, c, seed)


# -- parsing ---------------------------------------------------------------------
def parse_outbox_scenario(data: dict, *, source: str = "<scenario>", default_name: str = "scenario",
                          errors: _Errors | None = None) -> OutboxScenario:
    """Check a parsed TOML document of the outbox design and make an OutboxScenario.
    ``errors``: problems found already (say, a mistyped ``design``), reported with the rest."""
    errors = _Errors() if errors is None else errors
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", f"a scenario must be a TOML document (table), got {_kind(data)}")])
    unknown_top_keys(data, _TOP_KEYS, _REACTOR_ONLY_KEYS, "reactor", errors)
    name, description = parse_header(data, default_name, errors)
    seed, until, store, start = parse_run(data, errors)
    config = _parse_outbox_config(_table(data, "outbox", errors), errors)
    consumers = _parse_consumers(data, until, errors)
    workloads = _parse_workloads(_array(data, "workload", errors), errors)
    declared = sorted({item["name"] for item in (data.get("consumers") or ())
                       if isinstance(item, dict) and isinstance(item.get("name"), str)})
    faults = _parse_faults(data["faults"], declared, errors) if "faults" in data else None
    errors.raise_if_any(source)
    return OutboxScenario(name=name, source=source, until=until, seed=seed, store=store, start=start,
                          description=description, config=config, consumers=consumers,
                          workloads=workloads, faults=faults)


def _parse_outbox_config(table: dict | None, errors: _Errors) -> OutboxConfig:
    if table is None:
        return OutboxConfig()
    allowed = tuple(f.name for f in dataclasses.fields(OutboxConfig))
    _unknown_keys(table, allowed, "outbox", errors)
    good: dict[str, Any] = {}
    for key, value in table.items():
        if key not in allowed:
            continue
        try:  # one field at a time, so each error is pinned to its key
            OutboxConfig(**{key: value})
        except (ValueError, TypeError) as exc:
            errors.add(f"outbox.{key}", str(exc))
        else:
            good[key] = value
    try:
        return OutboxConfig(**good)
    except (ValueError, TypeError) as exc:  # a rule spanning fields, should OutboxConfig grow one
        errors.add("outbox", str(exc))
        return OutboxConfig()


def _seconds(item: dict, key: str, where: str, errors: _Errors, default, *, positive: bool = False):
    if key not in item:
        return default
    value = item[key]
    if not _is_number(value) or value < 0 or (positive and value == 0):
        errors.add(f"{where}.{key}", f"must be a finite number of seconds {'> 0' if positive else '>= 0'}, "
                                     f"got {_show(value)}")
        return None
    return float(value)


def _rate_and_window(item: dict, where: str, errors: _Errors, per: str):
    """A ``[[workload]]`` table's ``rate`` (``per`` virtual second, required, > 0)
    and its ``start``/``stop`` window; ``(rate, start, stop)`` (None where bad)."""
    rate = item.get("rate")
    if "rate" not in item:
        errors.add(f"{where}.rate", f"is required: {per} per virtual second (a number > 0)")
    elif not _is_number(rate) or rate <= 0:
        errors.add(f"{where}.rate", f"must be a finite number of {per} per virtual second > 0, got {_show(rate)}")
    start = _seconds(item, "start", where, errors, 0.0)
    stop = item.get("stop")
    if stop is not None and (not _is_number(stop) or (start is not None and stop <= start)):
        bound = f" after start ({start:g})" if start is not None else ""
        errors.add(f"{where}.stop", f"must be a finite number of virtual seconds{bound}, got {_show(stop)}")
    return rate, start, None if stop is None else float(stop)


def _int_at_least(item: dict, key: str, where: str, errors: _Errors, default, low: int, what: str):
    if key not in item:
        return default
    value = item[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        errors.add(f"{where}.{key}", f"must be an integer >= {low} ({what}), got {_show(value)}")
        return None
    return value


def _fraction(item: dict, key: str, where: str, errors: _Errors, default, what: str):
    if key not in item:
        return default
    value = item[key]
    if not _is_number(value) or not 0 <= value <= 1:
        errors.add(f"{where}.{key}", f"must be a number in [0, 1] ({what}), got {_show(value)}")
        return None
    return float(value)


def _parse_consumers(data: dict, until: float | None, errors: _Errors) -> tuple[ConsumerDef, ...]:
    out: list[ConsumerDef] = []
    for where, item, name, n in consumer_tables(data, errors, _CONSUMER_KEYS, "duration, timeout, backoff, ... )"):
        duration = (_parse_duration(item["duration"], f"{where}.duration", errors) if "duration" in item
                    else Dist("fixed", 0.0))
        timeout = _SPEC_DEFAULTS["timeout"]
        if "timeout" in item:
            timeout = item["timeout"]
            if timeout == "none":
                timeout = None
            elif not _is_number(timeout) or timeout <= 0:
                errors.add(f"{where}.timeout", f"must be a finite number of seconds > 0, or \"none\" "
                                               f"(a step is never cut off), got {_show(timeout)}")
            else:
                timeout = float(timeout)
        backoff = _seconds(item, "backoff", where, errors, _SPEC_DEFAULTS["backoff"])
        backoff_cap = _seconds(item, "backoff_cap", where, errors, _SPEC_DEFAULTS["backoff_cap"])
        jitter = _fraction(item, "jitter", where, errors, _SPEC_DEFAULTS["jitter"],
                           "the share of a backoff drawn away at random")
        budget = _int_at_least(item, "retry_budget", where, errors, _SPEC_DEFAULTS["retry_budget"], 1,
                               "the failures on one row that park it")
        join_at = _seconds(item, "join_at", where, errors, 0.0)
        if join_at is not None and until is not None and join_at >= until:
            errors.add(f"{where}.join_at", f"must be before run.until ({until:g}), got {_show(item['join_at'])}")
        start = item.get("start", "beginning")
        if start in ("beginning", "end"):
            pass
        elif isinstance(start, bool) or not isinstance(start, int) or start < 0:
            errors.add(f"{where}.start", f"must be \"beginning\", \"end\" or a seq (an integer >= 0), "
                                         f"got {_show(start)}")
        elif start > 0 and not item.get("join_at"):
            errors.add(f"{where}.start", f"a seq start must lie in the log when the consumer joins; at "
                                         f"join_at = 0 the log is empty, so only 0 is allowed (got {start}); "
                                         f"set join_at to join later")
        fail = _fraction(item, "fail", where, errors, 0.0, "the chance that an attempt fails")
        poison = _int_at_least(item, "poison_every", where, errors, None, 1,
                               "every poison_every-th seq fails on every attempt")
        if len(errors) > n:
            continue
        try:  # what ConsumerSpec checks, should it check more than we do
            ConsumerSpec(name, None, duration, timeout, backoff, backoff_cap, jitter, budget)
        except (ValueError, TypeError) as exc:
            errors.add(where, str(exc))
            continue
        out.append(ConsumerDef(name, duration, timeout, backoff, backoff_cap, jitter, budget, start,
                               join_at, fail, poison))
    return tuple(out)


def _parse_workloads(items: list | None, errors: _Errors) -> tuple[OutboxWorkload, ...]:
    out: list[OutboxWorkload] = []
    for i, item in enumerate(items or ()):
        where = f"workload[{i}]"
        if not _check_item(item, where, _WORKLOAD_KEYS, errors):
            continue
        n = len(errors)
        rate, start, stop = _rate_and_window(item, where, errors, "commits")
        pages = _int_at_least(item, "pages", where, errors, 100, 1, "distinct pages the writers change")
        topic = _check_str(item["topic"], f"{where}.topic", errors) if "topic" in item else None
        if len(errors) > n:
            continue
        out.append(OutboxWorkload(float(rate), pages, start, stop, topic))
    return tuple(out)


def _parse_faults(value: Any, consumers: list[str], errors: _Errors) -> FaultPlan | None:
    return parse_fault_tables(
        value, consumers, errors, label="an outbox scenario", accepted=OUTBOX_FAULT_KINDS,
        others={k: f"reactor design ({why})" for k, why in _REACTOR_ONLY_FAULTS.items()}, renames=_RENAMES,
        points=OUTBOX_CRASH_POINTS, points_label="the outbox's points",
        other_points={"reactor design": REACTOR_CRASH_POINTS}, slowed="the consumer whose steps are slowed")

