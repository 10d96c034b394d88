"""What the two clocks' drivers share: the binding's defaults, planned crashes,
restarts after a downtime and ``_later``, each written once as a loop.

A driver runs a design's loops (generators that yield the requests of
:mod:`.loops`) and owns the life cycle of the process the design models: its
incarnations, a crash (the engine and every loop of the incarnation die; the
open transaction rolls back) and a restart. :class:`~.virtual.VirtualRuntime`
answers the requests with SimPy events, :class:`~.wallclock.SteppedWallRuntime`
with real waits on threads. Both give the loops the same members:

``_call(engine.step, ...)``   a store step now (None: its incarnation is dead,
                              or a Crash inside it took the process down)
``_outside(engine.step, ...)``  a step that runs the user's own code (a
                              consumer's ``fn``): outside the store lock, so
                              consumers overlap on the wall clock
``_running(engine)``          whether a loop of ``engine`` should take more work
``_live(engine)``             whether ``engine`` is the live incarnation's
``_spawn(loop, name, key)``   a loop of the live incarnation (dies at a crash)
``_spawn_task(loop, name)``  a short loop of the incarnation spawned in numbers
                              (a workflow body): under SimPy no process of its own
``_service(loop, name)``      a loop of the runtime (a workload, a timer): it
                              lives across incarnations and asks ``up`` itself
``_later(delay, fn)``         ``fn()`` after ``delay`` seconds
``_arm(key)`` / ``_signal(key)`` / ``_signal_all()`` / ``_woken(wake)``
                              wakes: a loop arms one before it reads, others
                              signal it (a hint, a poll); ``Wait(wake, timeout)``
``_until_written(ready, since)``
                              a wake that fires once a step wrote and ``ready()``;
                              at once if the store was written after ``since`` (a
                              ``store.writes`` the loop read in the step that found
                              nothing: a write between that step and the sleep)
``_rng(name, *parts)``        a named, seeded random stream of this process
``clock()``                   a mark for ``Work(seconds, since=mark)``
``_runs(group)``              whether this process runs a group of loops: its
                              role's (:mod:`.roles`; every group under ``all``)

The design implements the :mod:`.binding` hooks (``_new_engine``,
``_start_loops``, ``_crashed``) in one runtime class, and a thin face per
clock picks the driver (``class OutboxSimulation(OutboxRuntime, VirtualRuntime)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from fanoutsim.kernel.faults import CrashAt, CrashRandomly, bind, check_faults
from fanoutsim.kernel.runtime.loops import Sleep, Until, arrivals
from fanoutsim.kernel.runtime.roles import ALL, Roles
from fanoutsim.kernel.store.record import open_claimed
from fanoutsim.kernel.trace import NullTrace, Trace, TraceSchema

if TYPE_CHECKING:
    from fanoutsim.kernel.faults import FaultPlan, Faults
    from fanoutsim.kernel.metrics import Metrics
    from fanoutsim.kernel.store import Store

Loop = Generator[Any, Any, Any]  # a generator that yields the requests of .loops


class Driver:
    """The members both drivers share (see the module's text)."""

    _noun = "runtime"
    # the fault kinds and crash points the design has (None: any), checked at
    # construction, and the hooks a hand-written plan must answer (its faults module's)
    #: The fault kinds a plan of this design may hold (None: any); another is refused.
    fault_kinds: tuple[str, ...] | None = None
    #: The design's crash points (None: any); a ``crash_at_point`` elsewhere is refused.
    crash_points: tuple[str, ...] | None = None
    #: What a hand-written fault plan (not a FaultPlan) must answer: ``point`` and the
    #: design's required hooks.
    fault_hooks: tuple[str, ...] = ("point",)
    # how far in the past a due time read from ``now`` just before a call may be
    # and still mean "now" (the wall clock moves between the read and the call)
    _due_slack = 0.0
    #: Whether a step may go on through work that takes no time (several rows begun
    #: and finished in one call). Under SimPy nothing runs between them, as no time
    #: passes; on the wall clock a writer or a crash may, and a step holds the store
    #: lock, so there a step ends at each row.
    zero_time_together = True

    def workload_origin(self) -> float | None:
        """When a workload added now begins, for :func:`~.loops.arrivals`: None
        under SimPy, where a loop first runs at the instant it is added."""
        return None

    def arrivals(
        self, rate: float, start: float, stop: float | None, rng: Any, arrive: Callable[[float], object]
    ) -> Generator[Sleep | Until, None, None]:
        """A writer's loop for a workload added now: :func:`~.loops.arrivals` on
        this driver's clock, from its :meth:`workload_origin`."""
        return arrivals(lambda: self.now, rate, start, stop, rng, arrive, self.workload_origin())

    #: The design's names for its trace's columns (``who``, ``what``, ``where``).
    trace_schema = TraceSchema()  # the design's names for its trace's columns
    # the design's roles (see .roles; None: it runs as one process), and this process's
    #: The parts of the design's process one OS process may run (None: it runs as one).
    roles: Roles | None = None
    #: The part of the process this runtime runs: ``"all"`` (the default), or one of :attr:`roles`.
    role = ALL
    _groups: frozenset[str] | None = None  # the loop groups this process runs (None: every one)

    #: The live incarnation's engine (every in-memory object of the process); None while down.
    engine: Any
    #: How many times the process has restarted: 0 for the first incarnation.
    incarnation: int
    #: The run's seed: every random draw of the run comes from streams named after it.
    seed: int  # the run's seed (the face sets it)
    #: The wall time virtual 0 stands for, in epoch microseconds (the wall clock: its start).
    start_us: int  # the wall time virtual 0 stands for, epoch microseconds
    # what each driver sets up (VirtualRuntime, SteppedWallRuntime)
    #: The transactional store, the durable truth of the run (its tables outlive a crash).
    store: Store
    #: The run's :class:`~fanoutsim.faults.FaultPlan` (None: a healthy run, or a plan written by hand).
    plan: FaultPlan | None
    #: What the engine's steps ask at their named points and hooks: the plan bound to this
    #: run, a hand-written plan, or :class:`~fanoutsim.faults.NoFaults`.
    faults: Faults
    #: The run's counters and gauges (:meth:`metrics` reads them with the tables' sizes).
    metrics_registry: Metrics
    _trace: Trace
    _armed: dict[Any, Any]  # the wakes loops armed, by key (a driver's own event type)
    _sleepers: list[tuple[Any, Callable[[], bool]]]  # (wake, ready) of loops asleep until a write
    _slept_at: int  # store.writes when the sleepers were last asked

    if TYPE_CHECKING:  # what each driver defines, named here for the checker only

        @property
        def now(self) -> float: ...

        def now_us(self) -> int: ...

        def crash(self, point: str = "manual", downtime: float | None = None) -> None: ...

        def restart(self) -> None: ...

        def _service(self, loop: Loop, name: str = "service") -> Any: ...

        @staticmethod
        def _fire(wake: Any) -> None: ...

    @property
    def traced(self) -> bool:
        """Whether this run records its trace (``trace=True``): what a checker reads."""
        return not isinstance(self._trace, NullTrace)

    @property
    def up(self) -> bool:
        """Whether the process is up (not crashed, stopped or closed)."""
        return self.engine is not None

    # -- what both drivers' _open do ------------------------------------------------
    def _check_faults(self, faults: object) -> None:
        """Refuse a plan with a fault kind, crash point or hook this design does
        not have, before anything is opened."""
        check_faults(
            faults,
            design=getattr(self, "design", type(self).__name__),
            kinds=self.fault_kinds,
            points=self.crash_points,
            hooks=self.fault_hooks,
        )

    def _claim(self, opener: Callable[[Any], Store], store: Any) -> Store:
        """``opener(store)``, recorded as this design's; a store of another design is refused by name."""
        return open_claimed(opener, store, getattr(self, "design", None))

    def _observe(
        self, seed: int, faults: object, metrics: Metrics, trace: Callable[[TraceSchema], Trace] | None
    ) -> None:
        """The run's ``metrics``, its trace (None: kept by no one, a :class:`NullTrace`)
        and the fault plan bound to the seed, the start and that trace."""
        self.metrics_registry = metrics
        self._trace = NullTrace(self.trace_schema) if trace is None else trace(self.trace_schema)
        self.plan, self.faults = bind(faults, seed=seed, start_us=self.start_us, trace=self._trace)

    # -- roles: one part of the process per OS process ------------------------------
    def _take_role(self, role: str) -> None:
        """Run only ``role``'s groups of loops (one role of :attr:`roles`, or
        several joined by commas); a face calls it before its loops start."""
        if role == ALL:
            return
        if self.roles is None:
            raise ValueError(
                f"the {getattr(self, 'design', type(self).__name__)} design has no role {role!r}; its roles: {ALL}"
            )
        chosen = self.roles.check(role)
        self.role, self._groups = chosen.name, chosen.groups

    def _runs(self, group: str) -> bool:
        """Whether this process runs the loops of ``group`` (every group under ``all``)."""
        groups = self._groups
        return groups is None or group in groups

    def _refuse_unless(self, group: str, what: str) -> None:
        """A ValueError unless this process runs ``group``: ``what`` (a workload)
        belongs to the roles that do."""
        if not self._runs(group):
            others = [name for name, r in (self.roles or {}).items() if group in r.groups]
            raise ValueError(
                f"role {self.role!r} runs no {what}; {' or '.join(repr(o) for o in others)} "
                f"{'does' if len(others) == 1 else 'do'}"
            )

    # -- the binding's defaults ---------------------------------------------------
    def _new_engine(self, incarnation: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement _new_engine(incarnation)")

    def _start_loops(self, engine: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _start_loops(engine)")

    def _crashed(self) -> None:
        """A hook: what else dies with the process (a listener's connection)."""

    def _live(self, engine: Any) -> bool:
        """Whether ``engine`` belongs to the live incarnation (replicas may too)."""
        return engine is self.engine

    # -- loops of the runtime, written once ---------------------------------------
    def _schedule_crashes(self) -> None:
        """A loop for each crash the plan puts at a time or a rate."""
        if self.plan is None:
            return
        for spec in self.plan.of(CrashAt):
            self._service(self._crash_at(spec), f"crash-at-{spec.at:g}")
        for randomly in self.plan.of(CrashRandomly):
            self._service(self._crash_randomly(randomly), "crash-randomly")

    def _crash_at(self, spec: CrashAt) -> Loop:
        if spec.at > self.now:
            yield Sleep(spec.at - self.now)
        if self.engine is not None:  # a crash while down is no crash
            self._trace.add(self.now_us(), "fault", "faults", detail=f"crash at t={spec.at}")
            self.crash("time", spec.downtime.sample(self.faults.rng(spec)))

    def _crash_randomly(self, spec: CrashRandomly) -> Loop:
        rng = self.faults.rng(spec)
        start, end = spec.window or (0.0, math.inf)
        if start > self.now:
            yield Sleep(start - self.now)
        while True:
            yield Sleep(rng.expovariate(1.0 / spec.mean_gap))
            if self.now >= end:
                return
            if self.engine is not None:
                self._trace.add(self.now_us(), "fault", "faults", detail="random crash")
                self.crash("random", spec.downtime.sample(rng))

    def _restart_after(self, downtime: float, incarnation: int) -> Loop:
        yield Sleep(downtime)
        # only the incarnation that crashed: one restarted by hand meanwhile (and
        # perhaps crashed again, to stay down) is not revived by this old timer
        if self.incarnation == incarnation:
            self.restart()

    @staticmethod
    def _later_loop(delay: float, fn: Callable[[], object]) -> Loop:
        yield Sleep(delay)
        fn()

    # -- wakes, written once: a driver says how one fires (``_fire``) ---------------
    def _signal(self, key: Any) -> None:
        """Wake the loop that armed ``key`` (if it waits)."""
        wake = self._armed.get(key)
        if wake is not None:
            self._fire(wake)

    def _signal_all(self) -> None:
        for wake in list(self._armed.values()):
            self._fire(wake)

    def _wake_sleepers(self) -> None:
        """After a step that wrote: fire the wake of each loop asleep until a
        write whose question now says yes (``_until_written``)."""
        self._slept_at = self.store.writes
        waiting = []
        for wake, ready in self._sleepers:
            if ready():
                self._fire(wake)
            else:
                waiting.append((wake, ready))
        self._sleepers = waiting

    def _engine_or_raise(self) -> Any:
        """The live engine, for an API call that is no engine step; an error while down."""
        engine = self.engine
        if engine is None:
            raise RuntimeError(self._down_message())
        return engine

    def _down_message(self) -> str:
        return f"the {self._noun} is down (crashed); call restart() first"
