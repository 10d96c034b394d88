"""Scenario files: a whole simulated setup in one TOML file.

A scenario names the run (seed, how long, which store), the scheduler's
settings, the workflows and their run times, the subscriptions and the
workloads that fire the reactors::

    name = "default"                 # optional, defaults to the file's stem
    description = "..."              # optional
    design = "reactor"               # optional: "reactor" (this schema, the default),
                                     # "outbox" (see fanoutsim.outbox.scenario) or
                                     # "leases" (see fanoutsim.leases.scenario)
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
                                     # of fanoutsim.dist: fixed, exponential, uniform, lognormal)
    [[subscriptions]]
    reactor = "pricing_reactor"
    workflow = "incident_response"
    tenant = "acme"                  # optional, default "public"
    when = "payload.quote.price > 100"   # optional CEL filter
    [[workload]]
    reactor = "pricing_reactor"
    tenant = "acme"                  # optional, default "public"
    rate = 1.0                       # firings per virtual second
    payload = "quote"                # a fanoutsim.workload.GENERATORS name, default "quote"
    start = 0.0                      # optional
    stop = 1800.0                    # optional
    [[workload]]                     # a recorded workload (fanoutsim.replay)
    replay = "../workloads/quotes-day.parquet"   # relative to this file; .parquet or .csv
    reactor = "pricing_reactor"
    tenant_column = "tenant"         # optional; default: every row in "public"
    speed = 60.0                     # optional: times faster than recorded, default 1
    start = 50400.0                  # optional: the recording's window, in its seconds
    stop = 54000.0                   # optional

:func:`load_scenario` reads and checks the *whole* file before anything is
built, and reports every problem it finds in one :class:`ScenarioError` whose
message names the file, the key path of each problem (``run.until``,
``config.prune_policy``, ``subscriptions[1].when``; array indexes count from 0)
and what is allowed there.

Rules beyond the types: workflow names are unique; a subscription triple
(reactor, workflow, tenant) appears once; when any ``[[workflows]]`` are
declared, every subscription must name one of them (an undeclared workflow
would run as an instant no-op, which is almost always a typo). With no
``[[workflows]]`` at all, every workflow is such a no-op. A relative ``.duckdb``
store path is relative to the current directory, and the file must not exist
yet: a scenario always starts from empty tables.

``design = "outbox"`` makes the file a scenario of the transactional outbox
(seed 002) instead: ``[run]``, ``[outbox]``, ``[[consumers]]``, ``[[workload]]``
and ``[[faults]]``, checked by :mod:`fanoutsim.outbox.scenario`; then
:func:`load_scenario` returns an :class:`~fanoutsim.outbox.scenario.OutboxScenario`
(``.design == "outbox"``; a :class:`Scenario` has ``.design == "reactor"``).

``design = "leases"`` makes it a scenario of leased durable consumers (seed
003): ``[run]``, ``[leases]``, ``[[consumers]]``, ``[[workload]]``,
``[[actions]]`` and ``[[faults]]``, checked by :mod:`fanoutsim.leases.scenario`,
which makes a :class:`~fanoutsim.leases.scenario.LeaseScenario`
(``.design == "leases"``).

``[[faults]]`` tables make the fault plan (see :mod:`fanoutsim.faults.plan`
for the kinds); each names its ``kind``::

    [[faults]]
    kind = "crash_randomly"
    mean_gap = 3600.0
    downtime = {dist = "exponential", mean = 20}
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .config import SchedulerConfig
from .dist import Dist, parse_dist
from .predicate import ALLOWED_VARIABLES, InvalidPredicate, compile_predicate
from .reactor.subscriptions import undeclared_workflow
from .store import Store
from .timeutil import parse_start
from .workload import GENERATORS, Workload

__all__ = [
    "ScenarioError", "Scenario", "WorkflowDef", "SubscriptionDef", "load_scenario", "parse_scenario",
    "DESIGNS",
]

DESIGNS = ("reactor", "outbox", "leases")  # what ``design = ...`` may name


class ScenarioError(ValueError):
    """A scenario that cannot be loaded or built.

    ``problems`` is a list of ``(key path, message)``; ``source`` the file.
    """

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        if len(self.problems) == 1:
            path, msg = self.problems[0]
            text = f"{source}: {path}: {msg}" if path else f"{source}: {msg}"
        else:
            lines = [f"{source}: {len(self.problems)} problems:"]
            for path, msg in self.problems:
                lines.append(f"  {path}: {msg}".replace("\n", "\n    ") if path else f"  {msg}")
            text = "\n".join(lines)
        super().__init__(text)
        self.text = text
        # args as the constructor takes them, so a copy (SimPy re-raises a failed
        # process's exception as ``type(e)(*e.args)``) or a pickle is the same error
        self.args = (source, self.problems)

    def __str__(self) -> str:
        return self.text


# -- what a parsed scenario holds ------------------------------------------------
@dataclass(frozen=True)
class WorkflowDef:
    name: str
    duration: Dist = Dist("fixed", 0.0)  # a callable drawing seconds from a random.Random


@dataclass(frozen=True)
class SubscriptionDef:
    reactor: str
    workflow: str
    tenant: str = "public"
    when: str | None = None


@dataclass(frozen=True)
class Scenario:
    """A checked scenario: build a :class:`fanoutsim.Simulation` from it, or run it."""

    name: str
    source: str
    until: float
    seed: int = 0
    store: str = "memory"
    start: str | datetime | None = None
    description: str = ""
    config: SchedulerConfig = SchedulerConfig()
    workflows: tuple[WorkflowDef, ...] = ()
    subscriptions: tuple[SubscriptionDef, ...] = ()
    workloads: tuple[Workload, ...] = ()
    faults: Any = None  # a FaultPlan, from [[faults]]
    replays: tuple = ()  # fanoutsim.replay.ReplaySpec, from [[workload]] replay = "..."
    design = "reactor"  # a class attribute, not a field: which design the file describes

    def build(self, seed: int | None = None, store: "str | Store | None" = None,
              until: float | None = None):
        """A Simulation with the workflows registered, the subscriptions made
        and the workloads added, at virtual time 0 with nothing run yet.

        ``seed``, ``store`` and ``until`` override the file's ``[run]`` values;
        they are checked like the file's (``until`` is only checked here: it is
        used by :meth:`run`)."""
        from .runtime import Simulation

        seed, store, _ = self._overrides(seed, store, until)
        refuse_existing_store(self.source, store)
        sim = Simulation(self.config, seed=seed, store=store, start=self.start, faults=self.faults)
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

    def run(self, seed: int | None = None, until: float | None = None,
            store: "str | Store | None" = None):
        """Build, then run the virtual clock to ``until`` (the file's by default)."""
        _, _, until = self._overrides(seed, store, until)
        sim = self.build(seed=seed, store=store, until=until)
        sim.run(until)
        return sim

    def _overrides(self, seed, store, until) -> tuple[int, "str | Store", float]:
        return check_overrides(self, seed, store, until)


def check_overrides(scenario, seed, store, until) -> tuple[int, "str | Store", float]:
    """``seed``, ``store`` and ``until`` given to a scenario's build or run,
    checked like the file's ``[run]`` values; None means the file's."""
    errors = _Errors()
    if seed is None:
        seed = scenario.seed
    else:
        seed = _check_seed(seed, "run.seed", errors, " (override)")
    if until is None:
        until = scenario.until
    else:
        until = _check_until(until, "run.until", errors, " (override)")
    if store is None:
        store = scenario.store
    elif not isinstance(store, Store):
        store = _check_store(store, "run.store", errors, " (override)")
    errors.raise_if_any(scenario.source)
    return seed, store, until


def refuse_existing_store(source: str, store) -> None:
    """A scenario starts from empty tables: an existing .duckdb file is refused, untouched."""
    if isinstance(store, str) and store.endswith(".duckdb") and os.path.exists(store):
        raise ScenarioError(source, [(
            "run.store",
            f"{store!r} already exists; a scenario starts from empty tables, "
            "so delete the file or choose another path",
        )])


# -- loading -------------------------------------------------------------------
def load_scenario(path: str | os.PathLike, *, design: str | None = None):
    """Read and check a scenario file; raises :class:`ScenarioError`.

    Returns a :class:`Scenario`, an
    :class:`~fanoutsim.outbox.scenario.OutboxScenario` for a file with
    ``design = "outbox"``, or a :class:`~fanoutsim.leases.scenario.LeaseScenario`
    for ``design = "leases"``. ``design``: the design the caller needs; a file of
    another design is refused with an error naming its ``design`` key."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ScenarioError(source, [("", "no such scenario file")]) from None
    except IsADirectoryError:
        raise ScenarioError(source, [("", "is a directory, not a scenario file")]) from None
    except OSError as exc:
        raise ScenarioError(source, [("", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(source, [("", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else "TOML"
        what = msg[: m.start()].strip() if m else msg
        raise ScenarioError(source, [(where, f"TOML syntax error: {what}")]) from None
    scenario = parse_scenario(data, source=source, default_name=Path(source).stem)
    if design is not None and scenario.design != design:
        raise ScenarioError(source, [("design", (
            f"this needs a scenario of the {design} design (design = {design!r}); "
            f"the file describes the {scenario.design} design (design = {scenario.design!r})"))])
    return scenario


def parse_scenario(data: dict, *, source: str = "<scenario>", default_name: str = "scenario"):
    """Check an already-parsed TOML document (a dict) and make a Scenario
    (an :class:`~fanoutsim.outbox.scenario.OutboxScenario` for ``design = "outbox"``,
    a :class:`~fanoutsim.leases.scenario.LeaseScenario` for ``design = "leases"``)."""
    errors = _Errors()
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", f"a scenario must be a TOML document (table), got {_kind(data)}")])
    design = parse_design(data, errors)
    if design == "outbox":
        from .outbox.scenario import parse_outbox_scenario

        return parse_outbox_scenario(data, source=source, default_name=default_name, errors=errors)
    if design == "leases":
        from .leases.scenario import parse_lease_scenario

        return parse_lease_scenario(data, source=source, default_name=default_name, errors=errors)
    unknown_top_keys(data, _TOP_KEYS, {**dict.fromkeys(_OUTBOX_ONLY_KEYS, "outbox"),
                                       **dict.fromkeys(_LEASES_ONLY_KEYS, "leases")}, "outbox", errors)

    name, description = parse_header(data, default_name, errors)
    seed, until, store, start = parse_run(data, errors)

    config = _parse_config(_table(data, "config", errors), errors)
    wf_items = _array(data, "workflows", errors)
    workflows = _parse_workflows(wf_items, errors)
    # every name declared, also of workflows with another problem (reported already)
    declared = sorted({item["name"] for item in wf_items or ()
                       if isinstance(item, dict) and isinstance(item.get("name"), str)})
    subscriptions = _parse_subscriptions(_array(data, "subscriptions", errors), declared, errors)
    wl_items = _array(data, "workload", errors)
    workloads = _parse_workloads(wl_items, errors)
    replays = _parse_replays(wl_items, source, errors)
    faults = _parse_faults(data.get("faults"), errors) if "faults" in data else None

    errors.raise_if_any(source)
    return Scenario(
        name=name, source=source, until=until, seed=seed, store=store, start=start,
        description=description, config=config, workflows=workflows,
        subscriptions=subscriptions, workloads=workloads, faults=faults, replays=replays,
    )


# -- the parts -------------------------------------------------------------------
_TOP_KEYS = ("name", "description", "run", "config", "workflows", "subscriptions", "workload", "faults",
             "design")
_OUTBOX_ONLY_KEYS = ("outbox", "consumers")    # tables only an outbox scenario has
_REACTOR_ONLY_KEYS = ("config", "workflows", "subscriptions")  # ... only a reactor scenario has
_LEASES_ONLY_KEYS = ("leases", "actions")      # ... only a leases scenario has


def parse_design(data: dict, errors: "_Errors") -> str:
    """The ``design`` key: "reactor" (also when absent), "outbox" or "leases". A
    bad value is reported, and the file is then checked as the design its tables
    suggest (``[leases]`` or ``[[actions]]``: leases; ``[outbox]`` or
    ``[[consumers]]``: outbox), so every problem shows at once."""
    if "design" not in data:
        return "reactor"
    value = data["design"]
    if isinstance(value, str) and value in DESIGNS:
        return value
    guess = ("leases" if any(k in data for k in _LEASES_ONLY_KEYS)
             else "outbox" if any(k in data for k in _OUTBOX_ONLY_KEYS) else "reactor")
    errors.add("design", f"must be one of {', '.join(map(repr, DESIGNS))}, got {_show(value)} "
                         f"(the rest of the file is checked as the {guess} design)")
    return guess


def unknown_top_keys(data: dict, allowed, other_keys, other_design: str, errors: "_Errors") -> None:
    """Unknown top-level keys; one that belongs to another design says so.
    ``other_keys``: the keys of ``other_design``, or a dict key -> the design it
    belongs to (then ``other_design`` is not used)."""
    for key in data:
        if key in allowed:
            continue
        hint = ""
        if key in other_keys:
            design = other_keys[key] if isinstance(other_keys, dict) else other_design
            spelled = f"[[{key}]]" if isinstance(data[key], list) else f"[{key}]"
            hint = (f" ({spelled} belongs to a scenario of the {design} design: "
                    f"set design = {design!r} to use it)")
        errors.add(key, f"unknown key; allowed top-level keys: {', '.join(allowed)}{hint}")


def parse_header(data: dict, default_name: str, errors: "_Errors") -> tuple[str | None, str]:
    """``name`` (default: the file's stem) and ``description``."""
    name = data.get("name", default_name)
    if "name" in data:
        name = _check_str(name, "name", errors)
        if isinstance(name, str) and not _NAME_RE.fullmatch(name):
            errors.add("name", f"must be letters, digits, '.', '_' or '-' (it names the output folder), "
                               f"got {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        errors.add("description", f"must be a string, got {_kind(description)}")
        description = ""
    return name, description


def parse_run(data: dict, errors: "_Errors") -> tuple[int, float | None, str, Any]:
    """The ``[run]`` table: ``(seed, until, store, start)``."""
    run = _table(data, "run", errors, required=True)
    seed, until, store, start = 0, None, "memory", None
    if run is not None:
        _unknown_keys(run, _RUN_KEYS, "run", errors)
        if "seed" in run:
            seed = _check_seed(run["seed"], "run.seed", errors)
        if "until" in run:
            until = _check_until(run["until"], "run.until", errors)
        else:
            errors.add("run.until", "is required: the virtual seconds to run for (a number > 0)")
        if "store" in run:
            store = _check_store(run["store"], "run.store", errors)
        if "start" in run:
            start = _check_start(run["start"], "run.start", errors)
    return seed, until, store, start
_RUN_KEYS = ("seed", "until", "store", "start")
_WORKFLOW_KEYS = ("name", "duration")
_SUBSCRIPTION_KEYS = ("reactor", "workflow", "tenant", "when")
_WORKLOAD_KEYS = ("reactor", "tenant", "rate", "payload", "start", "stop")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _parse_faults(value: Any, errors: "_Errors") -> Any:
    """``[[faults]]`` tables become a :class:`~fanoutsim.faults.FaultPlan`
    (passed to ``Simulation(faults=...)`` by :meth:`Scenario.build`)."""
    from .faults import FaultPlan

    try:
        return FaultPlan.from_dicts(value, where="faults")
    except ValueError as exc:
        path, _, msg = str(exc).partition(": ")
        errors.add(path if path.startswith("faults") else "faults", msg or str(exc))
        return None


def _parse_config(table: dict | None, errors: "_Errors") -> SchedulerConfig:
    if table is None:
        return SchedulerConfig()
    allowed = SchedulerConfig.field_names()
    _unknown_keys(table, allowed, "config", errors)
    good: dict[str, Any] = {}
    for key, value in table.items():
        if key not in allowed:
            continue
        try:  # one field at a time, so each error is pinned to its key
            SchedulerConfig(**{key: value})
        except ValueError as exc:
            errors.add(f"config.{key}", str(exc))
        else:
            good[key] = value
    try:
        return SchedulerConfig.from_dict(good)
    except ValueError as exc:  # a rule spanning fields, should SchedulerConfig grow one
        errors.add("config", str(exc))
        return SchedulerConfig()


def _parse_workflows(items: list | None, errors: "_Errors") -> tuple[WorkflowDef, ...]:
    out: list[WorkflowDef] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(items or ()):
        where = f"workflows[{i}]"
        if not _check_item(item, where, _WORKFLOW_KEYS, errors):
            continue
        name = _required_name(item, "name", where, errors)
        duration = (_parse_duration(item["duration"], f"{where}.duration", errors) if "duration" in item
                    else Dist("fixed", 0.0))
        if name is None or duration is None:
            continue
        if name in seen:
            errors.add(f"{where}.name", f"workflow {name!r} is already declared at {seen[name]}")
            continue
        seen[name] = where
        out.append(WorkflowDef(name, duration))
    return tuple(out)


_DURATION_FORMS = ('seconds >= 0, or a table such as {dist = "exponential", mean = 0.2} or '
                   '{dist = "uniform", low = 0.05, high = 0.15} (laws: fixed, exponential, uniform, lognormal)')


def _parse_duration(value: Any, where: str, errors: "_Errors") -> Dist | None:
    """A run time, in the shared notation of :mod:`fanoutsim.dist`."""
    try:
        return parse_dist(value, where=where)
    except ValueError as exc:
        path, message = _split_where(str(exc), where)
        if not isinstance(value, dict):  # the wrong kind of value: say which kinds are right
            message += f"; allowed: {_DURATION_FORMS}"
        errors.add(path, message)
        return None


def _split_where(message: str, where: str) -> tuple[str, str]:
    """``"a.b.c must be ..."`` / ``"a.b: ..."`` -> (key path, the rest)."""
    if not message.startswith(where):
        return where, message
    rest = message[len(where):]
    if rest.startswith("."):
        key, _, rest = rest[1:].partition(" ")
        return f"{where}.{key.rstrip(':')}", rest.strip()
    return where, rest.lstrip(":").strip()


def _parse_subscriptions(items: list | None, declared: list[str],
                         errors: "_Errors") -> tuple[SubscriptionDef, ...]:
    out: list[SubscriptionDef] = []
    seen: dict[tuple, str] = {}
    for i, item in enumerate(items or ()):
        where = f"subscriptions[{i}]"
        if not _check_item(item, where, _SUBSCRIPTION_KEYS, errors):
            continue
        reactor = _required_name(item, "reactor", where, errors)
        workflow = _required_name(item, "workflow", where, errors)
        tenant = _optional_name(item, "tenant", where, errors, "public")
        when = None
        if "when" in item:
            when = item["when"]
            if not isinstance(when, str):
                errors.add(f"{where}.when", f"must be a CEL expression string over "
                                            f"{', '.join(ALLOWED_VARIABLES)}; got {_kind(when)}")
                when = _BAD
            else:
                try:
                    compile_predicate(when)
                except InvalidPredicate as exc:
                    errors.add(f"{where}.when", _cel_message(when, str(exc)))
                    when = _BAD
        problem = None if workflow is None else undeclared_workflow(workflow, declared, " in [[workflows]]")
        if problem is not None:
            errors.add(f"{where}.workflow", problem)
            continue
        if reactor is None or workflow is None or tenant is None or when is _BAD:
            continue
        key = (reactor, workflow, tenant)
        if key in seen:
            errors.add(where, f"subscription of {workflow!r} to {reactor!r} in tenant {tenant!r} "
                              f"is already declared at {seen[key]}")
            continue
        seen[key] = where
        out.append(SubscriptionDef(reactor, workflow, tenant, when))
    return tuple(out)


def _cel_message(expr: str, message: str) -> str:
    """InvalidPredicate's message, with a CEL parse error's caret kept under its column."""
    marker = f"predicate {expr!r} is not valid CEL: "
    if message.startswith(marker):
        detail = message[len(marker):].strip("\n")
        return (f"{expr!r} is not valid CEL (a boolean expression over the variables "
                f"{', '.join(ALLOWED_VARIABLES)}):\n{detail}")
    return message


def _parse_replays(items: list | None, source: str, errors: "_Errors") -> tuple:
    """``[[workload]]`` tables with ``replay = "file"`` (see :mod:`fanoutsim.replay`);
    a relative path is relative to the scenario file."""
    from .replay import parse_replay

    base = Path(source).resolve().parent if os.path.isfile(source) else Path.cwd()
    out = []
    for i, item in enumerate(items or ()):
        if isinstance(item, dict) and "replay" in item:
            spec, problems = parse_replay(item, f"workload[{i}]", base)
            for path, message in problems:
                errors.add(path, message)
            if spec is not None:
                out.append(spec)
    return tuple(out)


def _parse_workloads(items: list | None, errors: "_Errors") -> tuple[Workload, ...]:
    out: list[Workload] = []
    for i, item in enumerate(items or ()):
        where = f"workload[{i}]"
        if isinstance(item, dict) and "replay" in item:
            continue  # a recorded workload: _parse_replays
        if not _check_item(item, where, _WORKLOAD_KEYS, errors):
            continue
        n = len(errors)
        reactor = _required_name(item, "reactor", where, errors)
        tenant = _optional_name(item, "tenant", where, errors, "public")
        rate = item.get("rate")
        if "rate" not in item:
            errors.add(f"{where}.rate", "is required: firings per virtual second (a number > 0)")
        elif not _is_number(rate) or rate <= 0:
            errors.add(f"{where}.rate", f"must be a finite number of firings per virtual second > 0, "
                                        f"got {_show(rate)}")
        payload = item.get("payload", "quote")
        if not isinstance(payload, str) or payload not in GENERATORS:
            errors.add(f"{where}.payload", f"must be one of {', '.join(map(repr, GENERATORS))}; "
                                           f"got {_show(payload)}")
        start = item.get("start", 0.0)
        if not _is_number(start) or start < 0:
            errors.add(f"{where}.start", f"must be a finite number of virtual seconds >= 0, got {_show(start)}")
            start = None
        stop = item.get("stop")
        if stop is not None and (not _is_number(stop) or (start is not None and stop <= start)):
            bound = f" after start ({start})" if start is not None else ""
            errors.add(f"{where}.stop", f"must be a finite number of virtual seconds{bound}, got {_show(stop)}")
        if len(errors) > n:
            continue
        try:
            out.append(Workload(reactor, float(rate), tenant, payload, float(start),
                                None if stop is None else float(stop)))
        except ValueError as exc:  # anything Workload checks that we did not
            errors.add(where, str(exc))
    return tuple(out)


# -- checks ------------------------------------------------------------------------
_BAD = object()


class _Errors:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def __len__(self) -> int:
        return len(self.items)

    def raise_if_any(self, source: str) -> None:
        if self.items:
            raise ScenarioError(source, self.items)


def _kind(value: Any) -> str:
    """The TOML name of a value's type."""
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, datetime):
        return f"datetime {value.isoformat()}"
    return type(value).__name__


def _show(value: Any) -> str:
    return _kind(value) if isinstance(value, (dict, list, bool, datetime)) else repr(value)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _unknown_keys(table: dict, allowed, where: str, errors: _Errors, what: str = "") -> None:
    for key in table:
        if key not in allowed:
            path = f"{where}.{key}" if where else key
            if not where:
                scope = "allowed top-level keys"
            else:
                scope = f"allowed keys in {f'[{where}]' if '[' not in where else where}"
            extra = f" {what}" if what else ""
            errors.add(path, f"unknown key; {scope}{extra}: {', '.join(allowed)}")


def _table(data: dict, key: str, errors: _Errors, required: bool = False) -> dict | None:
    if key not in data:
        if required:
            errors.add(key, f"is required: a [{key}] table")
        return None
    value = data[key]
    if not isinstance(value, dict):
        errors.add(key, f"must be a table ([{key}]), got {_kind(value)}")
        return None
    return value


def _array(data: dict, key: str, errors: _Errors) -> list | None:
    if key not in data:
        return None
    value = data[key]
    if not isinstance(value, list):
        errors.add(key, f"must be an array of tables ([[{key}]]), got {_kind(value)}")
        return None
    return value


def _check_item(item: Any, where: str, allowed: tuple[str, ...], errors: _Errors) -> bool:
    if not isinstance(item, dict):
        errors.add(where, f"must be a table, got {_kind(item)}")
        return False
    _unknown_keys(item, allowed, where, errors)
    return True


def _check_str(value: Any, where: str, errors: _Errors) -> str | None:
    if not isinstance(value, str) or not value.strip():
        errors.add(where, f"must be a non-empty string, got {_show(value)}")
        return None
    return value


def _required_name(item: dict, key: str, where: str, errors: _Errors) -> str | None:
    if key not in item:
        errors.add(f"{where}.{key}", "is required (a non-empty string)")
        return None
    return _check_str(item[key], f"{where}.{key}", errors)


def _optional_name(item: dict, key: str, where: str, errors: _Errors, default: str) -> str | None:
    if key not in item:
        return default
    return _check_str(item[key], f"{where}.{key}", errors)


def _check_seed(value: Any, where: str, errors: _Errors, note: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        errors.add(where, f"must be an integer seed, got {_show(value)}{note}")
        return 0
    return value


def _check_until(value: Any, where: str, errors: _Errors, note: str = "") -> float:
    if not _is_number(value) or value <= 0:
        errors.add(where, f"must be a finite number of virtual seconds > 0, got {_show(value)}{note}")
        return 1.0
    return float(value)


def _check_store(value: Any, where: str, errors: _Errors, note: str = "") -> str:
    if isinstance(value, str) and (value in ("memory", "duckdb") or
                                   (value.endswith(".duckdb") and len(value) > len(".duckdb"))):
        return value
    errors.add(where, f"must be \"memory\", \"duckdb\" or a path ending in .duckdb, got {_show(value)}{note}")
    return "memory"


def _check_start(value: Any, where: str, errors: _Errors) -> str | datetime | None:
    if not isinstance(value, (str, datetime)):
        errors.add(where, f"must be an RFC 3339 timestamp such as 2026-01-01T00:00:00Z, got {_show(value)}")
        return None
    try:
        parse_start(value)
    except (ValueError, TypeError) as exc:
        errors.add(where, f"{exc} (an RFC 3339 timestamp with a timezone, such as 2026-01-01T00:00:00Z)")
        return None
    return value


# -- [[faults]] of the outbox and leases designs, which accept some kinds only ----------
def parse_fault_tables(value: Any, consumers: list[str], errors: "_Errors", *, label: str,
                       accepted: tuple[str, ...], others: dict[str, str], renames: dict[str, dict[str, str]],
                       points: tuple[str, ...], points_label: str, other_points: dict[str, tuple[str, ...]],
                       slowed: str):
    """Each ``[[faults]]`` table on its own (so every bad one is reported), then the
    plan. ``label`` names the scenario kind in messages ("an outbox scenario");
    ``accepted`` are its fault kinds, ``others`` why each other kind is refused;
    ``renames`` maps a kind's keys in this design's spelling to the spec's fields
    (a ``consumer`` must be declared); ``points`` are its crash points
    (``other_points``: other designs' points, by design, for a better message)."""
    from .faults import FaultPlan
    from .faults.plan import KINDS

    if not isinstance(value, list):
        errors.add("faults", f"must be an array of tables ([[faults]]), got {_kind(value)}")
        return None
    names = ", ".join(accepted)
    specs, n = [], len(errors)
    for i, item in enumerate(value):
        where = f"faults[{i}]"
        if not isinstance(item, dict):
            errors.add(where, f"must be a table, got {_kind(item)}")
            continue
        kind = item.get("kind")
        if "kind" not in item:
            errors.add(f"{where}.kind", f"is required; {label} accepts: {names}")
            continue
        if not isinstance(kind, str):
            errors.add(f"{where}.kind", f"must be a string naming the kind, got {_show(kind)}; "
                                        f"{label} accepts: {names}")
            continue
        if kind in others:
            errors.add(f"{where}.kind", f"{kind!r} is a fault of the {others[kind]}; {label} accepts: {names}")
            continue
        if kind not in accepted:
            errors.add(f"{where}.kind", f"{_show(kind)} is not a fault kind; {label} accepts: {names}")
            continue
        ren = renames.get(kind, {})
        fields = [f.name for f in dataclasses.fields(KINDS[kind])]
        allowed = [next((o for o, f in ren.items() if f == name), name) for name in fields]
        bad = [k for k in item if k != "kind" and k not in allowed]
        for k in bad:
            hint = ""
            if k in ren.values():
                ours = next(o for o, f in ren.items() if f == k)
                hint = f" (in {label} {kind} names a {ours}: write {ours} = ...)"
            errors.add(f"{where}.{k}", f"unknown key for {kind!r}; allowed: kind, {', '.join(allowed)}{hint}")
        if bad:
            continue
        args = {}
        for k, v in item.items():
            if k == "kind":
                continue
            if k in ren:
                if not isinstance(v, str) or not v.strip():
                    errors.add(f"{where}.{k}", f"must be a non-empty string, got {_show(v)}")
                    break
                if k == "consumer" and consumers and v not in consumers:
                    errors.add(f"{where}.{k}", f"{v!r} is not declared in [[consumers]]; "
                                               f"declared: {', '.join(consumers)}")
                    break
            args[ren.get(k, k)] = tuple(v) if k == "window" and isinstance(v, list) else v
        else:
            if kind == "crash_at_point" and "point" in item and item["point"] not in points:
                point = item["point"]
                other = next((d for d, ps in other_points.items() if point in ps), None)
                what = f"{point!r} is a crash point of the {other}" if other else f"{_show(point)} is not a crash point"
                errors.add(f"{where}.point", f"{what}; {points_label}: {', '.join(points)}")
                continue
            if kind == "slow_workflow" and "consumer" not in item:
                errors.add(f"{where}.consumer", f"is required: {slowed}")
                continue
            missing = [f.name for f in dataclasses.fields(KINDS[kind])
                       if f.default is dataclasses.MISSING and f.name not in args]
            for field in missing:
                key = next((o for o, f in ren.items() if f == field), field)
                errors.add(f"{where}.{key}", f"is required for {kind!r}")
            if missing:
                continue
            try:
                specs.append(KINDS[kind](**args))
            except (ValueError, TypeError) as exc:
                errors.add(*_fault_problem(str(exc), where, kind, ren))
    if len(errors) > n:
        return None
    try:
        return FaultPlan(tuple(specs))
    except ValueError as exc:  # a rule across faults: one notifications fault, ...
        errors.add("faults", str(exc))
        return None


def _fault_problem(message: str, where: str, kind: str, renames: dict) -> tuple[str, str]:
    """A fault spec's ``"late_commit.delay.dist must be ..."`` -> (``faults[i].delay.dist``,
    ``"must be ..."``), its field spelled as the scenario spells it."""
    m = re.match(rf"{re.escape(kind)}\.([A-Za-z_][\w.\[\]]*?)[:.]?(\s|$)", message)
    if not m:
        return where, message
    key = m.group(1)
    head, _, tail = key.partition(".")
    head = next((o for o, f in renames.items() if f == head), head)
    key = f"{head}.{tail}" if tail else head
    return f"{where}.{key}", message[m.end():].strip() or message


def consumer_tables(data: dict, errors: "_Errors", allowed: tuple[str, ...], hint: str):
    """The ``[[consumers]]`` tables of an outbox or leases scenario, checked for
    their keys and a unique ``name``: yields ``(where, item, name, n)`` for each
    (``n``: the error count before it, so a caller can tell if it added any).
    ``hint`` lists the optional keys in the "is required" message."""
    items = _array(data, "consumers", errors)
    if "consumers" not in data:
        errors.add("consumers", f"is required: at least one [[consumers]] table (a name, and optional {hint})")
        return
    if items is not None and not items:
        errors.add("consumers", "must declare at least one consumer")
    seen: dict[str, str] = {}
    for i, item in enumerate(items or ()):
        where = f"consumers[{i}]"
        if not _check_item(item, where, allowed, errors):
            continue
        n = len(errors)
        name = _required_name(item, "name", where, errors)
        if name is not None:
            if name in seen:
                errors.add(f"{where}.name", f"consumer {name!r} is already declared at {seen[name]}")
            else:
                seen[name] = where
        yield where, item, name, n
