"""The fault plan: declarative faults, seeded, the same under either clock.

A :class:`FaultPlan` is a list of fault specs. It says *what* goes wrong and
*when*; it never says what the outcome is. The runtime binds it to a run as an
:class:`Injector` (seeded from the run's seed), which the engine consults
through the hooks of :mod:`.points`.

Kinds (``kind`` is the TOML spelling)::

    CrashAt(at, downtime)                     crash_at         the runner dies at a virtual time
    CrashRandomly(mean_gap, downtime)         crash_randomly   ... at exponential gaps
    CrashAtPoint(point, nth, downtime)        crash_at_point   ... at the nth pass through a named point
    FailInserts(probability, window, workflow, ambiguous)
                                              fail_inserts     execution inserts fail; ``ambiguous``:
                                                               the row commits but the caller hears "failed"
    Stall(workflow, reactor, tenant, window, mode, batch_limit)
                                              stall            a subscription paused (skipped), throttled
                                                               (batch_limit per tick) or wedged (its inserts
                                                               fail); ``reactor=None`` with ``mode="wedge"`` and
                                                               ``target="workflow"`` wedges the workflow's bodies
    SlowWorkflow(workflow, duration, window)  slow_workflow    bodies run for a drawn duration
    LateCommit(probability, delay, reactor)   late_commit      a writer stamps fired_at, commits later
    ClockSkew(hosts)                          clock_skew       reactor hosts with (offset, drift) clocks
    Pollers(count, phase)                     pollers          N runner replicas poll the same store
    Ties(probability, burst, resolution)      ties             bursts sharing one fired_at; coarse clocks
    Notifications(drop, coalesce, delay, silent)
                                              notifications    lossy hints (used by the outbox design)
    Backfill(window, connections)             backfill         a bulk job holds database pool connections
                                                               (used by the outbox design's listener)
    RestoreBackup(backup_at, at)              restore_backup   a backup of the tables taken at backup_at is
                                                               restored at at (used by the leases design)

Times and windows are virtual seconds since the run's start; a window is
``(start, end)`` with end > start >= 0, or None for "always".
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields
from typing import Any, Mapping

from fanoutsim.kernel.dist import parse_dist
from fanoutsim.kernel.timeutil import US
from fanoutsim.kernel.faults.points import CRASH_POINTS, Crash, InsertFailed
from fanoutsim.kernel.validate import is_real, is_whole

Window = tuple[float, float] | None


def _num(value, where, *, low=None, high=None, strict_low=False, integer=False):
    if not is_real(value) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    if integer and not is_whole(value):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if low is not None and (value <= low if strict_low else value < low):
        raise ValueError(f"{where} must be {'>' if strict_low else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{where} must be <= {high}, got {value!r}")
    return value


def _window(value, where) -> Window:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{where} must be [start, end] in virtual seconds or omitted, got {value!r}")
    start = _num(value[0], f"{where} start", low=0)
    end = _num(value[1], f"{where} end", low=0)
    if end <= start:
        raise ValueError(f"{where} must end after it starts, got {list(value)!r}")
    return (float(start), float(end))


def _overlap(a: Window, b: Window) -> bool:
    if a is None or b is None:
        return True
    return a[0] < b[1] and b[0] < a[1]


def _active(window: Window, t: float) -> bool:
    return window is None or window[0] <= t < window[1]


def _name(value, where, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    return value


class Fault:
    kind = "fault"

    def check(self) -> None:  # overridden
        pass

    def __post_init__(self) -> None:
        self.check()


@dataclass(frozen=True)
class CrashAt(Fault):
    at: float
    downtime: Any = 0.0
    kind = "crash_at"

    def check(self):
        _num(self.at, "crash_at.at", low=0)
        object.__setattr__(self, "downtime", parse_dist(self.downtime, "crash_at.downtime"))


@dataclass(frozen=True)
class CrashRandomly(Fault):
    mean_gap: float
    downtime: Any = 0.0
    window: Window = None
    kind = "crash_randomly"

    def check(self):
        _num(self.mean_gap, "crash_randomly.mean_gap", low=0, strict_low=True)
        object.__setattr__(self, "downtime", parse_dist(self.downtime, "crash_randomly.downtime"))
        object.__setattr__(self, "window", _window(self.window, "crash_randomly.window"))


@dataclass(frozen=True)
class CrashAtPoint(Fault):
    point: str
    nth: int = 1
    downtime: Any = 0.0
    kind = "crash_at_point"

    def check(self):
        if self.point not in CRASH_POINTS:
            raise ValueError(f"crash_at_point.point {self.point!r} is not a crash point; "
                             f"known points: {', '.join(CRASH_POINTS)}")
        _num(self.nth, "crash_at_point.nth", low=1, integer=True)
        object.__setattr__(self, "downtime", parse_dist(self.downtime, "crash_at_point.downtime"))


@dataclass(frozen=True)
class FailInserts(Fault):
    probability: float = 1.0
    window: Window = None
    workflow: str | None = None
    ambiguous: bool = False
    kind = "fail_inserts"

    def check(self):
        _num(self.probability, "fail_inserts.probability", low=0, high=1)
        object.__setattr__(self, "window", _window(self.window, "fail_inserts.window"))
        _name(self.workflow, "fail_inserts.workflow", optional=True)
        if not isinstance(self.ambiguous, bool):
            raise ValueError(f"fail_inserts.ambiguous must be true or false, got {self.ambiguous!r}")


STALL_MODES = ("pause", "throttle", "wedge")


@dataclass(frozen=True)
class Stall(Fault):
    workflow: str
    window: Window
    mode: str = "pause"
    reactor: str | None = None
    tenant: str | None = None
    batch_limit: int = 1
    target: str = "subscription"
    kind = "stall"

    def check(self):
        _name(self.workflow, "stall.workflow")
        _name(self.reactor, "stall.reactor", optional=True)
        _name(self.tenant, "stall.tenant", optional=True)
        if self.window is None:
            raise ValueError("stall.window is required: [start, end] in virtual seconds")
        object.__setattr__(self, "window", _window(self.window, "stall.window"))
        if self.mode not in STALL_MODES:
            raise ValueError(f"stall.mode must be one of {', '.join(map(repr, STALL_MODES))}, got {self.mode!r}")
        if self.target not in ("subscription", "workflow"):
            raise ValueError(f"stall.target must be 'subscription' or 'workflow', got {self.target!r}")
        if self.target == "workflow" and self.mode != "wedge":
            raise ValueError("stall.target 'workflow' only supports mode 'wedge' (bodies hang until the window ends)")
        _num(self.batch_limit, "stall.batch_limit", low=1, integer=True)

    def matches(self, sub: dict) -> bool:
        return (sub["workflow_name"] == self.workflow
                and (self.reactor is None or sub["reactor_name"] == self.reactor)
                and (self.tenant is None or sub["tenant_id"] == self.tenant))


@dataclass(frozen=True)
class SlowWorkflow(Fault):
    workflow: str
    duration: Any
    window: Window = None
    kind = "slow_workflow"

    def check(self):
        _name(self.workflow, "slow_workflow.workflow")
        object.__setattr__(self, "duration", parse_dist(self.duration, "slow_workflow.duration"))
        object.__setattr__(self, "window", _window(self.window, "slow_workflow.window"))


@dataclass(frozen=True)
class LateCommit(Fault):
    probability: float
    delay: Any
    reactor: str | None = None
    window: Window = None
    kind = "late_commit"

    def check(self):
        _num(self.probability, "late_commit.probability", low=0, high=1)
        object.__setattr__(self, "delay", parse_dist(self.delay, "late_commit.delay"))
        _name(self.reactor, "late_commit.reactor", optional=True)
        object.__setattr__(self, "window", _window(self.window, "late_commit.window"))


@dataclass(frozen=True)
class ClockSkew(Fault):
    hosts: tuple  # of (offset seconds, drift seconds per second)
    kind = "clock_skew"

    def check(self):
        hosts = self.hosts
        if not isinstance(hosts, (list, tuple)) or not hosts:
            raise ValueError("clock_skew.hosts must be a non-empty list of [offset, drift] pairs")
        clean = []
        for i, h in enumerate(hosts):
            if isinstance(h, Mapping):
                unknown = [k for k in h if k not in ("offset", "drift")]
                if unknown:  # a misspelt key would silently be a host with no skew
                    raise ValueError(f"clock_skew.hosts[{i}].{unknown[0]}: unknown key; allowed: offset, drift")
                h = (h.get("offset", 0.0), h.get("drift", 0.0))
            if not isinstance(h, (list, tuple)) or len(h) != 2:
                raise ValueError(f"clock_skew.hosts[{i}] must be [offset, drift], got {h!r}")
            off = _num(h[0], f"clock_skew.hosts[{i}].offset")
            drift = _num(h[1], f"clock_skew.hosts[{i}].drift", low=-0.5, high=0.5)
            clean.append((float(off), float(drift)))
        object.__setattr__(self, "hosts", tuple(clean))


@dataclass(frozen=True)
class Pollers(Fault):
    count: int
    phase: str = "aligned"  # replicas tick together, or each at a seeded random phase
    kind = "pollers"

    def check(self):
        _num(self.count, "pollers.count", low=1, integer=True)
        if self.phase not in ("aligned", "random"):
            raise ValueError(f"pollers.phase must be 'aligned' or 'random', got {self.phase!r}")


@dataclass(frozen=True)
class Ties(Fault):
    probability: float = 0.0
    burst: int = 2
    resolution: float = 0.0  # seconds; fired_at is truncated to a multiple of it
    kind = "ties"

    def check(self):
        _num(self.probability, "ties.probability", low=0, high=1)
        _num(self.burst, "ties.burst", low=2, integer=True)
        _num(self.resolution, "ties.resolution", low=0)
        if 0 < self.resolution < 0.5e-6:  # rounds to 0 µs: stamps cannot be truncated to it
            raise ValueError(f"ties.resolution must be 0 (off) or at least a microsecond (1e-06 seconds, "
                             f"the clock's unit), got {self.resolution!r}")


@dataclass(frozen=True)
class Notifications(Fault):
    drop: float = 0.0
    coalesce: bool = False
    delay: Any = 0.0
    silent: tuple = ()
    kind = "notifications"

    def check(self):
        _num(self.drop, "notifications.drop", low=0, high=1)
        if not isinstance(self.coalesce, bool):
            raise ValueError(f"notifications.coalesce must be true or false, got {self.coalesce!r}")
        object.__setattr__(self, "delay", parse_dist(self.delay, "notifications.delay"))
        object.__setattr__(self, "silent", tuple(
            _window(w, f"notifications.silent[{i}]") for i, w in enumerate(self.silent)))


@dataclass(frozen=True)
class Backfill(Fault):
    """A bulk job (a mail backfill, a burst of keystrokes) holding
    ``connections`` connections of the database pool during ``window``
    (None: every connection it can get)."""

    window: Window
    connections: int | None = None
    kind = "backfill"

    def check(self):
        object.__setattr__(self, "window", _window(self.window, "backfill.window"))
        if self.window is None:
            raise ValueError("backfill.window is required: [start, end] in virtual seconds")
        if self.connections is not None:
            _num(self.connections, "backfill.connections", low=1, integer=True)


@dataclass(frozen=True)
class RestoreBackup(Fault):
    """An operator's mistake or a disaster recovery: the durable tables are
    copied at ``backup_at`` and that copy is restored at ``at`` (virtual
    seconds, ``at`` > ``backup_at``), throwing away what happened between."""

    backup_at: float
    at: float
    kind = "restore_backup"

    def check(self):
        _num(self.backup_at, "restore_backup.backup_at", low=0)
        _num(self.at, "restore_backup.at", low=0)
        if not self.at > self.backup_at:
            raise ValueError(f"restore_backup.at must be after backup_at ({self.backup_at!r}), got {self.at!r}")


KINDS: dict[str, type[Fault]] = {
    c.kind: c for c in (CrashAt, CrashRandomly, CrashAtPoint, FailInserts, Stall, SlowWorkflow,
                        LateCommit, ClockSkew, Pollers, Ties, Notifications, Backfill, RestoreBackup)
}
_SINGLETONS = ("pollers", "clock_skew", "ties", "notifications")


@dataclass(frozen=True)
class FaultPlan:
    """What goes wrong in a run. ``FaultPlan([CrashAt(120, downtime=5), ...])``."""

    faults: tuple = ()
    seed: int | None = None  # None: the run's seed

    def __post_init__(self):
        items = tuple(self.faults)
        for i, f in enumerate(items):
            if not isinstance(f, Fault):
                raise ValueError(f"faults[{i}] is not a fault spec: {f!r}; kinds: {', '.join(KINDS)}")
        for kind in _SINGLETONS:
            if sum(f.kind == kind for f in items) > 1:
                raise ValueError(f"the plan has more than one {kind!r} fault; combine them into one")
        stalls = [f for f in items if isinstance(f, Stall)]
        for i, a in enumerate(stalls):
            for b in stalls[i + 1:]:
                same = (a.workflow, a.reactor, a.tenant, a.target) == (b.workflow, b.reactor, b.tenant, b.target)
                if same and _overlap(a.window, b.window) and (a.mode, a.batch_limit) != (b.mode, b.batch_limit):
                    raise ValueError(
                        f"contradictory stalls for workflow {a.workflow!r}: {a.mode} in {list(a.window)} "
                        f"overlaps {b.mode} in {list(b.window)}")
        object.__setattr__(self, "faults", items)

    @classmethod
    def from_dicts(cls, items, *, where: str = "faults", seed=None) -> "FaultPlan":
        """Build from TOML tables: ``[[faults]] kind = "crash_at" ...``."""
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"{where}: must be a list of tables ([[faults]])")
        specs = []
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
                raise ValueError(f"{at}: unknown key(s) {', '.join(map(repr, extra))} for {kind!r}; "
                                 f"allowed: {', '.join(allowed)}")
            args = {k: (tuple(v) if isinstance(v, list) and k in ("window",) else v)
                    for k, v in item.items() if k != "kind"}
            try:
                specs.append(cls_(**args))
            except TypeError as exc:
                raise ValueError(f"{at}: {exc}") from None
            except ValueError as exc:
                raise ValueError(f"{at}: {exc}") from None
        return cls(tuple(specs), seed)

    def of(self, kind: type) -> list:
        return [f for f in self.faults if isinstance(f, kind)]

    def check_names(self, workflows: set[str], subscriptions: list[tuple[str, str, str]]) -> None:
        """Every workflow or subscription a fault names must exist; lists what does."""
        known_wf = set(workflows) | {s[1] for s in subscriptions}
        for f in self.faults:
            wf = getattr(f, "workflow", None)
            if wf is not None and wf not in known_wf:
                raise ValueError(f"{f.kind} names workflow {wf!r}, which has no subscription or "
                                 f"registration; known workflows: {', '.join(sorted(known_wf)) or 'none'}")
            if isinstance(f, Stall) and f.target == "subscription":
                if not any(f.matches({"reactor_name": r, "workflow_name": w, "tenant_id": t})
                           for r, w, t in subscriptions):
                    known = ", ".join(f"{r}->{w}@{t}" for r, w, t in subscriptions) or "none"
                    raise ValueError(f"stall names no existing subscription (workflow={f.workflow!r}, "
                                     f"reactor={f.reactor!r}, tenant={f.tenant!r}); known: {known}")


def check_faults(faults, *, design: str, kinds: tuple[str, ...] | None = None,
                 points: tuple[str, ...] | None = None) -> None:
    """Refuse, before a runtime opens anything, a ``faults=`` it cannot use:
    neither a FaultPlan nor an object with the hooks of
    :class:`~.points.NoFaults` (a plain list of faults, say), or a plan with a
    fault kind (``kinds``) or a crash point (``points``) the ``design`` does not
    have — it would never act, and a crash test would pass doing nothing. None
    for ``kinds`` or ``points``: any."""
    from fanoutsim.kernel.faults.points import CRASH_POINTS, NoFaults

    if faults is None:
        return
    if not isinstance(faults, FaultPlan):
        hooks = ("point", "before_insert", "after_insert", "poll_limit", "run_duration")
        missing = [h for h in hooks if not callable(getattr(faults, h, None))]
        if missing:
            hint = "; put a list of faults in a plan: FaultPlan([...])" if isinstance(faults, (list, tuple)) else ""
            raise TypeError(f"faults must be a FaultPlan or an object with the hooks of {NoFaults.__name__} "
                            f"({', '.join(hooks)}); got {type(faults).__name__}, without {', '.join(missing)}{hint}")
        return
    for i, f in enumerate(faults.faults):
        if kinds is not None and f.kind not in kinds:
            raise ValueError(f"faults[{i}]: {type(f).__name__} ({f.kind!r}) is not a fault of the {design} design; "
                             f"it takes: {', '.join(kinds)}")
        if points is not None and isinstance(f, CrashAtPoint) and f.point not in points:
            where = " (a crash point of another design)" if f.point in CRASH_POINTS else ""
            raise ValueError(f"faults[{i}]: {f.point!r} is not a crash point of the {design} design{where}; "
                             f"its points: {', '.join(points)}")


def bind(faults, *, seed: int, start_us: int, trace) -> tuple["FaultPlan | None", object]:
    """What a runtime does with its ``faults=`` argument: a FaultPlan becomes an
    :class:`Injector` for this run; any other hooks object is used as it is;
    None means a healthy system. Returns ``(plan or None, hooks)``."""
    from fanoutsim.kernel.faults.points import NoFaults

    if isinstance(faults, FaultPlan):
        return faults, Injector(faults, seed=seed, start_us=start_us, trace=trace)
    return None, (faults if faults is not None else NoFaults())


class Injector:
    """A plan bound to one run: counts passes, draws from seeded RNGs, records
    what it injected in the trace. The engine sees only the hooks."""

    def __init__(self, plan: FaultPlan, *, seed: int, start_us: int, trace) -> None:
        self.plan = plan
        base = plan.seed if plan.seed is not None else seed
        self.rngs = [random.Random(f"fanoutsim:faults:{base}:{i}") for i in range(len(plan.faults))]
        self.start_us = start_us
        self.trace = trace
        self.passes: dict[int, int] = {}
        self._index = {id(f): i for i, f in enumerate(plan.faults)}
        self.point_crashes = [f for f in plan.faults if isinstance(f, CrashAtPoint)]
        self.fail_inserts = plan.of(FailInserts)
        self.stalls = [f for f in plan.of(Stall) if f.target == "subscription"]
        self.limits_polls = bool(self.stalls)
        self.wedged_workflows = [f for f in plan.of(Stall) if f.target == "workflow"]
        self.slow = plan.of(SlowWorkflow)
        self.late = plan.of(LateCommit)
        skew = plan.of(ClockSkew)
        self.skew = skew[0] if skew else None
        ties = plan.of(Ties)
        self.ties = ties[0] if ties else None
        pollers = plan.of(Pollers)
        self.pollers = pollers[0] if pollers else Pollers(1)

    def rng(self, fault) -> random.Random:
        return self.rngs[self._index[id(fault)]]

    def _t(self, now: int) -> float:
        return (now - self.start_us) / US

    def _note(self, now, detail, **ids):
        self.trace.add(now, "fault", "faults", detail=detail, **ids)

    # -- engine hooks ------------------------------------------------------
    def point(self, name: str, now: int, **where) -> None:
        for f in self.point_crashes:
            if f.point == name:
                i = self._index[id(f)]
                self.passes[i] = self.passes.get(i, 0) + 1
                if self.passes[i] == f.nth:
                    self._note(now, f"crash at {name} (pass {f.nth})",
                               who=where.get("who"), what=where.get("what"))
                    raise Crash(name, f.downtime.sample(self.rng(f)))

    def before_insert(self, workflow: str, now: int, subscription: dict | None = None, **where) -> None:
        t = self._t(now)
        if subscription is not None:
            for f in self.stalls:
                if f.mode == "wedge" and _active(f.window, t) and f.matches(subscription):
                    raise InsertFailed(f"injected: subscription of {workflow!r} is wedged")
        for f in self.fail_inserts:
            if (not f.ambiguous and _active(f.window, t) and f.workflow in (None, workflow)
                    and (f.probability >= 1 or self.rng(f).random() < f.probability)):
                self._note(now, f"insert for {workflow} refused")
                raise InsertFailed(f"injected: insert for workflow {workflow!r} refused")

    def after_insert(self, workflow: str, now: int, **where) -> None:
        t = self._t(now)
        for f in self.fail_inserts:
            if (f.ambiguous and _active(f.window, t) and f.workflow in (None, workflow)
                    and (f.probability >= 1 or self.rng(f).random() < f.probability)):
                self._note(now, f"insert for {workflow} committed, outcome lost")
                raise InsertFailed(f"injected: insert for workflow {workflow!r} committed but reported failed")

    def poll_limit(self, sub: dict, now: int, limit: int) -> int:
        t = self._t(now)
        for f in self.stalls:
            if _active(f.window, t) and f.matches(sub):
                if f.mode == "pause":
                    return 0
                if f.mode == "throttle":
                    return min(limit, f.batch_limit)
        return limit

    def run_duration(self, workflow: str, now: int, base: float) -> float:
        if not (self.wedged_workflows or self.slow):  # asked once per step
            return base
        t = self._t(now)
        for f in self.wedged_workflows:
            if f.workflow == workflow and _active(f.window, t):
                return max(base, f.window[1] - t)
        for f in self.slow:
            if f.workflow == workflow and _active(f.window, t):
                return f.duration.sample(self.rng(f))
        return base

    # -- runtime hooks (the writer side) -------------------------------------
    def stamps(self, reactor: str, now: int) -> list[tuple[int, float]]:
        """The firings one workload event becomes: ``(fired_at, commit delay s)`` each."""
        t = self._t(now)
        stamp = now
        if self.skew is not None:
            offset, drift = self.rng(self.skew).choice(self.skew.hosts)
            stamp = now + round((offset + drift * t) * US)
        count = 1
        if self.ties is not None:
            if self.ties.resolution > 0:
                res = round(self.ties.resolution * US)
                stamp -= stamp % res
            if self.ties.probability > 0 and self.rng(self.ties).random() < self.ties.probability:
                count = self.ties.burst
        out = []
        for _ in range(count):
            delay = 0.0
            for f in self.late:
                if f.reactor in (None, reactor) and _active(f.window, t) \
                        and self.rng(f).random() < f.probability:
                    delay = max(delay, f.delay.sample(self.rng(f)))
            out.append((stamp, delay))
        return out
