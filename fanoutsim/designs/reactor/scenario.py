"""Scenario files: a whole simulated setup in one TOML file.

A scenario names the run (seed, how long, which store), the scheduler's
settings, the workflows and their run times, the subscriptions and the
workloads that fire the reactors::

    name = "default"                 # optional, defaults to the file's stem
    description = "..."              # optional
    design = "reactor"               # optional: "reactor" (this schema, the default),
                                     # "outbox" (see fanoutsim.designs.outbox.scenario) or
                                     # "leases" (see fanoutsim.designs.leases.scenario)
    [run]
    seed = 0                         # int, default 0
    until = 3600.0                   # virtual seconds, > 0 (required)
    store = "memory"                 # "memory" | "duckdb" | a path ending .duckdb
    start = "2026-01-01T00:00:00Z"   # optional: the wall time virtual 0 stands for
    [config]                         # any fanoutsim.SchedulerConfig field
    reactor_poll_interval = 1.0
    [[workflows]]                    # optional
    name = "incident_response"
    duration = 0.05                  # seconds >= 0, or {dist="exponential", mean=0.2}
                                     # or {dist="uniform", low=0.01, high=0.1} (any law
                                     # of fanoutsim.kernel.dist: fixed, exponential, uniform, lognormal)
    [[subscriptions]]
    reactor = "pricing_reactor"
    workflow = "incident_response"
    tenant = "acme"                  # optional, default "public"
    when = "payload.quote.price > 100"   # optional CEL filter
    [[workload]]
    reactor = "pricing_reactor"
    tenant = "acme"                  # optional, default "public"
    rate = 1.0                       # firings per virtual second
    payload = "quote"                # a fanoutsim.designs.reactor.workload.GENERATORS name, default "quote"
    start = 0.0                      # optional
    stop = 1800.0                    # optional
    [[workload]]                     # a recorded workload (fanoutsim.designs.reactor.replay)
    replay = "quotes-day.parquet"   # relative to this file; .parquet or .csv
    reactor = "pricing_reactor"
    tenant_column = "tenant"         # optional; default: every row in "public"
    speed = 60.0                     # optional: times faster than recorded, default 1
    start = 50400.0                  # optional: the recording's window, in its seconds
    stop = 54000.0                   # optional

:func:`fanoutsim.scenario.load_scenario` reads and checks the *whole* file
before anything is built, and reports every problem it finds in one
:class:`~fanoutsim.kernel.scenario.ScenarioError` whose message names the file,
the key path of each problem (``run.until``, ``config.prune_policy``,
``subscriptions[1].when``; array indexes count from 0) and what is allowed
there. :func:`load_scenario` here reads reactor files only.

Rules beyond the types: workflow names are unique; a subscription triple
(reactor, workflow, tenant) appears once; when any ``[[workflows]]`` are
declared, every subscription must name one of them (an undeclared workflow
would run as an instant no-op, which is almost always a typo). With no
``[[workflows]]`` at all, every workflow is such a no-op. A relative ``.duckdb``
store path is relative to the current directory, and the file must not exist
yet: a scenario always starts from empty tables.

``design = "outbox"`` makes the file a scenario of the transactional outbox
(seed 002) instead: ``[run]``, ``[outbox]``, ``[[consumers]]``, ``[[workload]]``
and ``[[faults]]``, checked by :mod:`fanoutsim.designs.outbox.scenario`;
``design = "leases"`` one of leased durable consumers (seed 003), checked by
:mod:`fanoutsim.designs.leases.scenario`. :func:`fanoutsim.scenario.load_scenario`
returns the scenario of the design a file names (``.design``: ``"reactor"``
for a :class:`Scenario`).

``[[faults]]`` tables make the fault plan (see :mod:`fanoutsim.designs.reactor.faults`
for the kinds; a reactor scenario accepts all but the outbox's ``backfill`` and
leases' ``restore_backup``, and ``crash_at_point`` takes a reactor crash point); each names its ``kind``::

    [[faults]]
    kind = "crash_randomly"
    mean_gap = 3600.0
    downtime = {dist = "exponential", mean = 20}

The schema below (:data:`SCHEMA`) declares all of this once: the checks, the
defaults, the docs and ``data/schemas/reactor.schema.json``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fanoutsim.designs.reactor.config import POLICIES, SchedulerConfig
from fanoutsim.designs.reactor.faults import FAULTS as _FAULTS
from fanoutsim.designs.reactor.predicate import ALLOWED_VARIABLES, InvalidPredicate, compile_predicate
from fanoutsim.designs.reactor.subscriptions import undeclared_workflow
from fanoutsim.designs.reactor.workload import GENERATORS, Workload
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.scenario import (
    Array,
    FaultRules,
    Faults,
    Item,
    Reading,
    ScenarioError,
    Schema,
    Settings,
    key,
    read_scenario_file,
)
from fanoutsim.kernel.scenariorun import ScenarioRun
from fanoutsim.kernel.store import Store
from fanoutsim.kernel.validate import (
    Distribution,
    Invalid,
    Name,
    OneOf,
    Rate,
    Seconds,
    Validator,
    kind,
)

__all__ = [
    "ScenarioError",
    "Scenario",
    "WorkflowDef",
    "SubscriptionDef",
    "load_scenario",
    "parse_scenario",
    "parse_reactor_scenario",
    "SCHEMA",
]


# -- the tables, declared -------------------------------------------------------------
@dataclass(frozen=True)
class CelFilter(Validator):
    """A subscription's ``when``: a CEL expression over the firing."""

    allowed = f"a CEL expression string over {', '.join(ALLOWED_VARIABLES)}"

    def check(self, value):
        if not isinstance(value, str):
            raise Invalid(f"must be {self.allowed}; got {kind(value)}")
        try:
            compile_predicate(value)
        except InvalidPredicate as exc:
            raise Invalid(_cel_message(value, str(exc))) from None
        return value

    def json_schema(self):
        return {"type": "string"}


def _cel_message(expr: str, message: str) -> str:
    """InvalidPredicate's message, with a CEL parse error's caret kept under its column."""
    marker = f"predicate {expr!r} is not valid CEL: "
    if message.startswith(marker):
        detail = message[len(marker) :].strip("\n")
        return (
            f"{expr!r} is not valid CEL (a boolean expression over the variables "
            f"{', '.join(ALLOWED_VARIABLES)}):\n{detail}"
        )
    return message


_DURATION = (
    'its run time: seconds >= 0, or {dist="exponential", mean=0.2} or {dist="uniform", low=0.01, '
    "high=0.1} (any law of fanoutsim.kernel.dist: fixed, exponential, uniform, lognormal); default 0"
)


@dataclass(frozen=True)
class WorkflowDef:
    """One ``[[workflows]]`` table: a workflow and its run time."""

    name: str = key(Name(), doc="the workflow's name (unique)")
    duration: Dist = key(Distribution(), Dist("fixed", 0.0), doc=_DURATION)


@dataclass(frozen=True)
class SubscriptionDef:
    """One ``[[subscriptions]]`` table: a workflow run for each firing of a reactor in a tenant."""

    reactor: str = key(Name(), doc="the reactor whose firings start the workflow")
    workflow: str = key(Name(), doc="the workflow to run (one of [[workflows]], when any are declared)")
    tenant: str = key(Name(), "public", doc='the tenant, default "public"')
    when: str | None = key(
        CelFilter(),
        None,
        doc=f"optional CEL filter over {', '.join(ALLOWED_VARIABLES)}, such as payload.quote.price > 100",
    )


@dataclass(frozen=True, kw_only=True)
class WorkloadTable:
    """One ``[[workload]]`` table: Poisson firings of a reactor (or, with ``replay``, a recording)."""

    reactor: str = key(Name(), doc="the reactor fired")
    tenant: str = key(Name(), "public", doc='the tenant, default "public"')
    rate: float = key(Rate("firings"), doc="firings per virtual second")
    payload: str = key(
        OneOf(tuple(GENERATORS)), "quote", doc='a fanoutsim.designs.reactor.workload.GENERATORS name, default "quote"'
    )
    start: float = key(Seconds(unit="virtual seconds"), 0.0, doc="optional: when the firings start")
    stop: float | None = key(
        Seconds(low=None, unit="virtual seconds"), None, after="start", doc="optional: when they stop"
    )


@dataclass(frozen=True)
class ReplayTable:
    """A ``[[workload]]`` table with ``replay``: a recorded workload (fanoutsim.designs.reactor.replay),
    read by :func:`fanoutsim.designs.reactor.replay.parse_replay`."""

    replay: str = key(Name(), doc="the recording: a .parquet or .csv file, relative to this file")
    reactor: str = key(Name(), doc="the reactor fired once per row")
    tenant_column: str | None = key(
        Name(), None, doc='optional: the column of each row\'s tenant; default: every row in "public"'
    )
    speed: float = key(Seconds(strict=True, unit="times"), 1.0, doc="optional: times faster than recorded, default 1")
    start: float = key(Seconds(), 0.0, doc="optional: the recording's window, in its seconds")
    stop: float | None = key(Seconds(low=None), None, doc="optional: the window's end, in the recording's seconds")


class WorkloadArray(Array):
    """``[[workload]]``: generated tables (:class:`WorkloadTable`, kept as
    :class:`~fanoutsim.designs.reactor.workload.Workload`) and recordings
    (:class:`ReplayTable`, kept as a ``ReplaySpec``), in one array."""

    def read_item(self, raw, where, reading):
        if not (isinstance(raw, dict) and "replay" in raw):
            return super().read_item(raw, where, reading)
        from fanoutsim.designs.reactor.replay import parse_replay

        base = Path(reading.source).resolve().parent if os.path.isfile(reading.source) else Path.cwd()
        item = Item(where, raw, reading)
        item.result, problems = parse_replay(raw, where, base)
        for path, message in problems:
            reading.problems.add(path, message)
        return item

    def json_schema(self):
        out = super().json_schema()
        replay = Array("workload", ReplayTable).json_schema()["items"]
        out["items"] = {"anyOf": [out["items"], {**replay, "description": ReplayTable.__doc__.split("\n")[0]}]}
        return out


def _declared_workflow(item: Item) -> None:
    """The API's rule for a subscription's workflow, with the API's message
    (:func:`fanoutsim.designs.reactor.subscriptions.undeclared_workflow`)."""
    workflow = item.values.get("workflow")
    if workflow is None:
        return
    problem = undeclared_workflow(workflow, item.reading.declared.get("workflows", ()), " in [[workflows]]")
    if problem is not None:
        item.fail("workflow", problem)


def _name_reactors(items: list[Item], reading: Reading) -> None:
    """The reactors a table names join ``reading.declared["reactors"]``: a
    reactor scenario declares its reactors by naming them, in [[subscriptions]]
    and [[workload]], and a fault's ``reactor`` must be one of them."""
    named = {item.raw.get("reactor") for item in items if isinstance(item.raw, dict)}
    known = set(reading.declared.get("reactors", ()))
    reading.declared["reactors"] = sorted(known | {r for r in named if isinstance(r, str) and r.strip()})


def _no_duplicate_subscriptions(items: list[Item], reading: Reading) -> None:
    _name_reactors(items, reading)
    seen: dict[tuple, str] = {}
    for item in items:
        s = item.result
        if s is None:
            continue
        triple = (s.reactor, s.workflow, s.tenant)
        if triple in seen:
            item.fail(
                "",
                f"subscription of {s.workflow!r} to {s.reactor!r} in tenant {s.tenant!r} "
                f"is already declared at {seen[triple]}",
            )
            item.result = None
        else:
            seen[triple] = item.where


# fault kinds of other designs only, and why the reactor refuses them
_OTHER_DESIGNS_FAULTS = {
    "restore_backup": "leases design (the reactor model has no backup and restore)",
    "backfill": "outbox design (the reactor model has no connection pool or listener)",
}

FAULTS = FaultRules(
    label="a reactor scenario",
    accepted=_FAULTS.kind_names,
    refused=_OTHER_DESIGNS_FAULTS,
    points=_FAULTS.points,
    points_label="the reactor design's points",
    refs={"reactor": "reactors"},
    ref_labels={"reactor": "a reactor of this scenario; the reactors its [[subscriptions]] and [[workload]] name"},
)

SCHEMA = Schema(
    design="reactor",
    default=True,
    doc=__doc__,
    title="reactor -> workflow subscriptions with timestamp watermarks and CEL filters (Cloacina)",
    parts=(
        Settings(
            "config",
            SchedulerConfig,
            choices=POLICIES,
            doc="any fanoutsim.SchedulerConfig field (see fanoutsim.designs.reactor.config)",
        ),
        Array("workflows", WorkflowDef, unique="name", noun="workflow"),
        Array("subscriptions", SubscriptionDef, rules=_declared_workflow, check=_no_duplicate_subscriptions),
        WorkloadArray(
            "workload",
            WorkloadTable,
            make=lambda t: Workload(t.reactor, t.rate, t.tenant, t.payload, t.start, t.stop),
            check=_name_reactors,
        ),
        Faults(FAULTS),
    ),
)
"""The reactor design's scenario files, declared once."""


# -- what a parsed scenario holds ------------------------------------------------------
@dataclass(frozen=True)
class Scenario(ScenarioRun):
    """A checked scenario: build a :class:`fanoutsim.Simulation` from it, or run it."""

    config: SchedulerConfig = SchedulerConfig()
    workflows: tuple[WorkflowDef, ...] = ()
    subscriptions: tuple[SubscriptionDef, ...] = ()
    workloads: tuple[Workload, ...] = ()
    replays: tuple = ()  # fanoutsim.designs.reactor.replay.ReplaySpec, from [[workload]] replay = "..."
    design = "reactor"  # a class attribute, not a field: which design the file describes

    def build(self, seed: int | None = None, store: str | Store | None = None, until: float | None = None):
        """A Simulation with the workflows registered, the subscriptions made
        and the workloads added, at virtual time 0 with nothing run yet.

        ``seed``, ``store`` and ``until`` override the file's ``[run]`` values;
        they are checked like the file's (``until`` is only checked here: it is
        used by :meth:`run`)."""
        from fanoutsim.designs.reactor.simulation import Simulation

        sim, _ = self.new_simulation(Simulation, seed, store, until)
        for wf in self.workflows:
            d = wf.duration  # a fixed time as a plain number, a law as the callable Dist
            sim.runner.register_workflow(wf.name, duration=d.a if d.law == "fixed" else d)
        for sub in self.subscriptions:
            sim.runner.subscribe_workflow_to_reactor(sub.reactor, sub.workflow, sub.tenant, when=sub.when)
        for w in self.workloads:
            sim.add_workload(w.reactor, w.rate, w.tenant, payload=w.payload, start=w.start, stop=w.stop)
        for rp in self.replays:
            rp.add_to(sim)
        if self.faults is not None:
            try:
                sim.check_plan()  # the workflows and subscriptions it names exist
            except ValueError as exc:
                raise ScenarioError(self.source, [("faults", str(exc))]) from None
        return sim


# -- parsing ---------------------------------------------------------------------
def parse_reactor_scenario(data: dict, *, source: str = "<scenario>", default_name: str = "scenario") -> Scenario:
    """Check a parsed TOML document of the reactor design and make a Scenario;
    raises :class:`ScenarioError` listing every problem."""
    r = SCHEMA.read(data, source=source, default_name=default_name)
    workload = r["workload"]
    return Scenario(
        **r.header(),
        config=r["config"],
        workflows=r["workflows"],
        subscriptions=r["subscriptions"],
        faults=r["faults"],
        workloads=tuple(w for w in workload if isinstance(w, Workload)),
        replays=tuple(w for w in workload if not isinstance(w, Workload)),
    )


parse_scenario = parse_reactor_scenario


def load_scenario(path: str | os.PathLike, *, design: str | None = "reactor") -> Scenario:
    """Read and check a scenario file of the reactor design; a file of another
    design is refused, naming its ``design`` key (:func:`fanoutsim.scenario.load_scenario`
    reads a file of any design)."""
    if design not in (None, "reactor"):
        raise ValueError(f"this reads reactor scenarios; for design = {design!r} use fanoutsim.scenario.load_scenario")
    source = os.fspath(path)
    return parse_reactor_scenario(read_scenario_file(source), source=source, default_name=Path(source).stem)
