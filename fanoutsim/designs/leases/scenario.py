"""Leases scenario files: a run of leased durable consumers (seed 003) in one TOML file.

A scenario file with ``design = "leases"`` at the top level describes a
:class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`;
:func:`fanoutsim.scenario.load_scenario` hands such a file to
:func:`parse_lease_scenario` and returns a :class:`LeaseScenario`::

    design = "leases"                # required for this schema
    name = "leases"                  # optional, defaults to the file's stem
    description = "..."              # optional
    [run]                            # as in every scenario: seed, until, store, start
    seed = 0
    until = 900.0
    [leases]                         # any fanoutsim.designs.leases.LeaseConfig field
    retention = 120.0                # seconds an event is kept (never past a fence)
    retention_interval = 30.0        # how often retention runs
    recovery_interval = 1.0          # how often recovery expires leases
    max_retry_delay = 3600.0         # the largest nack delay (at most 3600, RiffDB's bound)
    partition_order = "riffdb"       # "riffdb" (several leases per partition, RiffDB's code)
                                     # or "head_of_line" (one per partition, the seed's reading)
    # the brokers' rules (fanoutsim.designs.leases.config), each defaulting to RiffDB's:
    limits = "riffdb"                # or "open": the brokers' ranges of the three limits below
    batch_limit = 4                  # a consumer's, unless its table gives one
    in_flight_limit = 4              # (JetStream: MaxAckPending)
    lease_seconds = 60.0             # (JetStream: AckWait; Redis: XAUTOCLAIM's min-idle-time)
    max_deliver = 10                 # deliveries an event gets (-1: no limit)
    max_deliver_rule = "failures"    # or "deliveries" (JetStream's MaxDeliver)
    at_max_deliver = "dead_letter"   # or "advisory" (JetStream), "drop"
    backoff = [0.2, 0.4]             # JetStream's BackOff: the lease of each delivery
    nack_delay_rule = "as_asked"     # or "plus_backoff" (nats-server's nak with a BackOff list)
    late_ack = "refuse"              # or "honour" (JetStream, Redis)
    lease_expiry = "recovery"        # or "claim" (Redis XAUTOCLAIM)
    expiry_timer = "interval"        # or "deadline" (nats-server's pending timer)
    retention_policy = "fence"       # or "interest" (JetStream), "limits" (age only)
    deliver_cost = 0.001             # seconds, or a law: a lease's hand-off to its worker
    ack_cost = 0.001                 # seconds, or a law: an ack's round trip
    [[consumers]]                    # at least one
    name = "indexer"
    start = "beginning"              # "beginning" | "end" | a seq (int; needs join_at > 0)
    batch_limit = 4                  # 1 through 8 (the seed's range; leases.limits = "open": more)
    in_flight_limit = 4              # 1 through 8 (default: leases.in_flight_limit)
    lease_seconds = 60.0             # 5 through 900 (default: leases.lease_seconds)
    duration = 0.02                  # seconds >= 0, or {dist = "exponential", mean = 1.2}, ...
    fail = 0.0                       # the chance that an attempt fails (the worker nacks)
    poison_every = 250               # optional: every event whose seq is a multiple of 250
                                     # fails on every attempt (dead-lettered on the 10th)
    nack_delay = 1.0                 # seconds a nack asks to wait (<= leases.max_retry_delay)
    poll_interval = 0.5              # seconds between the client's consume calls (> 0)
    join_at = 0.0                    # virtual seconds: when the consumer is created
    retire_at = 450.0                # optional: retired then (deleted: releases its retention fence)
    pull_mode = "poll"               # or "wait": a broker client's fetch loop
    in_progress_every = 2.0          # optional: a worker's InProgress, every so many seconds
    poison_action = "nack"           # or "term": a poison event is terminated (no redelivery)
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
    [[faults]]                       # crash_at, crash_randomly, crash_at_point, slow_workflow,
    kind = "crash_at_point"          # restore_backup
    point = "worker.after_effect_before_ack"
    [[faults]]
    kind = "restore_backup"          # the tables copied at backup_at are put back at at: checkpoints
    backup_at = 200.0                # and the log return there, a new history incarnation is
    at = 400.0                       # published (old lease tokens fail closed)

A consumer's client (see :class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`)
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
(:meth:`~fanoutsim.designs.leases.simulation.LeaseSimulation.administer`): the consumer's
client stops taking leases, and the step is retried until its last lease is
acked, nacked or expired. ``[[actions]]`` and ``retire_at`` that fall while the
node is down (a crash) happen as soon as it is back.

Of the fault kinds (:mod:`fanoutsim.designs.leases.faults`), a leases scenario accepts
``crash_at``, ``crash_randomly``, ``crash_at_point`` at a lease point
(:data:`fanoutsim.designs.leases.faults.CRASH_POINTS`), ``slow_workflow`` by
``consumer`` (its workers' durations in a window) and ``restore_backup``
(:mod:`fanoutsim.designs.leases.backup`: a backup taken at ``backup_at`` and
restored at ``at``; while the node is down at either time, it happens as soon
as the node is back). The others are refused with
an error naming the kind and what a leases scenario accepts.

As for the other designs, the whole file is read and checked before anything
is built, and every problem is reported in one
:class:`~fanoutsim.kernel.scenario.ScenarioError` naming its key path
(``consumers[1].lease_seconds``) and what is allowed there. The schema below
(:data:`SCHEMA`) declares all of this once: the checks, the defaults, the docs
and ``data/schemas/leases.schema.json``; a new key is one more field of its
table's dataclass (a new ``[leases]`` setting: one more ``LeaseConfig`` field).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fanoutsim.designs.leases.config import (
    BATCH_RANGE,
    CHOICES,
    DEFAULT_LIMITS,
    IN_FLIGHT_RANGE,
    LEASE_FAULT_KINDS,
    LEASE_RANGE,
    LeaseConfig,
    check_limits,
    check_nack_delay,
    limits_note,
    ranges,
)
from fanoutsim.designs.leases.faults import CRASH_POINTS
from fanoutsim.designs.leases.host import POISON_ACTIONS, PULL_MODES
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.scenario import (
    Array,
    FaultRules,
    Faults,
    Item,
    Schema,
    Settings,
    key,
    kinds_schema,
    read_table,
    refused_at_run,
    seq_start_needs_join,
    table_schema,
)
from fanoutsim.kernel.scenariorun import ScenarioRun
from fanoutsim.kernel.validate import (
    Distribution,
    Fraction,
    IntAtLeast,
    Invalid,
    Name,
    OneOf,
    Position,
    Rate,
    Seconds,
    Validator,
    is_number,
    is_whole,
    kind,
    show,
)

__all__ = [
    "LeaseScenario",
    "LeaseConsumerDef",
    "LeaseWorkload",
    "LeaseAction",
    "parse_lease_scenario",
    "LEASE_FAULT_KINDS",
    "ACTION_KINDS",
    "SCHEMA",
]

ACTION_KINDS = ("restore", "seek")
_ACTION_KEYS = {"restore": ("kind", "at"), "seek": ("kind", "at", "consumer", "position")}

# the fault kinds of other designs, and why the leases runtime does not act on them
_OTHER_FAULTS = {
    "fail_inserts": "reactor design: the leases broker writes no execution rows",
    "stall": "reactor design: a leases consumer pulls; slow_workflow slows its workers",
    "clock_skew": "reactor design: one broker assigns every seq and timestamp",
    "pollers": "reactor design: the leases design runs one broker",
    "ties": "reactor design: events are ordered by seq, not by timestamp",
    "notifications": "outbox design: leases consumers pull, no hints are sent",
    "late_commit": "outbox design: a leases commit is visible when it commits, with its seq",
    "backfill": "outbox design: leases consumers pull, no listener waits for a pool connection",
}
_SEED = "the seed's range"
_OPEN = "more under leases.limits = 'open'"


@dataclass(frozen=True)
class Limit(Validator):
    """A consumer's delivery limit: a whole number (``seconds``: a number of
    seconds); its range depends on ``[leases] limits`` and is checked by the
    consumer's rules, so that the error says the range that applies."""

    seconds: bool = False

    @property
    def allowed(self) -> str:
        return "a number of seconds > 0" if self.seconds else "an integer >= 1"

    def check(self, value):
        if not (is_number(value) if self.seconds else is_whole(value)):
            raise self.refuse(value)
        return float(value) if self.seconds else int(value)

    def json_schema(self):
        return {"type": "number", "exclusiveMinimum": 0} if self.seconds else {"type": "integer", "minimum": 1}


# -- the tables, declared: what a parsed leases scenario holds ------------------------
@dataclass(frozen=True)
class LeaseConsumerDef:
    """One ``[[consumers]]`` table: a durable consumer, its client and its schedule."""

    name: str = key(Name(), doc="the consumer's name (unique)")
    start: str | int = key(Position(), "beginning", doc='"beginning" | "end" | a seq (int; needs join_at > 0)')
    batch_limit: int = key(
        Limit(),
        DEFAULT_LIMITS["batch_limit"],
        doc=f"{BATCH_RANGE[0]} through {BATCH_RANGE[1]} ({_SEED}; {_OPEN}); default: leases.batch_limit (4)",
    )
    in_flight_limit: int = key(
        Limit(),
        DEFAULT_LIMITS["in_flight_limit"],
        doc=f"{IN_FLIGHT_RANGE[0]} through {IN_FLIGHT_RANGE[1]} ({_SEED}; {_OPEN}); "
        "default: leases.in_flight_limit (4)",
    )
    lease_seconds: float = key(
        Limit(seconds=True),
        DEFAULT_LIMITS["lease_seconds"],
        doc=f"{LEASE_RANGE[0]:g} through {LEASE_RANGE[1]:g} seconds ({_SEED}; {_OPEN}); "
        "default: leases.lease_seconds (60)",
    )
    duration: Dist = key(
        Distribution(),
        Dist("fixed", 0.01),
        doc='seconds >= 0, or {dist = "exponential", mean = 1.2}, ...: how long a worker '
        "works an event (it may outlast the lease)",
    )
    fail: float = key(
        Fraction("the chance that an attempt fails"), 0.0, doc="the chance that an attempt fails (the worker nacks)"
    )
    poison_every: int | None = key(
        IntAtLeast(1, "every event whose seq is a multiple of it fails on every attempt"),
        None,
        doc="optional: every event whose seq is a multiple of it fails on every attempt (dead-lettered on the 10th)",
    )
    nack_delay: float = key(Seconds(), 1.0, doc="seconds a nack asks to wait (<= leases.max_retry_delay)")
    poll_interval: float = key(Seconds(strict=True), 0.5, doc="seconds between the client's consume calls (> 0)")
    join_at: float = key(Seconds(), 0.0, before_until=True, doc="virtual seconds: when the consumer is created")
    retire_at: float | None = key(
        Seconds(), None, after="join_at", before_until=True, doc="optional: retired then (releases its retention fence)"
    )
    pull_mode: str = key(
        OneOf(PULL_MODES),
        "poll",
        doc='"poll": a pull every poll_interval; "wait": a broker client\'s fetch loop (pulls as workers '
        "end, waits up to poll_interval)",
    )
    in_progress_every: float | None = key(
        Seconds(strict=True), None, doc="optional: seconds between a worker's InProgress calls (extends its lease)"
    )
    poison_action: str = key(
        OneOf(POISON_ACTIONS), "nack", doc='a poison event is nacked ("nack") or terminated ("term": no redelivery)'
    )

    def poison(self):
        """``poison(lease)`` for the runtime: true for every ``poison_every``-th seq (None: never)."""
        every = self.poison_every
        if every is None:
            return None
        return lambda lease: lease.seq % every == 0

    def arguments(self) -> dict:
        """The keyword arguments of ``LeaseSimulation.register_consumer``."""
        d = self.duration
        return {
            "start": self.start,
            "batch_limit": self.batch_limit,
            "in_flight_limit": self.in_flight_limit,
            "lease_seconds": self.lease_seconds,
            "duration": d.a if d.law == "fixed" else d,
            "fail": self.fail,
            "poison": self.poison(),
            "nack_delay": self.nack_delay,
            "poll_interval": self.poll_interval,
            "pull_mode": self.pull_mode,
            "in_progress_every": self.in_progress_every,
            "poison_action": self.poison_action,
        }


def _consumer_rules(item: Item) -> None:
    seq_start_needs_join(item)
    config = item.reading["leases"]
    if "nack_delay" in item.raw and item.values.get("nack_delay") is not None:
        try:  # the check register_consumer makes, so that the two say the same
            check_nack_delay(item.raw["nack_delay"], config.max_retry_delay)
        except ValueError as exc:
            item.fail("nack_delay", str(exc).removeprefix("nack_delay "))
    _limits_rules(item, config)


def _limits_rules(item: Item, config: LeaseConfig) -> None:
    """A consumer's delivery limits: the config's for one left out, each given
    one checked against the config's ``limits`` (RiffDB's ranges, or the brokers')."""
    for k, default in config.defaults().items():
        if k not in item.raw:
            item.values[k] = default
    for k, (low, high) in ranges(config.limits).items():
        note = f" ({limits_note(k)})" if config.limits == "riffdb" else " (leases.limits = 'open')"
        v = item.values.get(k)
        if k in item.raw and v is not None and not low <= v <= high:
            what = (
                f"{low:g} through {high:g} seconds" if k == "lease_seconds" else f"an integer from {low} through {high}"
            )
            item.fail(k, f"must be {what}, got {item.raw[k]!r}{note}")
    if not item.failed:
        try:  # what the engine checks, should it check more than the declaration does
            check_limits(*(item.values[k] for k in DEFAULT_LIMITS), limits=config.limits)
        except ValueError as exc:
            item.fail("", str(exc))


@dataclass(frozen=True)
class Partitions(Validator):
    """A workload's partitions: a count (p0, p1, ...) or a list of distinct names; kept as an int or a tuple."""

    allowed = "a count (an integer >= 1: p0, p1, ...) or a list of partition names"

    def check(self, value):
        if isinstance(value, list):
            if not value or not all(isinstance(p, str) and p.strip() for p in value) or len(set(value)) != len(value):
                raise Invalid(f"a list must name distinct partitions (non-empty strings), got {value!r}")
            return tuple(value)
        if not is_whole(value) or value < 1:
            raise self.refuse(value)
        return value

    def json_schema(self):
        return {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "array", "items": {"type": "string", "pattern": r"\S"}, "minItems": 1, "uniqueItems": True},
            ]
        }


@dataclass(frozen=True)
class LeaseWorkload:
    """One ``[[workload]]`` table: events published at Poisson times, one event per commit."""

    rate: float = key(Rate("events"), doc="events per virtual second")
    partitions: int | tuple[str, ...] = key(Partitions(), 4, doc="a count (p0, p1, ...) or a list of names (default 4)")
    kind: str = key(Name(), "event", doc="optional: every event's kind")
    start: float = key(Seconds(), 0.0, doc="optional: when the publishers start, in virtual seconds")
    stop: float | None = key(
        Seconds(low=None, unit="virtual seconds"), None, after="start", doc="optional: when they stop"
    )

    def add_to(self, target) -> None:
        """Start these publishers in ``target``: a simulation or a wall-clock runtime."""
        target.add_workload(
            self.rate,
            partitions=self.partitions if isinstance(self.partitions, int) else list(self.partitions),
            kind=self.kind,
            start=self.start,
            stop=self.stop,
        )


@dataclass(frozen=True)
class LeaseAction:
    """One ``[[actions]]`` table: ``restore``, or ``seek`` of ``consumer`` to ``position``."""

    kind: str = key(
        OneOf(ACTION_KINDS),
        doc="restore: a new history incarnation (old lease tokens fail closed); "
        "seek: move a consumer's checkpoint (re-delivers, or skips)",
    )
    at: float = key(
        Seconds(unit="virtual seconds"),
        before_until=True,
        doc="the virtual second it happens",
        required="the virtual second it happens (a number >= 0)",
    )
    consumer: str | None = key(Name(), None, declared_in="consumers", doc="seek: the consumer (required)")
    position: str | int | None = key(Position(), None, doc='seek: "beginning" | "end" | a seq (default "beginning")')


def _action_rules(item: Item) -> None:
    if item.values.get("kind") != "seek":
        return
    if "consumer" not in item.raw:
        item.fail("consumer", f"is required ({Name.allowed})")
        return
    name, at = item.values.get("consumer"), item.values.get("at")
    c = next((c for c in item.reading["consumers"] if c.name == name), None)
    if c is None or at is None:
        return
    if at < c.join_at:
        item.fail("at", f"{name!r} joins at {c.join_at:g}; a seek must come after it, got {show(item.raw['at'])}")
    elif c.retire_at is not None and at >= c.retire_at:
        item.fail("at", f"{name!r} is retired at {c.retire_at:g} and cannot seek then; got {show(item.raw['at'])}")


class Actions(Array):
    """``[[actions]]``: tables of two shapes, told apart by their ``kind``."""

    def read_item(self, raw, where, reading):
        accepted = ", ".join(ACTION_KINDS)
        if not isinstance(raw, dict):
            reading.problems.add(where, f"must be a table, got {kind(raw)}")
            return None
        what = raw.get("kind")
        if "kind" not in raw:
            reading.problems.add(f"{where}.kind", f"is required; an action is one of: {accepted}")
            return None
        if what == "retire":
            reading.problems.add(
                f"{where}.kind",
                f"'retire' is set on the consumer: consumers[i].retire_at = seconds; an action is one of: {accepted}",
            )
            return None
        if not isinstance(what, str) or what not in ACTION_KINDS:
            reading.problems.add(f"{where}.kind", f"must be one of: {accepted}; got {show(what)}")
            return None
        return read_table(
            LeaseAction,
            raw,
            where,
            reading,
            only=_ACTION_KEYS[what],
            note=f"for {what!r}",
            rules=_action_rules,
            make=_seek_from_the_beginning,
        )

    def json_schema(self):
        variants = [
            {
                **table_schema(LeaseAction, only=keys),
                "title": what,
                "properties": {**table_schema(LeaseAction, only=keys)["properties"], "kind": {"const": what}},
                "required": ["kind", "at", *(("consumer",) if what == "seek" else ())],
            }
            for what, keys in _ACTION_KEYS.items()
        ]
        return kinds_schema(self.doc, ACTION_KINDS, variants)


def _seek_from_the_beginning(action: LeaseAction) -> LeaseAction:
    if action.kind == "seek" and action.position is None:
        return dataclasses.replace(action, position="beginning")
    return action


FAULTS = FaultRules(
    label="a leases scenario",
    accepted=LEASE_FAULT_KINDS,
    refused=_OTHER_FAULTS,
    renames={"slow_workflow": {"consumer": "workflow"}},
    refs={"consumer": "consumers"},
    required={"consumer": "the consumer whose workers are slowed"},
    points=CRASH_POINTS,
    points_label="the leases design's points",
)


def _ranges_schema(limits: str) -> dict:
    """The delivery limits' ranges under ``limits``, as JSON Schema properties."""
    out = {}
    for k, (low, high) in ranges(limits).items():
        out[k] = {"minimum": low, "maximum": high}
    return out


# a consumer's limits (and [leases]' defaults of them) are in RiffDB's ranges unless [leases] limits = "open"
_OPEN_LIMITS = {"properties": {"leases": {"properties": {"limits": {"const": "open"}}, "required": ["limits"]}}}
LIMITS_RULE = {
    "if": {**_OPEN_LIMITS, "required": ["leases"]},
    **{
        branch: {
            "properties": {
                "leases": {"properties": _ranges_schema(limits)},
                "consumers": {"items": {"properties": _ranges_schema(limits)}},
            }
        }
        for branch, limits in (("then", "open"), ("else", "riffdb"))
    },
}

SCHEMA = Schema(
    design="leases",
    doc=__doc__,
    title="leased durable consumers with ack/nack, dead letters and retention fences (RiffDB)",
    parts=(
        Settings("leases", LeaseConfig, doc="any fanoutsim.designs.leases.LeaseConfig field", choices=CHOICES),
        Array(
            "consumers",
            LeaseConsumerDef,
            unique="name",
            noun="consumer",
            rules=_consumer_rules,
            required="at least one [[consumers]] table (a name, and optional start, batch_limit, "
            "in_flight_limit, lease_seconds, duration, ...)",
        ),
        Array("workload", LeaseWorkload),
        Actions("actions", LeaseAction, doc="optional: administrative steps at a virtual time"),
        Faults(FAULTS),
    ),
    rules=(LIMITS_RULE,),
)
"""The leases design's scenario files, declared once."""


@dataclass(frozen=True)
class LeaseScenario(ScenarioRun):
    """A checked leases scenario: build a :class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`
    from it, or run it."""

    config: LeaseConfig = LeaseConfig()
    consumers: tuple[LeaseConsumerDef, ...] = ()
    workloads: tuple[LeaseWorkload, ...] = ()
    actions: tuple[LeaseAction, ...] = ()
    design = "leases"  # a class attribute, as Scenario.design

    def build(self, seed: int | None = None, store=None, until: float | None = None):
        """A LeaseSimulation at virtual time 0: the consumers that join at 0
        created, later joins, retirements, actions and the workloads scheduled,
        nothing run yet. ``seed``, ``store`` and ``until`` override the file's
        ``[run]`` values."""
        from fanoutsim.designs.leases.simulation import LeaseSimulation

        sim, _ = self.new_simulation(LeaseSimulation, seed, store, until)
        for i, c in enumerate(self.consumers):
            if c.join_at > 0:
                sim.env.process(self.when_up(sim, c.join_at, self._register, i, c))
            else:
                self._register(sim, i, c)
            if c.retire_at is not None:
                sim.env.process(self.when_up(sim, c.retire_at, _retire, c.name, ready=_joined(c.name)))
        for i, a in enumerate(self.actions):
            sim.env.process(self.when_up(sim, a.at, self._act, i, a, ready=_joined(a.consumer)))
        for w in self.workloads:
            w.add_to(sim)
        return sim

    def _register(self, sim, i: int, c: LeaseConsumerDef) -> None:
        with refused_at_run(self.source, f"consumers[{i}].start", sim):  # an int start outside the log now
            sim.register_consumer(c.name, **c.arguments())

    def _act(self, sim, i: int, a: LeaseAction) -> None:
        if a.kind == "restore":
            sim.restore()
            return
        sim.env.process(self._seek(sim, i, a))

    def _seek(self, sim, i: int, a: LeaseAction):
        with refused_at_run(self.source, f"actions[{i}].position", sim):  # an int position outside the log now
            yield sim.administer("seek", a.consumer, a.position)


def _retire(sim, consumer: str) -> None:
    sim.administer("retire", consumer)


def _joined(consumer: str | None):
    """``ready`` for a step on ``consumer``, if it names one: the consumer has
    joined (a crash may have delayed its join)."""
    return None if consumer is None else (lambda sim: consumer in sim.clients)


# -- parsing ---------------------------------------------------------------------
def parse_lease_scenario(data: dict, *, source: str = "<scenario>", default_name: str = "scenario") -> LeaseScenario:
    """Check a parsed TOML document of the leases design and make a LeaseScenario;
    raises :class:`ScenarioError` listing every problem."""
    r = SCHEMA.read(data, source=source, default_name=default_name)
    return LeaseScenario(
        **r.header(),
        config=r["leases"],
        consumers=r["consumers"],
        workloads=r["workload"],
        actions=r["actions"],
        faults=r["faults"],
    )


parse_scenario = parse_lease_scenario  # the package template's name (every design's parser)
