"""Leases scenario files: a run of leased durable consumers (seed 003) in one TOML file.

A scenario file with ``design = "leases"`` at the top level describes a
:class:`~fanoutsim.runtime.leases.LeaseSimulation`;
:func:`fanoutsim.scenario.load_scenario` hands such a file to
:func:`parse_lease_scenario` and returns a :class:`LeaseScenario`::

    design = "leases"                # required for this schema
    name = "leases"                  # optional, defaults to the file's stem
    description = "..."              # optional
    [run]                            # as in every scenario: seed, until, store, start
    seed = 0
    until = 900.0
    [leases]                         # any fanoutsim.leases.LeaseConfig field
    retention = 120.0                # seconds an event is kept (never past a fence)
    retention_interval = 30.0        # how often retention runs
    recovery_interval = 1.0          # how often recovery expires leases
    max_retry_delay = 3600.0         # the largest nack delay (at most 3600, RiffDB's bound)
    partition_order = "riffdb"       # "riffdb" (several leases per partition, RiffDB's code)
                                     # or "head_of_line" (one per partition, the seed's reading)
    [[consumers]]                    # at least one
    name = "indexer"
    start = "beginning"              # "beginning" | "end" | a seq (int; needs join_at > 0)
    batch_limit = 4                  # 1 through 8 (the seed's range)
    in_flight_limit = 4              # 1 through 8
    lease_seconds = 60.0             # 5 through 900
    duration = 0.02                  # seconds >= 0, or {dist = "exponential", mean = 1.2}, ...
    fail = 0.0                       # the chance that an attempt fails (the worker nacks)
    poison_every = 250               # optional: every event whose seq is a multiple of 250
                                     # fails on every attempt (dead-lettered on the 10th)
    nack_delay = 1.0                 # seconds a nack asks to wait (<= leases.max_retry_delay)
    poll_interval = 0.5              # seconds between the client's consume calls (> 0)
    join_at = 0.0                    # virtual seconds: when the consumer is created
    retire_at = 450.0                # optional: retired then (deleted: releases its retention fence)
    [[workload]]                     # publishers at Poisson times, one event per commit
    rate = 2.0                       # events per virtual second
    partitions = 4                   # a count (p0, p1, ...) or a list of names (default 4)
    kind = "event"                   # optional: every event's kind
    start = 0.0                      # optional
    stop = 600.0                     # optional
    [[actions]]                      # optional: administrative steps at a virtual time
    kind = "restore"                 # a new history incarnation: old lease tokens fail closed
    at = 600.0
    [[actions]]
    kind = "seek"                    # move a consumer's checkpoint (re-delivers, or skips)
    at = 300.0
    consumer = "indexer"
    position = "beginning"           # "beginning" | "end" | a seq
    [[faults]]                       # crash_at, crash_randomly, crash_at_point, slow_workflow
    kind = "crash_at_point"
    point = "worker.after_effect_before_ack"

A consumer's client (see :class:`~fanoutsim.runtime.leases.LeaseSimulation`)
polls every ``poll_interval``, works each leased event for a drawn
``duration`` (which may outlast ``lease_seconds``: its ack then fails closed
and the event is delivered again), fails with probability ``fail`` or when the
event is poison (``seq % poison_every == 0``: deterministic, the same events
in every run), nacking with ``nack_delay``. Failures and durations are drawn
from the run's seeded generators, so a run stays reproducible.

A consumer with ``join_at > 0`` is created at that virtual time and reads
from its ``start`` then (``"beginning"``: the retention horizon at that
moment); an integer ``start`` is checked against the log then. ``retire_at``
retires it for good: it is deleted with its rows, it no longer holds a
retention fence, and the events it had not finished are reported lost with
cause ``retired``. RiffDB refuses a seek or a retire while the consumer holds a
live lease, so a seek action and ``retire_at`` run as an operator would
(:meth:`~fanoutsim.runtime.leases.LeaseSimulation.administer`): the consumer's
client stops taking leases, and the step is retried until its last lease is
acked, nacked or expired. ``[[actions]]`` and ``retire_at`` that fall while the
node is down (a crash) happen as soon as it is back.

Of the fault kinds of :mod:`fanoutsim.faults.plan`, a leases scenario accepts
``crash_at``, ``crash_randomly``, ``crash_at_point`` at a lease point
(:data:`fanoutsim.faults.LEASE_CRASH_POINTS`) and ``slow_workflow`` by
``consumer`` (its workers' durations in a window). The others are refused with
an error naming the kind and what a leases scenario accepts.

As for the other designs, the whole file is read and checked before anything
is built, and every problem is reported in one
:class:`~fanoutsim.scenario.ScenarioError` naming its key path
(``consumers[1].lease_seconds``) and what is allowed there.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..dist import Dist
from ..faults import FaultPlan
from ..faults.points import LEASE_CRASH_POINTS, OUTBOX_CRASH_POINTS, REACTOR_CRASH_POINTS
from ..outbox.scenario import _fraction, _int_at_least, _rate_and_window, _seconds
from ..scenario import (
    _OUTBOX_ONLY_KEYS, _REACTOR_ONLY_KEYS, _Errors, ScenarioError, _array, _check_item, _check_str, _is_number,
    _kind, _parse_duration, _required_name, _show, _table, _unknown_keys, check_overrides, parse_header,
    consumer_tables, parse_fault_tables, parse_run, refuse_existing_store, unknown_top_keys,
)
from .config import DEFAULT_LIMITS, LeaseConfig, check_limits

__all__ = ["LeaseScenario", "LeaseConsumerDef", "LeaseWorkload", "LeaseAction", "parse_lease_scenario",
           "LEASE_FAULT_KINDS", "ACTION_KINDS"]

_TOP_KEYS = ("design", "name", "description", "run", "leases", "consumers", "workload", "actions", "faults")
_CONSUMER_KEYS = ("name", "start", "batch_limit", "in_flight_limit", "lease_seconds", "duration", "fail",
                  "poison_every", "nack_delay", "poll_interval", "join_at", "retire_at")
_WORKLOAD_KEYS = ("rate", "partitions", "kind", "start", "stop")
ACTION_KINDS = ("restore", "seek")
_ACTION_KEYS = {"restore": ("kind", "at"), "seek": ("kind", "at", "consumer", "position")}

# fault kinds the leases runtime acts on; key renames: the leases spelling -> the spec's field
LEASE_FAULT_KINDS = ("crash_at", "crash_randomly", "crash_at_point", "slow_workflow")
_RENAMES = {"slow_workflow": {"consumer": "workflow"}}
_OTHER_FAULTS = {
    "fail_inserts": "reactor design: the leases broker writes no execution rows",
    "stall": "reactor design: a leases consumer pulls; slow_workflow slows its workers",
    "clock_skew": "reactor design: one broker assigns every seq and timestamp",
    "pollers": "reactor design: the leases design runs one broker",
    "ties": "reactor design: events are ordered by seq, not by timestamp",
    "notifications": "outbox design: leases consumers pull, no hints are sent",
    "late_commit": "outbox design: a leases commit is visible when it commits, with its seq",
}


# -- what a parsed leases scenario holds -----------------------------------------
@dataclass(frozen=True)
class LeaseConsumerDef:
    """One ``[[consumers]]`` table: a durable consumer, its client and its schedule."""

    name: str
    start: str | int = "beginning"
    batch_limit: int = DEFAULT_LIMITS["batch_limit"]
    in_flight_limit: int = DEFAULT_LIMITS["in_flight_limit"]
    lease_seconds: float = DEFAULT_LIMITS["lease_seconds"]
    duration: Dist = Dist("fixed", 0.01)
    fail: float = 0.0
    poison_every: int | None = None
    nack_delay: float = 1.0
    poll_interval: float = 0.5
    join_at: float = 0.0
    retire_at: float | None = None

    def poison(self):
        """``poison(lease)`` for the runtime: true for every ``poison_every``-th seq (None: never)."""
        every = self.poison_every
        if every is None:
            return None
        return lambda lease: lease.seq % every == 0

    def arguments(self) -> dict:
        """The keyword arguments of ``LeaseSimulation.register_consumer``."""
        d = self.duration
        return {"start": self.start, "batch_limit": self.batch_limit, "in_flight_limit": self.in_flight_limit,
                "lease_seconds": self.lease_seconds, "duration": d.a if d.law == "fixed" else d,
                "fail": self.fail, "poison": self.poison(), "nack_delay": self.nack_delay,
                "poll_interval": self.poll_interval}


@dataclass(frozen=True)
class LeaseWorkload:
    """One ``[[workload]]`` table: events published at Poisson times."""

    rate: float
    partitions: int | tuple[str, ...] = 4
    kind: str = "event"
    start: float = 0.0
    stop: float | None = None


@dataclass(frozen=True)
class LeaseAction:
    """One ``[[actions]]`` table: ``restore``, or ``seek`` of ``consumer`` to ``position``."""

    kind: str
    at: float
    consumer: str | None = None
    position: str | int | None = None


@dataclass(frozen=True)
class LeaseScenario:
    """A checked leases scenario: build a :class:`~fanoutsim.runtime.leases.LeaseSimulation`
    from it, or run it."""

    name: str
    source: str
    until: float
    seed: int = 0
    store: str = "memory"
    start: str | datetime | None = None
    description: str = ""
    config: LeaseConfig = LeaseConfig()
    consumers: tuple[LeaseConsumerDef, ...] = ()
    workloads: tuple[LeaseWorkload, ...] = ()
    actions: tuple[LeaseAction, ...] = ()
    faults: Any = None  # a FaultPlan, from [[faults]]
    design = "leases"  # a class attribute, as Scenario.design

    def build(self, seed: int | None = None, store=None, until: float | None = None):
        """A LeaseSimulation at virtual time 0: the consumers that join at 0
        created, later joins, retirements, actions and the workloads scheduled,
        nothing run yet. ``seed``, ``store`` and ``until`` override the file's
        ``[run]`` values."""
        from ..runtime.leases import LeaseSimulation

        seed, store, _ = check_overrides(self, seed, store, until)
        refuse_existing_store(self.source, store)
        sim = LeaseSimulation(self.config, seed=seed, store=store, start=self.start, faults=self.faults)
        for i, c in enumerate(self.consumers):
            if c.join_at > 0:
                sim.env.process(self._at(sim, c.join_at, None, self._register, i, c))
            else:
                self._register(sim, i, c)
            if c.retire_at is not None:
                sim.env.process(self._at(sim, c.retire_at, c.name,
                                         lambda s, name=c.name: s.administer("retire", name)))
        for i, a in enumerate(self.actions):
            sim.env.process(self._at(sim, a.at, a.consumer, self._act, i, a))
        for w in self.workloads:
            sim.add_workload(w.rate, partitions=w.partitions if isinstance(w.partitions, int)
                             else list(w.partitions), kind=w.kind, start=w.start, stop=w.stop)
        return sim

    def run(self, seed: int | None = None, until: float | None = None, store=None):
        """Build, then run the virtual clock to ``until`` (the file's by default)."""
        _, _, until = check_overrides(self, seed, store, until)
        sim = self.build(seed=seed, store=store, until=until)
        sim.run(until)
        return sim

    def _register(self, sim, i: int, c: LeaseConsumerDef) -> None:
        try:
            sim.register_consumer(c.name, **c.arguments())
        except ValueError as exc:  # an int start outside the log as it is now
            raise ScenarioError(self.source, [(f"consumers[{i}].start", f"at t={sim.now:g}: {exc}")]) from None

    def _act(self, sim, i: int, a: LeaseAction) -> None:
        if a.kind == "restore":
            sim.restore()
            return
        sim.env.process(self._seek(sim, i, a))

    def _seek(self, sim, i: int, a: LeaseAction):
        try:
            yield sim.administer("seek", a.consumer, a.position)
        except ValueError as exc:  # an int position outside the log as it is now
            raise ScenarioError(self.source, [(f"actions[{i}].position", f"at t={sim.now:g}: {exc}")]) from None

    @staticmethod
    def _at(sim, at: float, consumer: str | None, step, *args):
        """Run ``step(sim, *args)`` at virtual time ``at``, or once the node is back up
        (and ``consumer``, if given, has joined: a crash may have delayed its join)."""
        if at > sim.now:
            yield sim.env.timeout(at - sim.now)
        while not sim.up or (consumer is not None and consumer not in sim.clients):
            yield sim.env.timeout(0.1)
        step(sim, *args)


# -- parsing ---------------------------------------------------------------------
def parse_lease_scenario(data: dict, *, source: str = "<scenario>", default_name: str = "scenario",
                         errors: _Errors | None = None) -> LeaseScenario:
    """Check a parsed TOML document of the leases design and make a LeaseScenario.
    ``errors``: problems found already (say, a mistyped ``design``), reported with the rest."""
    errors = _Errors() if errors is None else errors
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", f"a scenario must be a TOML document (table), got {_kind(data)}")])
    others = {**dict.fromkeys(_REACTOR_ONLY_KEYS, "reactor"),
              **{k: "outbox" for k in _OUTBOX_ONLY_KEYS if k not in _TOP_KEYS}}
    unknown_top_keys(data, _TOP_KEYS, others, "reactor", errors)
    name, description = parse_header(data, default_name, errors)
    seed, until, store, start = parse_run(data, errors)
    config = _parse_config(_table(data, "leases", errors), errors)
    consumers = _parse_consumers(data, until, config, errors)
    workloads = _parse_workloads(_array(data, "workload", errors), errors)
    declared = {c.name: c for c in consumers}
    named = sorted({item["name"] for item in (data.get("consumers") or ())
                    if isinstance(item, dict) and isinstance(item.get("name"), str)})
    actions = _parse_actions(_array(data, "actions", errors), until, declared, named, errors)
    faults = _parse_faults(data["faults"], named, errors) if "faults" in data else None
    errors.raise_if_any(source)
    return LeaseScenario(name=name, source=source, until=until, seed=seed, store=store, start=start,
                         description=description, config=config, consumers=consumers, workloads=workloads,
                         actions=actions, faults=faults)


def _parse_config(table: dict | None, errors: _Errors) -> LeaseConfig:
    if table is None:
        return LeaseConfig()
    allowed = tuple(f.name for f in dataclasses.fields(LeaseConfig))
    _unknown_keys(table, allowed, "leases", errors)
    good: dict[str, Any] = {}
    for key, value in table.items():
        if key not in allowed:
            continue
        try:  # one field at a time, so each error is pinned to its key
            LeaseConfig(**{key: value})
        except (ValueError, TypeError) as exc:
            errors.add(f"leases.{key}", _strip(str(exc), key))
        else:
            good[key] = value
    try:
        return LeaseConfig(**good)
    except (ValueError, TypeError) as exc:  # a rule spanning fields, should LeaseConfig grow one
        errors.add("leases", str(exc))
        return LeaseConfig()


def _strip(message: str, field: str) -> str:
    """The engine's ``"batch_limit must be ..."`` as ``"must be ..."`` (the key path names the field)."""
    return message[len(field) + 1:] if message.startswith(field + " ") else message


def _parse_consumers(data: dict, until: float | None, config: LeaseConfig,
                     errors: _Errors) -> tuple[LeaseConsumerDef, ...]:
    out: list[LeaseConsumerDef] = []
    for where, item, name, n in consumer_tables(data, errors, _CONSUMER_KEYS, "start, batch_limit, in_flight_limit, lease_seconds, duration, ...)"):
        limits = dict(DEFAULT_LIMITS)
        for key in DEFAULT_LIMITS:  # the seed's ranges, in the engine's words
            if key not in item:
                continue
            try:
                limits[key] = check_limits(**{**DEFAULT_LIMITS, key: item[key]})[key]
            except ValueError as exc:
                errors.add(f"{where}.{key}", f"{_strip(str(exc), key)} (the seed's range)")
        duration = (_parse_duration(item["duration"], f"{where}.duration", errors) if "duration" in item
                    else Dist("fixed", 0.01))
        fail = _fraction(item, "fail", where, errors, 0.0, "the chance that an attempt fails")
        poison = _int_at_least(item, "poison_every", where, errors, None, 1,
                               "every event whose seq is a multiple of it fails on every attempt")
        nack_delay = _seconds(item, "nack_delay", where, errors, 1.0)
        if nack_delay is not None and nack_delay > config.max_retry_delay:
            errors.add(f"{where}.nack_delay", f"must be 0 through {config.max_retry_delay:g} seconds "
                                              f"(leases.max_retry_delay), got {_show(item['nack_delay'])}")
        poll = _seconds(item, "poll_interval", where, errors, 0.5, positive=True)
        join_at = _seconds(item, "join_at", where, errors, 0.0)
        if join_at is not None and until is not None and join_at >= until:
            errors.add(f"{where}.join_at", f"must be before run.until ({until:g}), got {_show(item['join_at'])}")
        retire_at = _seconds(item, "retire_at", where, errors, None)
        if retire_at is not None:
            if join_at is not None and retire_at <= join_at:
                errors.add(f"{where}.retire_at", f"must be after join_at ({join_at:g}), "
                                                 f"got {_show(item['retire_at'])}")
            elif until is not None and retire_at >= until:
                errors.add(f"{where}.retire_at", f"must be before run.until ({until:g}), "
                                                 f"got {_show(item['retire_at'])}")
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
        if len(errors) > n:
            continue
        out.append(LeaseConsumerDef(name, start, limits["batch_limit"], limits["in_flight_limit"],
                                    limits["lease_seconds"], duration, fail, poison, nack_delay, poll,
                                    join_at, retire_at))
    return tuple(out)


def _parse_workloads(items: list | None, errors: _Errors) -> tuple[LeaseWorkload, ...]:
    out: list[LeaseWorkload] = []
    for i, item in enumerate(items or ()):
        where = f"workload[{i}]"
        if not _check_item(item, where, _WORKLOAD_KEYS, errors):
            continue
        n = len(errors)
        rate, start, stop = _rate_and_window(item, where, errors, "events")
        partitions = item.get("partitions", 4)
        if isinstance(partitions, list):
            if (not partitions or not all(isinstance(p, str) and p.strip() for p in partitions)
                    or len(set(partitions)) != len(partitions)):
                errors.add(f"{where}.partitions", f"a list must name distinct partitions (non-empty strings), "
                                                  f"got {partitions!r}")
            else:
                partitions = tuple(partitions)
        elif isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            errors.add(f"{where}.partitions", f"must be a count (an integer >= 1: p0, p1, ...) or a list of "
                                              f"partition names, got {_show(partitions)}")
        kind = _check_str(item["kind"], f"{where}.kind", errors) if "kind" in item else "event"
        if len(errors) > n:
            continue
        out.append(LeaseWorkload(float(rate), partitions, kind, start, stop))
    return tuple(out)


def _parse_actions(items: list | None, until: float | None, declared: dict[str, LeaseConsumerDef],
                   named: list[str], errors: _Errors) -> tuple[LeaseAction, ...]:
    out: list[LeaseAction] = []
    accepted = ", ".join(ACTION_KINDS)
    for i, item in enumerate(items or ()):
        where = f"actions[{i}]"
        if not isinstance(item, dict):
            errors.add(where, f"must be a table, got {_kind(item)}")
            continue
        kind = item.get("kind")
        if "kind" not in item:
            errors.add(f"{where}.kind", f"is required; an action is one of: {accepted}")
            continue
        if kind == "retire":
            errors.add(f"{where}.kind", f"'retire' is set on the consumer: consumers[i].retire_at = seconds; "
                                        f"an action is one of: {accepted}")
            continue
        if not isinstance(kind, str) or kind not in ACTION_KINDS:
            errors.add(f"{where}.kind", f"must be one of: {accepted}; got {_show(kind)}")
            continue
        n = len(errors)
        _unknown_keys(item, _ACTION_KEYS[kind], where, errors, f"for {kind!r}")
        at = item.get("at")
        if "at" not in item:
            errors.add(f"{where}.at", "is required: the virtual second it happens (a number >= 0)")
        elif not _is_number(at) or at < 0:
            errors.add(f"{where}.at", f"must be a finite number of virtual seconds >= 0, got {_show(at)}")
        elif until is not None and at >= until:
            errors.add(f"{where}.at", f"must be before run.until ({until:g}), got {_show(at)}")
        consumer = position = None
        if kind == "seek":
            consumer = _required_name(item, "consumer", where, errors)
            if consumer is not None and consumer not in named:
                errors.add(f"{where}.consumer", f"{consumer!r} is not declared in [[consumers]]; "
                                                f"declared: {', '.join(named) or 'none'}")
            elif consumer is not None and consumer in declared and _is_number(at):
                c = declared[consumer]
                if at < c.join_at:
                    errors.add(f"{where}.at", f"{consumer!r} joins at {c.join_at:g}; a seek must come "
                                              f"after it, got {_show(at)}")
                elif c.retire_at is not None and at >= c.retire_at:
                    errors.add(f"{where}.at", f"{consumer!r} is retired at {c.retire_at:g} and cannot seek "
                                              f"then; got {_show(at)}")
            position = item.get("position", "beginning")
            if position not in ("beginning", "end") and (
                    isinstance(position, bool) or not isinstance(position, int) or position < 0):
                errors.add(f"{where}.position", f"must be \"beginning\", \"end\" or a seq (an integer >= 0), "
                                                f"got {_show(position)}")
        if len(errors) > n:
            continue
        out.append(LeaseAction(kind, float(at), consumer, position))
    return tuple(out)


def _parse_faults(value: Any, consumers: list[str], errors: _Errors) -> FaultPlan | None:
    return parse_fault_tables(
        value, consumers, errors, label="a leases scenario", accepted=LEASE_FAULT_KINDS, others=_OTHER_FAULTS,
        renames=_RENAMES, points=LEASE_CRASH_POINTS, points_label="the leases design's points",
        other_points={"reactor design": REACTOR_CRASH_POINTS, "outbox design": OUTBOX_CRASH_POINTS},
        slowed="the consumer whose workers are slowed")
