"""The reactor's faults: its crash points, its fault kinds and the hooks its engine asks.

Points (``e.faults.point(name, ...)`` in the steps)::

    reactor.after_graphs_before_log        a firing's graphs ran, its row not yet logged
    poll.after_fetch                       a subscription's batch fetched
    poll.after_dispatch_before_watermark   an execution row written, the watermark not yet moved
    poll.before_batch_commit               a batch's watermark move about to commit
    prune.mid_delete                       between two chunks of a prune
    executor.after_claim                   executions claimed, none run yet

Kinds (``kind`` is the TOML spelling; the kernel's crash kinds and the shared
:mod:`fanoutsim.designs.faults` besides)::

    FailInserts(probability, window, workflow, ambiguous)
                                   fail_inserts   execution inserts fail; ``ambiguous``: the row
                                                  commits but the caller hears "failed"
    Stall(workflow, reactor, tenant, window, mode, batch_limit, target)
                                   stall          a subscription paused (skipped), throttled
                                                  (batch_limit per tick) or wedged (its inserts
                                                  fail); ``target="workflow"`` with ``mode="wedge"``
                                                  wedges the workflow's bodies
    ClockSkew(hosts)               clock_skew     reactor hosts with (offset, drift) clocks
    Pollers(count, phase)          pollers        N pollers (the runner, N-1 replicas) poll one store
    Ties(probability, burst, resolution)
                                   ties           bursts sharing one fired_at; coarse clocks

Hooks: ``before_insert(workflow, now, subscription=None)`` just before an
execution row is written (raises :class:`InsertFailed` to refuse it),
``after_insert(workflow, now)`` just after it committed (an ambiguous
failure), ``poll_limit(sub, now, limit)`` how many firings a subscription may
take now, ``run_duration(workflow, now, base)`` how long a body runs (shared)
and ``stamps(reactor, now)`` the firings one workload event becomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fanoutsim.designs.faults import RUN_DURATION, LateCommit, Notifications, SlowWorkflow
from fanoutsim.kernel.faults import (
    CrashAt,
    CrashAtPoint,
    CrashRandomly,
    Fault,
    Hook,
    Window,
    active,
    checked_number,
    checks,
    declare,
    overlap,
)
from fanoutsim.kernel.timeutil import US

#: The reactor's crash points (the module's text says where each one is).
CRASH_POINTS = (
    "reactor.after_graphs_before_log",
    "poll.after_fetch",
    "poll.after_dispatch_before_watermark",
    "poll.before_batch_commit",
    "prune.mid_delete",
    "executor.after_claim",
)


class InsertFailed(Exception):
    """An execution insert that the database refused (or whose outcome was lost)."""


@dataclass(frozen=True)
class FailInserts(Fault):
    """Execution inserts (of ``workflow``, None: any) fail with ``probability``
    within ``window``; ``ambiguous``: the row commits, the caller hears "failed"."""

    probability: float = 1.0
    window: Window = None
    workflow: str | None = None
    ambiguous: bool = False
    kind = "fail_inserts"

    def check(self):
        self.check_fields(
            probability=checks.probability, window=checks.window, workflow=checks.optional_name, ambiguous=checks.flag
        )

    def acts_at(self, hook: str) -> bool:
        return hook == ("after_insert" if self.ambiguous else "before_insert")

    def _fails(self, run, workflow: str, now: int) -> bool:
        return (
            active(self.window, run.elapsed(now))
            and self.workflow in (None, workflow)
            and (self.probability >= 1 or run.rng(self).random() < self.probability)
        )

    def before_insert(self, run, workflow: str, now: int, subscription: dict | None = None, **where) -> None:
        """At the ``before_insert`` hook (not ``ambiguous``): raise
        :class:`InsertFailed` when this insert fails (inside the window, for the
        workflow, with ``probability``), so no row is written; else nothing."""
        if self._fails(run, workflow, now):
            run.note(now, f"insert for {workflow} refused")
            raise InsertFailed(f"injected: insert for workflow {workflow!r} refused")

    def after_insert(self, run, workflow: str, now: int, **where) -> None:
        """At the ``after_insert`` hook (``ambiguous``): raise :class:`InsertFailed`
        after the row committed, so the caller hears "failed" of a written row."""
        if self._fails(run, workflow, now):
            run.note(now, f"insert for {workflow} committed, outcome lost")
            raise InsertFailed(f"injected: insert for workflow {workflow!r} committed but reported failed")


#: What a :class:`Stall` does to its subscription: skip it, take ``batch_limit``
#: firings per tick, or fail its inserts.
STALL_MODES = ("pause", "throttle", "wedge")


@dataclass(frozen=True)
class Stall(Fault):
    """A subscription of ``workflow`` (and ``reactor``, ``tenant`` when given)
    paused, throttled to ``batch_limit`` or wedged during ``window``, as ``mode``
    says (:data:`STALL_MODES`); or, with ``target="workflow"``, the workflow's
    bodies wedged until the window ends."""

    workflow: str
    window: Window
    mode: str = "pause"
    reactor: str | None = None
    tenant: str | None = None
    batch_limit: int = 1
    target: str = "subscription"
    kind = "stall"
    order = 0  # a stuck subscription or body answers before a drawn failure or duration

    def check(self):
        self.check_fields(workflow=checks.name, reactor=checks.optional_name, tenant=checks.optional_name)
        if self.window is None:
            raise ValueError("stall.window is required: [start, end] in virtual seconds")
        self.check_fields(window=checks.window)
        if self.mode not in STALL_MODES:
            raise ValueError(f"stall.mode must be one of {', '.join(map(repr, STALL_MODES))}, got {self.mode!r}")
        if self.target not in ("subscription", "workflow"):
            raise ValueError(f"stall.target must be 'subscription' or 'workflow', got {self.target!r}")
        if self.target == "workflow" and self.mode != "wedge":
            raise ValueError("stall.target 'workflow' only supports mode 'wedge' (bodies hang until the window ends)")
        self.check_fields(batch_limit=checks.number(low=1, integer=True))

    @classmethod
    def check_together(cls, faults: list) -> None:
        for i, a in enumerate(faults):
            for b in faults[i + 1 :]:
                same = (a.workflow, a.reactor, a.tenant, a.target) == (b.workflow, b.reactor, b.tenant, b.target)
                if same and overlap(a.window, b.window) and (a.mode, a.batch_limit) != (b.mode, b.batch_limit):
                    raise ValueError(
                        f"contradictory stalls for workflow {a.workflow!r}: {a.mode} in {list(a.window)} "
                        f"overlaps {b.mode} in {list(b.window)}"
                    )

    def matches(self, sub: dict) -> bool:
        """Whether the subscription row ``sub`` is one this stall names (its
        workflow, and its reactor and tenant when the stall gives them)."""
        return (
            sub["workflow_name"] == self.workflow
            and (self.reactor is None or sub["reactor_name"] == self.reactor)
            and (self.tenant is None or sub["tenant_id"] == self.tenant)
        )

    def acts_at(self, hook: str) -> bool:
        if self.target == "workflow":
            return hook == "run_duration"
        return hook == "poll_limit" or (hook == "before_insert" and self.mode == "wedge")

    def before_insert(self, run, workflow: str, now: int, subscription: dict | None = None, **where) -> None:
        """At the ``before_insert`` hook (``mode="wedge"``): raise
        :class:`InsertFailed` for an insert of a matching subscription inside the
        window; else nothing."""
        if subscription is not None and active(self.window, run.elapsed(now)) and self.matches(subscription):
            raise InsertFailed(f"injected: subscription of {workflow!r} is wedged")

    def poll_limit(self, run, sub: dict, now: int, limit: int) -> int | None:
        """At the ``poll_limit`` hook: inside the window, for a matching
        subscription, 0 firings (``pause``) or at most ``batch_limit``
        (``throttle``); None (no say) otherwise."""
        if active(self.window, run.elapsed(now)) and self.matches(sub):
            if self.mode == "pause":
                return 0
            if self.mode == "throttle":
                return min(limit, self.batch_limit)
        return None

    def run_duration(self, run, workflow: str, now: int, base: float) -> float | None:
        """At the ``run_duration`` hook (``target="workflow"``): a body of the
        workflow started inside the window runs until the window ends (at least
        ``base``); None (no say) otherwise."""
        t = run.elapsed(now)
        if self.workflow == workflow and active(self.window, t):
            return max(base, self.window[1] - t)
        return None


@dataclass(frozen=True)
class ClockSkew(Fault):
    """Writers' clocks: each firing is stamped by a host drawn from ``hosts``,
    ``(offset seconds, drift seconds per second)`` each."""

    hosts: tuple
    kind = "clock_skew"
    single = True

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
            off = checked_number(h[0], f"clock_skew.hosts[{i}].offset")
            drift = checked_number(h[1], f"clock_skew.hosts[{i}].drift", low=-0.5, high=0.5)
            clean.append((float(off), float(drift)))
        object.__setattr__(self, "hosts", tuple(clean))

    def stamp(self, run, now: int, t: float) -> int:
        """The ``fired_at`` (µs) a host drawn from ``hosts`` stamps at ``now``,
        ``t`` seconds after the start: ``now + offset + drift * t``."""
        offset, drift = run.rng(self).choice(self.hosts)
        return now + round((offset + drift * t) * US)


@dataclass(frozen=True)
class Pollers(Fault):
    """``count`` pollers poll the same store — the runner and ``count - 1``
    replicas of it (``Pollers(1)`` is the runner alone) — ticking together or
    each at a seeded random ``phase``."""

    count: int
    phase: str = "aligned"
    kind = "pollers"
    single = True

    def check(self):
        self.check_fields(count=checks.number(low=1, integer=True))
        if self.phase not in ("aligned", "random"):
            raise ValueError(f"pollers.phase must be 'aligned' or 'random', got {self.phase!r}")


@dataclass(frozen=True)
class Ties(Fault):
    """With ``probability`` an event becomes ``burst`` firings sharing one
    fired_at; ``resolution`` (seconds) truncates every fired_at to a multiple of it."""

    probability: float = 0.0
    burst: int = 2
    resolution: float = 0.0
    kind = "ties"
    single = True

    def check(self):
        self.check_fields(
            probability=checks.probability, burst=checks.number(low=2, integer=True), resolution=checks.number(low=0)
        )
        if 0 < self.resolution < 0.5e-6:  # rounds to 0 µs: stamps cannot be truncated to it
            raise ValueError(
                f"ties.resolution must be 0 (off) or at least a microsecond (1e-06 seconds, "
                f"the clock's unit), got {self.resolution!r}"
            )

    def stamp(self, run, stamp: int) -> tuple[int, int]:
        """The truncated stamp and how many firings share it."""
        if self.resolution > 0:
            res = round(self.resolution * US)
            stamp -= stamp % res
        count = 1
        if self.probability > 0 and run.rng(self).random() < self.probability:
            count = self.burst
        return stamp, count


# -- the hooks ------------------------------------------------------------------
def _accepted(workflow: str, now: int, subscription: dict | None = None, **where) -> None:
    return None


def _taken(workflow: str, now: int, **where) -> None:
    return None


def _as_asked(sub: dict, now: int, limit: int) -> int:
    return limit


def _stamped_now(reactor: str, now: int) -> tuple[tuple[int, float], ...]:
    return ((now, 0.0),)


def _bind_stamps(run):
    """The writer's side: clock skew, ties and late commits, one stamp at a time."""
    skews, ties, late = run.plan.of(ClockSkew), run.plan.of(Ties), run.plan.of(LateCommit)
    if not (skews or ties or late):
        return None
    skew = skews[0] if skews else None
    tie = ties[0] if ties else None

    def stamps(reactor: str, now: int) -> list[tuple[int, float]]:
        t = run.elapsed(now)
        stamp = now if skew is None else skew.stamp(run, now, t)
        count = 1
        if tie is not None:
            stamp, count = tie.stamp(run, stamp)
        out = []
        for _ in range(count):
            delay = 0.0
            for f in late:
                delay = max(delay, f.draw(reactor, t, run.rng(f)))
            out.append((stamp, delay))
        return out

    return stamps


#: The hook ``before_insert(workflow, now, subscription=None)``, just before an execution
#: row is written: raising :class:`InsertFailed` refuses it (healthy: nothing).
BEFORE_INSERT = Hook("before_insert", healthy=_accepted)
#: The hook ``after_insert(workflow, now)``, just after an execution row committed:
#: raising :class:`InsertFailed` is an ambiguous failure (healthy: nothing).
AFTER_INSERT = Hook("after_insert", healthy=_taken)
#: The hook ``poll_limit(sub, now, limit)``: how many firings a subscription may take
#: now (healthy: ``limit``, the batch limit).
POLL_LIMIT = Hook("poll_limit", healthy=_as_asked)
#: The hook ``stamps(reactor, now)``: the ``(fired_at, commit delay seconds)`` of each
#: firing one workload event becomes (healthy: one, stamped now, no delay); optional.
STAMPS = Hook("stamps", healthy=_stamped_now, bind=_bind_stamps, required=False)

#: The reactor's declaration of its points, kinds and hooks (``Design.crash_points``,
#: ``Design.fault_kinds`` and the runtimes read it).
FAULTS = declare(
    "reactor",
    points=CRASH_POINTS,
    kinds=(
        CrashAt,
        CrashRandomly,
        CrashAtPoint,
        FailInserts,
        Stall,
        SlowWorkflow,
        LateCommit,
        ClockSkew,
        Pollers,
        Ties,
        Notifications,
    ),
    hooks=(BEFORE_INSERT, AFTER_INSERT, POLL_LIMIT, RUN_DURATION, STAMPS),
)


def limits_polls(faults) -> bool:
    """Whether ``faults`` may let a subscription take fewer firings than the
    batch limit (the poll loop then asks ``poll_limit`` for every subscription
    of every pass). An object that cannot say is asked."""
    acts = getattr(faults, "acts", None)
    return True if acts is None else acts("poll_limit")


def pollers_of(plan) -> Pollers:
    """The plan's replicas of the runner (one: just the runner)."""
    return (plan.of(Pollers) or [Pollers(1)])[0] if plan is not None else Pollers(1)


def check_names(plan, workflows: set[str], subscriptions: list[tuple[str, str, str]]) -> None:
    """Every workflow or subscription a fault of ``plan`` names must exist; lists what does."""
    known_wf = set(workflows) | {s[1] for s in subscriptions}
    for f in plan.faults:
        wf = getattr(f, "workflow", None)
        if wf is not None and wf not in known_wf:
            raise ValueError(
                f"{f.kind} names workflow {wf!r}, which has no subscription or "
                f"registration; known workflows: {', '.join(sorted(known_wf)) or 'none'}"
            )
        if isinstance(f, Stall) and f.target == "subscription":
            if not any(f.matches({"reactor_name": r, "workflow_name": w, "tenant_id": t}) for r, w, t in subscriptions):
                known = ", ".join(f"{r}->{w}@{t}" for r, w, t in subscriptions) or "none"
                raise ValueError(
                    f"stall names no existing subscription (workflow={f.workflow!r}, "
                    f"reactor={f.reactor!r}, tenant={f.tenant!r}); known: {known}"
                )


__all__ = [
    "CRASH_POINTS",
    "FAULTS",
    "InsertFailed",
    "FailInserts",
    "Stall",
    "STALL_MODES",
    "ClockSkew",
    "Pollers",
    "Ties",
    "BEFORE_INSERT",
    "AFTER_INSERT",
    "POLL_LIMIT",
    "STAMPS",
    "limits_polls",
    "pollers_of",
    "check_names",
]
