"""The seam every design plugs into: one :class:`Design` record per design.

A design is one package under :mod:`fanoutsim.designs` (engine steps, config,
scenario schema, tables, checker, clock bindings, analysis, plots, report).
Everything that works across designs — ``fanoutsim run / serve / write /
status``, ``report.json``, the figures, :func:`fanoutsim.sweep` — reads the
design from the registry and calls these members; it never asks "is this the
outbox?". The kernel defines the record and imports no design.

Adding a design: write its package, give it a module-level ``DESIGN =
Design(...)``, and add one line to :data:`fanoutsim.designs.BUILTIN` (or call
:func:`fanoutsim.designs.register` for a design that lives elsewhere). A
package laid out as the built-in ones are (:data:`TEMPLATE`) declares only
what is its own: ``DESIGN = Design.from_package(__package__, name=..., ...)``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# what every design's checker returns: valid, total, summary, per_unit, and
# duplicates / lost frames with a cause column (see fanoutsim.kernel.check)
from fanoutsim.kernel.check import CheckResult  # noqa: F401  (a name of this module too)
from fanoutsim.kernel.validate import is_real


def lazy(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported on its first call: a design's record names its
    checker, report and figures without importing pandas or matplotlib when a
    command needs none of them."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported on its first call."
    return call


@dataclass(frozen=True)
class SweepKey:
    """A sweep grid key a design takes besides its config fields and dotted
    scenario paths. ``meaning``: one line for the docs and errors.
    ``scenario(scenario, value)`` returns the scenario with the value applied
    (before the run is built); ``sim(sim, value)`` sets it on the built
    simulation; ``check(value)`` refuses a value up front. Each raises
    ValueError saying what is allowed."""

    meaning: str
    scenario: Callable[[Any, Any], Any] | None = None
    sim: Callable[[Any, Any], None] | None = None
    check: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class SweepBudget:
    """The bar a design's sweep recommendation holds every setting to, which
    ``fanoutsim sweep --budget`` (and ``budget=`` of the design's
    ``recommend``) sets. ``meaning``: what it bounds, in a few words ("the p99
    fire -> dispatch latency"); ``unit``: ``"s"`` for seconds, ``""`` for a
    share; ``default``: the bar when none is given; ``low`` < budget (or <=
    when ``low_included``) and budget <= ``high`` (None: no upper bound)."""

    meaning: str
    default: float
    unit: str = "s"
    low: float = 0.0
    low_included: bool = False
    high: float | None = None

    def allowed(self) -> str:
        """What a budget may be, in words: ``a number of seconds > 0``."""
        what = "a number of seconds" if self.unit == "s" else "a number"
        upper = "" if self.high is None else f" and <= {self.high:g}"
        return f"{what} {'>=' if self.low_included else '>'} {self.low:g}{upper}"

    def check(self, value: Any) -> float:
        """``value`` as a float, or ValueError naming it and what is allowed."""
        ok = is_real(value) and math.isfinite(value)
        if ok:
            ok = (value >= self.low if self.low_included else value > self.low) and (
                self.high is None or value <= self.high
            )
        if not ok:
            raise ValueError(f"budget {value!r}: give {self.allowed()} ({self.meaning} a setting may reach)")
        return float(value)


def scale_workload_rates(scenario: Any, rate: float) -> Any:
    """``scenario`` with every workload's ``rate`` scaled by one factor so that
    they sum to ``rate`` (the split between workloads is kept): the ``rate``
    sweep key of a design whose scenario has ``workloads`` with a ``rate``."""
    if not is_real(rate) or not math.isfinite(rate) or rate <= 0:
        raise ValueError("the total rate must be a finite number of events per virtual second > 0")
    workloads = tuple(getattr(scenario, "workloads", ()))
    total = sum(w.rate for w in workloads)
    if not workloads or total <= 0:
        raise ValueError("the scenario has no [[workload]] to scale")
    factor = rate / total
    return dataclasses.replace(
        scenario, workloads=tuple(dataclasses.replace(w, rate=w.rate * factor) for w in workloads)
    )


# The package template: each member a design's package gives under the same
# module and attribute names (``module``, ``attribute`` path in it). Members
# in the modules of :data:`LAZY_MODULES` are looked up on their first call
# (:func:`lazy`), so naming the checker or the figures imports neither pandas
# nor matplotlib; the others are read at once, and an optional member (one
# with a default in :class:`Design`) the package leaves out keeps its default.
TEMPLATE: dict[str, tuple[str, str]] = {
    "config_table": ("config", "TABLE"),
    "crash_points": ("faults", "FAULTS.points"),
    "fault_kinds": ("faults", "FAULTS.kind_names"),
    "parse_scenario": ("scenario", "parse_scenario"),
    "scenario_schema": ("scenario", "SCHEMA"),
    "check": ("checker", "check"),
    "report": ("report", "report"),
    "format_report": ("report", "format_report"),
    "format_check": ("report", "format_check"),
    "tables": ("report", "tables"),
    "figures": ("plots", "save_report_figures"),
    "sweep_columns": ("sweep", "SWEEP_COLUMNS"),
    "sweep_unit_columns": ("sweep", "UNIT_COLUMNS"),
    "sweep_keys": ("sweep", "SWEEP_KEYS"),
    "sweep_row": ("sweep", "sweep_row"),
    "sweep_figures": ("sweep", "sweep_figures"),
    "sweep_recommend": ("sweep", "recommend"),
    "sweep_budget": ("sweep", "BUDGET"),
    "realtime": ("serve", "open_realtime"),
    "write": ("serve", "write"),
    "write_fields": ("serve", "WRITE_FIELDS"),
    "status": ("serve", "status_of"),
    "roles": ("roles", "ROLES.help"),
    "store_part": ("tables", "PART"),
    "explain": ("story", "story"),
    "backlog": ("story", "backlog"),
    "backlog_name": ("story", "BACKLOG_NAME"),
    "causes": ("causes", "CAUSES"),
    "expected": ("causes", "expected"),
    "metrics": ("metrics", "METRICS"),
    "verdicts": ("causes", "verdicts"),
    "table_verdicts": ("story", "table_verdicts"),
}
LAZY_MODULES = frozenset({"checker", "report", "plots"})
_MISSING = object()


def _template_member(package: str, key: str, optional: bool) -> Any:
    """``key``'s member of the design package ``package`` (see :data:`TEMPLATE`);
    :data:`_MISSING` for an ``optional`` one the package leaves out."""
    module, path = TEMPLATE[key]
    where = f"{package}.{module}"
    if module in LAZY_MODULES:
        return lazy(where, path)
    try:
        return functools.reduce(getattr, path.split("."), importlib.import_module(where))
    except ModuleNotFoundError as exc:
        if exc.name != where:  # the module is there and fails to import: its own error
            raise
    except AttributeError:
        pass
    if optional:
        return _MISSING
    raise TypeError(
        f"the design package {package} gives no {key} where the template has it ({where}.{path}): "
        f"lay it out so, or pass {key}= to Design.from_package"
    )


@dataclass(frozen=True)
class Design:
    """One design, as the cross-design tools see it.

    ``name`` is its registry name (``"leases"``) and ``title`` a line naming the
    system it models; ``config_type`` its config dataclass; ``crash_points`` and
    ``fault_kinds`` the crash points and fault kinds a plan of it may name.

    ``parse_scenario(data, source=, default_name=)`` checks a TOML document (a
    dict) of this design and returns a scenario object with ``name``,
    ``until``, ``seed``, ``store``, ``design``, ``build(seed, store, until)``
    and ``run(seed, until, store)`` (a SimPy run of the scenario).

    ``check(sim)`` returns a :class:`CheckResult`; ``report(sim, name,
    checked)`` a JSON-ready dict with the checker's totals under ``check``;
    ``format_report(report)`` and ``format_check(checked)`` the text the CLI
    prints; ``tables(sim)`` the DataFrames written as Parquet; ``figures(sim,
    out, checked=None)`` the PNGs written into ``out`` (their paths; ``checked``,
    the run's :class:`CheckResult` when the caller has it, spares checking again).

    ``config_table`` names the scenario file's table of ``config_type``'s
    fields (``config`` for the reactor, ``outbox``, ``leases``): a sweep grid
    key that is a config field is set there. ``sweep_columns`` and
    ``sweep_row(sim, checked)``: the result columns of one sweep run and their
    values (``lost`` and ``valid`` for every design, the rest named per
    design). ``sweep_unit_columns``: statistics the row also gives per reader
    (consumer), as extra columns ``<stat>[<reader>]`` after ``sweep_columns``,
    so that one reader's p99 is not drowned by another's. ``sweep_keys``: the
    grid keys the design takes besides its config fields and dotted scenario
    paths, each a :class:`SweepKey` (``rate``, for one, scales the scenario's
    workloads).

    ``sweep_figures(df, scenario, out)``: the PNG figures of a sweep's table
    (:func:`fanoutsim.sweep`) of a ``scenario`` of this design, written into
    ``out`` (their paths; ``fanoutsim sweep`` calls it; a design that
    recommends also takes ``budget=``, to draw the bar it was given).
    ``sweep_recommend(df, scenario, budget=None)``: the recommendation of a
    setting from that table, as text whose first line starts
    ``recommendation``: the setting, or ``recommendation: none: ...`` saying
    why there is none (the grid varies no setting it recommends, or none meets
    the bar) — never silence. ``sweep_budget`` (a :class:`SweepBudget`) is
    what its ``budget`` bounds, its default and its allowed values. A design
    without a recommendation leaves both None.

    ``realtime(scenario, db, **options)`` opens the design's wall-clock
    runtime over the DuckDB file ``db`` with the scenario (or None: the file
    as it is) applied, not started, for ``fanoutsim serve``, ``write`` and
    ``status``. ``write(runtime, request)`` is the server's write command (a
    firing, a commit, a publish): ``request`` is a dict of the fields named in
    ``write_fields`` (field -> meaning), checked by ``write``, which returns a
    JSON-ready answer. ``status(runtime)`` is what ``fanoutsim status`` prints
    (JSON-ready), read from the runtime's tables whether it runs or not.
    ``roles``: the parts of the process ``fanoutsim serve --role`` can run
    alone, several processes sharing one PostgreSQL database, each with what
    it runs in one line (``"all"`` is every part, the default; see
    :mod:`fanoutsim.kernel.runtime.roles`); ``realtime`` takes ``role=`` for
    any other (one, or several joined by commas).

    ``explain(runtime, id)`` tells one item's story from the runtime's tables
    (a firing, an outbox row, an event: what ``fanoutsim explain FILE ID``
    prints; KeyError when the run has no such item). ``backlog(runtime)``
    counts the work taken in and not yet done (pending executions, rows past
    the cursors, unresolved events): the number ``fanoutsim status`` watches
    to say a served run is falling behind; ``backlog_name`` says what it
    counts, in one word.

    ``causes`` gives one plain sentence per duplicate and loss cause the
    design's checker names (``{"lost": {cause: text}, "duplicates": {...}}``);
    ``expected(checked, kind, cause)`` says whether the run's configuration
    accepts that cause (it leaves the verdict valid) — what the report prints
    beside each cause. ``verdicts(checked)`` lists the check's duplicated and
    lost items one by one (:func:`fanoutsim.kernel.check.item_verdicts`'s
    rows): what ``report.json`` keeps under ``verdicts``, ``fanoutsim run
    --store FILE`` keeps in the file, and ``fanoutsim explain`` tells.
    ``table_verdicts(runtime)``: the same rows from the runtime's tables alone,
    for a file no check kept verdicts in (one a server wrote); None when the
    design's checker needs the trace.

    ``metrics`` says what each metric the design's runtimes count means
    (name -> :class:`fanoutsim.kernel.metrics.Help`: counter, gauge or
    histogram, and a sentence with its unit): the ``# HELP`` and ``# TYPE``
    lines of ``GET /metrics`` and the metrics page of the documentation.

    ``scenario_schema`` declares the design's scenario files (a
    :class:`fanoutsim.kernel.scenario.Schema`): :mod:`fanoutsim.scenario`
    reads its top-level tables to tell which design a table belongs to, and
    writes its JSON Schema.

    ``store_part`` is the design's tables (a
    :class:`fanoutsim.kernel.store.StorePart`: columns, its part of the
    transaction interface, the memory and DuckDB adapters' parts):
    :mod:`fanoutsim.designs.stores` composes every registered design's into
    each store it opens. None: the design keeps no tables of its own.
    """

    name: str
    title: str
    config_type: type
    crash_points: tuple[str, ...]
    fault_kinds: tuple[str, ...]
    parse_scenario: Callable[..., Any]
    check: Callable[[Any], CheckResult]
    report: Callable[..., dict[str, Any]]
    format_report: Callable[[dict[str, Any]], str]
    format_check: Callable[[Any], str]
    tables: Callable[[Any], Mapping[str, Any]]
    figures: Callable[..., list[Any]]
    config_table: str = "config"
    sweep_columns: tuple[str, ...] = ()
    sweep_row: Callable[[Any, Any], dict[str, Any]] | None = None
    sweep_unit_columns: tuple[str, ...] = ()
    sweep_keys: Mapping[str, SweepKey] = field(default_factory=dict)
    sweep_figures: Callable[[Any, Any, Any], list[Any]] | None = None
    sweep_recommend: Callable[..., str] | None = None
    sweep_budget: SweepBudget | None = None
    realtime: Callable[..., Any] | None = None
    write: Callable[[Any, dict[str, Any]], Any] | None = None
    write_fields: Mapping[str, str] = field(default_factory=dict)
    status: Callable[[Any], dict[str, Any]] | None = None
    roles: Mapping[str, str] = field(default_factory=lambda: {"all": "the whole process"})
    explain: Callable[[Any, str], str] | None = None
    backlog: Callable[[Any], int] | None = None
    backlog_name: str = "pending"
    causes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    expected: Callable[[Any, str, str], bool] | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    verdicts: Callable[[Any], list[dict[str, Any]]] | None = None
    table_verdicts: Callable[[Any], list[dict[str, Any]]] | None = None
    scenario_schema: Any = None
    store_part: Any = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a design's name must be an identifier, got {self.name!r}")

    @classmethod
    def from_package(cls, package: str, **members: Any) -> Design:
        """The record of a design whose package has the template's layout
        (:data:`TEMPLATE`): every member not given in ``members`` is the
        package's own, by the template's module and attribute name."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(members) - set(fields))
        if unknown:
            raise TypeError(f"Design has no member {unknown[0]!r}")
        given = {}
        for key in (k for k in TEMPLATE if k not in members):  # in the template's order: one error
            f = fields[key]
            optional = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            member = _template_member(package, key, optional)
            if member is not _MISSING:
                given[key] = member
        return cls(**given, **members)


class Registry:
    """Designs by name. Built-in designs are known by module path and imported
    on first use, so importing fanoutsim loads no design it does not need."""

    def __init__(self, builtin: Mapping[str, str]) -> None:
        self._paths: dict[str, str] = dict(builtin)
        self._loaded: dict[str, Design] = {}

    def register(self, design: Design | str, name: str | None = None) -> None:
        """Add a design: a :class:`Design`, or the path of a module whose
        ``DESIGN`` is one (``name`` is then required)."""
        if isinstance(design, Design):
            self._loaded[design.name] = design
            self._paths.setdefault(design.name, "")
            return
        if not isinstance(design, str) or not name:
            raise TypeError("register(Design) or register('module.path', name='...')")
        self._paths[name] = design
        self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        """Forget the design ``name`` (a name the registry does not know is no error)."""
        self._paths.pop(name, None)
        self._loaded.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """Every registered design's name, the built-in ones first, in the order registered."""
        return tuple(self._paths)

    def get(self, name: str) -> Design:
        """The :class:`Design` named ``name``, its module imported on first use. An
        unknown name raises KeyError naming the registered designs; a module whose
        ``DESIGN`` is not a Design of that name raises TypeError."""
        if name in self._loaded:
            return self._loaded[name]
        path = self._paths.get(name)
        if not path:
            raise KeyError(f"no design named {name!r}; designs: {', '.join(map(repr, self._paths))}")
        from importlib import import_module

        design = import_module(path).DESIGN
        if not isinstance(design, Design) or design.name != name:
            raise TypeError(f"{path}.DESIGN must be a Design named {name!r}")
        self._loaded[name] = design
        return design

    def __contains__(self, name: object) -> bool:
        return name in self._paths
