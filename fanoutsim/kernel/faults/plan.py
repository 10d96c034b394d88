"""The fault plan: declarative faults, seeded, the same under either clock.

A :class:`FaultPlan` is a list of fault specs (kinds of :mod:`.kinds` and of
the designs). It says *what* goes wrong and *when*; it never says what the
outcome is. The runtime binds it to a run as an :class:`Injector` (seeded from
the run's seed, one RNG per fault), which the engine consults through the
named points and the design's hooks (:mod:`.hooks`).

Each design declares its points, kinds and hooks in its own ``faults`` module
with :func:`declare`; :func:`check_faults` refuses, before a runtime opens
anything, a plan with a kind or a point its design does not have.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fanoutsim.kernel.faults.hooks import Faults, Hook, NoFaults, register_hook, resolve
from fanoutsim.kernel.faults.kinds import KINDS, CrashAtPoint, Fault, register_kinds
from fanoutsim.kernel.faults.points import POINTS, Crash, register_points
from fanoutsim.kernel.timeutil import US

if TYPE_CHECKING:
    from fanoutsim.kernel.trace import Trace

K = TypeVar("K", bound=Fault)


@dataclass(frozen=True)
class FaultPlan:
    """What goes wrong in a run: ``faults``, a sequence of fault kinds
    (``FaultPlan([CrashAt(120, downtime=5), ...])``), and the ``seed`` of its
    random draws (None: the run's). A runtime takes it as ``faults=``. Anything in
    ``faults`` that is not a fault kind raises ValueError naming the kinds, as does
    a second fault of a kind a plan may hold once (``single``)."""

    faults: tuple[Fault, ...] = ()
    seed: int | None = None  # None: the run's seed

    def __post_init__(self) -> None:
        items = tuple(self.faults)
        for i, f in enumerate(items):
            if not isinstance(f, Fault):
                raise ValueError(f"faults[{i}] is not a fault spec: {f!r}; kinds: {', '.join(KINDS)}")
        by_kind: dict[type[Fault], list[Fault]] = {}
        for f in items:
            by_kind.setdefault(type(f), []).append(f)
        for kind, specs in by_kind.items():
            kind.check_together(specs)
        object.__setattr__(self, "faults", items)

    @classmethod
    def from_dicts(cls, items: object, *, where: str = "faults", seed: int | None = None) -> FaultPlan:
        """Build from TOML tables: ``[[faults]] kind = "crash_at" ...``."""
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"{where}: must be a list of tables ([[faults]])")
        specs: list[Fault] = []
        for i, item in enumerate(items):
            at = f"{where}[{i}]"
            if not isinstance(item, Mapping):
                raise ValueError(f"{at}: must be a table")
            kind = item.get("kind")
            if kind not in KINDS:
                raise ValueError(f"{at}.kind: {kind!r} is not known; allowed: {', '.join(KINDS)}")
            cls_ = KINDS[kind]
            allowed = [f.name for f in fields(cls_)]
            extra = sorted(set(item) - {"kind", *allowed})
            if extra:
                raise ValueError(
                    f"{at}: unknown key(s) {', '.join(map(repr, extra))} for {kind!r}; allowed: {', '.join(allowed)}"
                )
            args = {
                k: (tuple(v) if isinstance(v, list) and k in ("window",) else v) for k, v in item.items() if k != "kind"
            }
            try:
                specs.append(cls_(**args))
            except TypeError as exc:
                raise ValueError(f"{at}: {exc}") from None
            except ValueError as exc:
                raise ValueError(f"{at}: {exc}") from None
        return cls(tuple(specs), seed)

    def of(self, kind: type[K]) -> list[K]:
        """The plan's faults of ``kind`` (a class; its subclasses too), in plan order."""
        return [f for f in self.faults if isinstance(f, kind)]


@dataclass(frozen=True)
class DesignFaults:
    """What one design declares about faults: its crash points, the kinds a
    plan of it may hold (in the order its messages list them) and the hooks
    its engine asks."""

    design: str
    points: tuple[str, ...]
    kinds: tuple[type[Fault], ...]
    hooks: tuple[Hook[Any], ...] = ()

    @property
    def kind_names(self) -> tuple[str, ...]:
        """The names of the design's fault kinds, as a scenario file writes them."""
        return tuple(k.kind for k in self.kinds)

    @property
    def hook_names(self) -> tuple[str, ...]:
        """What a hand-written plan of this design must answer: ``point`` and the required hooks."""
        return ("point", *(h.name for h in self.hooks if h.required))


def declare(
    design: str, *, points: Iterable[str], kinds: Iterable[type[Fault]], hooks: Iterable[Hook[Any]] = ()
) -> DesignFaults:
    """Register a design's crash points, fault kinds (by their TOML names) and
    hooks with the kernel; returns them as a :class:`DesignFaults` (what the
    design's ``Design`` and runtime classes read). A kind or hook several
    designs share is declared by each of them and registered once."""
    declared = tuple(register_hook(h) for h in hooks)
    return DesignFaults(design, register_points(design, points), register_kinds(kinds), declared)


def check_faults(
    faults: object,
    *,
    design: str,
    kinds: tuple[str, ...] | None = None,
    points: tuple[str, ...] | None = None,
    hooks: tuple[str, ...] = ("point",),
) -> None:
    """Refuse, before a runtime opens anything, a ``faults=`` it cannot use:
    neither a FaultPlan nor an object with the ``hooks`` of
    :class:`~.hooks.NoFaults` (a plain list of faults, say), or a plan with a
    fault kind (``kinds``) or a crash point (``points``) the ``design`` does not
    have — it would never act, and a crash test would pass doing nothing. None
    for ``kinds`` or ``points``: any."""
    if faults is None:
        return
    if not isinstance(faults, FaultPlan):
        missing = [h for h in hooks if not callable(getattr(faults, h, None))]
        if missing:
            advice = "; put a list of faults in a plan: FaultPlan([...])" if isinstance(faults, (list, tuple)) else ""
            raise TypeError(
                f"faults must be a FaultPlan or an object with the hooks of {NoFaults.__name__} "
                f"({', '.join(hooks)}); got {type(faults).__name__}, without {', '.join(missing)}{advice}"
            )
        return
    for i, f in enumerate(faults.faults):
        if kinds is not None and f.kind not in kinds:
            raise ValueError(
                f"faults[{i}]: {type(f).__name__} ({f.kind!r}) is not a fault of the {design} design; "
                f"it takes: {', '.join(kinds)}"
            )
        if points is not None and isinstance(f, CrashAtPoint) and f.point not in points:
            where = " (a crash point of another design)" if f.point in POINTS else ""
            raise ValueError(
                f"faults[{i}]: {f.point!r} is not a crash point of the {design} design{where}; "
                f"its points: {', '.join(points)}"
            )


def bind(faults: object, *, seed: int, start_us: int, trace: Trace) -> tuple[FaultPlan | None, Faults]:
    """What a runtime does with its ``faults=`` argument: a FaultPlan becomes an
    :class:`Injector` for this run; any other hooks object is used as it is;
    None means a healthy system. Returns ``(plan or None, hooks)``."""
    if isinstance(faults, FaultPlan):
        return faults, Injector(faults, seed=seed, start_us=start_us, trace=trace)
    # any other object passed check_faults: it answers the points and its design's hooks
    return None, (cast(Faults, faults) if faults is not None else NoFaults())


def point_of(faults: Faults, name: str) -> Callable[..., None] | None:
    """``faults.point``, to pass the named point ``name`` with — or None where
    passing it does nothing: a healthy system's (:class:`NoFaults`' own
    ``point``) or a bound plan with no crash at that point. A step that passes
    a point for every row asks once (an engine's ``points``) and skips the call."""
    point = faults.point
    if getattr(point, "__func__", None) is NoFaults.point:
        return None
    if type(faults) is Injector and not any(f.point == name for f in faults.point_crashes):
        return None
    return point


class PointsOf(dict[str, "Callable[..., None] | None"]):
    """:func:`point_of` of each point name asked for, kept (a point's answer
    does not change over a bound plan's life): ``points[name]``."""

    def __init__(self, faults: Faults) -> None:
        super().__init__()
        self.faults = faults

    def __missing__(self, name: str) -> Callable[..., None] | None:
        point = self[name] = point_of(self.faults, name)
        return point


class Injector:
    """A plan bound to one run: counts passes, draws from seeded RNGs (one per
    fault), records what it injected in the trace. The engine sees only the
    points and the hooks; a hook is built on its first call from the plan's
    kinds that act at it (:mod:`.hooks`)."""

    def __init__(self, plan: FaultPlan, *, seed: int, start_us: int, trace: Trace) -> None:
        self.plan = plan
        base = plan.seed if plan.seed is not None else seed
        self.rngs = [random.Random(f"fanoutsim:faults:{base}:{i}") for i in range(len(plan.faults))]
        self.start_us = start_us
        self.trace = trace
        self.passes: dict[int, int] = {}
        self._index = {id(f): i for i, f in enumerate(plan.faults)}
        self.point_crashes = [f for f in plan.faults if isinstance(f, CrashAtPoint)]

    def rng(self, fault: Fault) -> random.Random:
        """The fault's own seeded RNG: what one fault draws never shifts another's."""
        return self.rngs[self._index[id(fault)]]

    def elapsed(self, now: int) -> float:
        """Virtual seconds since the run's start (what windows are written in)."""
        return (now - self.start_us) / US

    def note(self, now: int, detail: str, **ids: Any) -> None:
        """Record in the trace what a fault did."""
        self.trace.add(now, "fault", "faults", detail=detail, **ids)

    def acts(self, hook: str) -> bool:
        """Whether a fault of the plan acts at ``hook``."""
        return any(f.acts_at(hook) for f in self.plan.faults)

    def point(self, name: str, now: int, **where: Any) -> None:
        """The named point ``name`` at ``now`` (µs): counts the pass for each
        ``crash_at_point`` fault of the plan at that point, and at its ``nth`` pass
        notes the crash in the trace and raises :class:`~.points.Crash` with a
        downtime drawn from its law."""
        for f in self.point_crashes:
            if f.point == name:
                i = self._index[id(f)]
                self.passes[i] = self.passes.get(i, 0) + 1
                if self.passes[i] == f.nth:
                    self.note(now, f"crash at {name} (pass {f.nth})", who=where.get("who"), what=where.get("what"))
                    raise Crash(name, f.downtime.sample(self.rng(f)))

    def _bind_hook(self, hook: Hook[Any]) -> Any:
        return hook.bound(self)

    def __getattr__(self, name: str) -> Any:  # only for names not found: a declared hook, once
        return resolve(self, name)
