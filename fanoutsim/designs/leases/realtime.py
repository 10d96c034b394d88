"""Leased durable consumers on the wall clock: the same loops, threads, real time.

The loops and API are :class:`~.runtime.LeaseRuntime`'s, written once for both
clocks; this face picks the wall driver
(:class:`~fanoutsim.kernel.runtime.faces.WallFace`, over
:class:`~fanoutsim.kernel.runtime.wallclock.SteppedWallRuntime`: a thread per
loop and per worker, ``time.time()`` as the clock; a worker's ``fn`` runs for
real in its own thread). The store is a DuckDB file by default, so the log,
the consumers, their checkpoints, leases, retries and dead letters outlive
the process: a new ``LeaseRealtime`` over the same file (after a stop, a crash
or ``kill -9``) resumes from the checkpoints.

Times a user passes — workload ``start``/``stop``, fault windows, ``CrashAt``
— are seconds since :meth:`LeaseRealtime.start` (before it: since the runtime
was made), the scale of :attr:`LeaseRealtime.now`, as they are virtual
seconds since the start under SimPy. Lease lengths are real seconds: the
seed's range, 5 through 900, holds on either clock.

A crash is an instant: every store step goes through one lock, and the crash
takes the engine away under it, so no thread of the dead incarnation touches
the tables afterwards (a worker in its sleep is woken and gives up; an ``fn``
still running when the node dies is treated as cut off before its effect).
Leases held by dead workers stay in the table until recovery expires them.

Life cycle::

    rt = LeaseRealtime(store="leases.duckdb")
    rt.register_consumer("indexer", fn=index_event, lease_seconds=30)
    rt.start()                     # threads run in the background; returns at once
    rt.publish("org-1", "ticket.changed", {"ticket": 7})   # any thread
    rt.stop()                      # graceful and bounded: workers in hand finish
    rt.close()                     # releases the file

``role`` runs one part of the node, several processes sharing one PostgreSQL
database (:mod:`.roles`: ``clients``, ``recovery``, ``retention``,
``publishers``; ``all``, the default, is the whole node).

``start()`` twice raises; ``stop()`` twice is a no-op; ``publish()`` (and the
rest of the broker API) after ``stop()`` raises; reads — the table views,
``status``, ``trace``, ``metrics`` — work until ``close()``. Every start and
every clean stop is a row of ``runner_log``, so a start that follows no stop
marks a kill.
"""

from __future__ import annotations

from fanoutsim.designs.leases.identity import consumer_key
from fanoutsim.designs.leases.runtime import WORKERS_PER_LEASE, LeaseRuntime
from fanoutsim.kernel.runtime.faces import WallFace
from fanoutsim.kernel.runtime.wallclock import wall_us

__all__ = ["LeaseRealtime", "WORKERS_PER_LEASE"]


class LeaseRealtime(LeaseRuntime, WallFace):
    """Leased durable consumers running for real, on the wall clock:
    ``LeaseRealtime(config=None, store="leases.duckdb", faults=None, *, seed=0,
    trace=True, stop_timeout=10.0, database="default", role="all")``."""

    _api_words = "publish and the broker API"  # what a stopped node's message says needs it running

    def _built(self) -> None:
        self._reader = self._new_engine(0)  # for reads only (status), whatever the node's state

    def status(self, consumer: str, *, caller=None) -> dict | None:
        """What ``riffdb event status`` tells of ``consumer`` (see
        :func:`~fanoutsim.designs.leases.consumers.status`). A read of the tables: it
        works while the node is down or stopped too, until :meth:`close`."""
        consumer = consumer_key(consumer)
        self._authorize("status", consumer, caller)
        with self._proc:
            if self._state == "closed":
                raise RuntimeError("the node is closed; its store is released")
            return self._reader.status(wall_us(), consumer)
