"""The seam every design plugs into: one :class:`Design` record per design.

A design is one package under :mod:`fanoutsim.designs` (engine steps, config,
scenario schema, tables, checker, clock bindings, analysis, plots, report).
Everything that works across designs — ``fanoutsim run / serve / status /
fire``, ``report.json``, the figures, :func:`fanoutsim.sweep` — reads the
design from the registry and calls these members; it never asks "is this the
outbox?". The kernel defines the record and imports no design.

Adding a design: write its package, give it a module-level ``DESIGN =
Design(...)``, and add one line to :data:`fanoutsim.designs.BUILTIN` (or call
:func:`fanoutsim.designs.register` for a design that lives elsewhere).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, runtime_checkable


@runtime_checkable
class CheckResult(Protocol):
    """What every design's checker returns: ``total`` is a JSON-ready dict
    with at least ``valid`` (bool), ``lost`` and a duplicate count, and
    ``valid`` says whether every loss and duplicate has an accepted cause."""

    total: dict

    @property
    def valid(self) -> bool: ...


@dataclass(frozen=True)
class Design:
    """One design, as the cross-design tools see it.

    ``parse_scenario(data, source, default_name)`` checks a TOML document (a
    dict) of this design and returns a scenario object with ``name``,
    ``until``, ``seed``, ``store``, ``design``, ``build(seed, store, until)``
    and ``run(seed, until, store)`` (a SimPy run of the scenario).

    ``check(sim)`` returns a :class:`CheckResult`; ``report(sim, name,
    checked)`` a JSON-ready dict with the checker's totals under ``check``;
    ``format_report(report)`` and ``format_check(checked)`` the text the CLI
    prints; ``tables(sim)`` the DataFrames written as Parquet; ``figures(sim,
    out)`` the PNGs written into ``out`` (their paths).

    ``sweep_row(sim, checked)`` the result columns of one sweep run (``lost``
    and ``valid`` for every design, the rest named per design);
    ``sweep_keys`` the grid keys the design takes besides its config fields
    and dotted scenario paths, with a one-line meaning each.

    ``realtime(scenario, db, **options)`` opens the design's wall-clock
    runtime over a file for ``fanoutsim serve``; ``write(runtime, request)``
    is the server's write command (a firing, a commit, a publish) and returns
    a JSON-ready answer; ``status(store)`` reads a file's state for
    ``fanoutsim status`` without running anything.
    """

    name: str
    title: str
    config_type: type
    crash_points: tuple[str, ...]
    fault_kinds: tuple[str, ...]
    parse_scenario: Callable[..., Any]
    check: Callable[[Any], CheckResult]
    report: Callable[..., dict]
    format_report: Callable[[dict], str]
    format_check: Callable[[Any], str]
    tables: Callable[[Any], Mapping[str, Any]]
    figures: Callable[[Any, Any], list]
    sweep_row: Callable[[Any, Any], dict] | None = None
    sweep_keys: Mapping[str, str] = field(default_factory=dict)
    realtime: Callable[..., Any] | None = None
    write: Callable[[Any, dict], Any] | None = None
    status: Callable[[Any], dict] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a design's name must be an identifier, got {self.name!r}")


class Registry:
    """Designs by name. Built-in designs are known by module path and imported
    on first use, so importing fanoutsim loads no design it does not need."""

    def __init__(self, builtin: Mapping[str, str]) -> None:
        self._paths: dict[str, str] = dict(builtin)
        self._loaded: dict[str, Design] = {}

    def register(self, design: "Design | str", name: str | None = None) -> None:
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
        self._paths.pop(name, None)
        self._loaded.pop(name, None)

    def names(self) -> tuple[str, ...]:
        return tuple(self._paths)

    def get(self, name: str) -> Design:
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
