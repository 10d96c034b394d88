"""The reactor runner on the wall clock: the same loops, threads, real time.

The loops and workloads are :class:`~.runtime.ReactorRuntime`'s, written once
for both clocks; this face picks the wall driver
(:class:`~fanoutsim.kernel.runtime.faces.WallFace`, over
:class:`~fanoutsim.kernel.runtime.wallclock.SteppedWallRuntime`: a thread per
loop and per running workflow body, ``time.time()`` as the clock). The store
is a DuckDB file by default, so what a run wrote outlives the process — kill
it with ``kill -9`` and a new ``Realtime`` over the same file resumes from the
tables (its first step requeues the executions the dead process claimed).
Computation graphs run in the thread that fires, as in the core.

A crash — a :class:`~fanoutsim.kernel.faults.Crash` at a named point, ``CrashAt``,
``CrashRandomly`` or :meth:`Realtime.crash` — is an instant: every store step
goes through one lock, and the crash takes the engine away under it, so no
thread of the dead incarnation touches the tables afterwards. Bodies in hand
are abandoned (their rows stay 'running' until the next incarnation's
recovery requeues them); after the downtime a new engine starts over the same
tables.

Life cycle::

    rt = Realtime(config, store="run.duckdb")   # opens the file; loops not running
    rt.runner.subscribe_workflow_to_reactor(...)
    rt.start()            # loops run in the background; returns at once
    rt.fire(...)          # any thread
    rt.stop()             # graceful and bounded: the pass in hand finishes
    rt.close()            # releases the file

``start()`` twice raises; ``stop()`` twice is a no-op; ``fire()`` after
``stop()`` raises (the runner process is gone; reads still work until
``close()``). ``with Realtime(...) as rt:`` starts, then stops and closes.

Every start and every clean stop is a row of ``runner_log``: a start that
follows no stop is how a later checker knows the process was killed.

``role`` runs one part of the runner, several processes sharing one
PostgreSQL database (:mod:`.roles`: ``poller``, ``executor``, ``prune``, ``writers``;
``all``, the default, is the whole runner).
"""

from __future__ import annotations

from fanoutsim.designs.reactor.runtime import SAFETY_CLAIM, ReactorRuntime
from fanoutsim.kernel.runtime.faces import WallFace

__all__ = ["Realtime", "SAFETY_CLAIM"]


class Realtime(ReactorRuntime, WallFace):
    """The reactor subscription design running for real, on the wall clock:
    ``Realtime(config=None, store="run.duckdb", faults=None, *, seed=0,
    trace=True, stop_timeout=10.0, role="all")``."""

    def _down_message(self) -> str:
        if self._state in ("stopped", "closed"):
            return f"the runner is {self._state}; fire and the runner API need a started runner"
        return "the runner is down (crashed) and will restart after its downtime"

    def _started(self, start_us: int) -> None:
        if self.plan is not None:
            self.check_plan()  # every workflow or subscription it names must exist
