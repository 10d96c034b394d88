"""The producer side of a real run: commit at the load's times, and terminate the listener at the case's.

The producer is a process of its own (:mod:`.producer_process`), as an
application writing jobs is: in the worker's process its thread would compete
for the GIL with the worker's event loop, and a commit's return would be noted
after the worker had already run the job. It uses the library's own enqueue
call on a connection of its own and notes when each call returned (the INSERT
committed, its NOTIFY sent). Both processes read ``time.monotonic()``, one
clock on the machine.

The terminations run on a thread of the worker's process, since only the
worker knows its listener's backend pid at that moment.
"""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from fanoutsim.designs.outbox.realqueues import commitclock, producer_process
from fanoutsim.designs.outbox.realqueues.load import Case, PoissonLoad
from fanoutsim.designs.outbox.realqueues.record import RealRun

LEAD = 0.1  # seconds between "go" and the producer's t0, so both sides share it


class Producer:
    """Drives the producer process, and the terminations, from the worker's process."""

    def __init__(self, library: str, dsn: str, load: PoissonLoad, case: Case) -> None:
        self.library, self.dsn, self.load, self.case = library, dsn, load, case
        self.started = time.monotonic()  # the run's start, for its wall_seconds
        self.t0 = self.t0_wall = 0.0  # the producer's start: monotonic, and time.time()
        self.commits: list[tuple[Any, float]] = []  # (job id, monotonic time its enqueue call returned)
        self.terminated: list[float] = []  # time.time() readings
        self._process: subprocess.Popen | None = None
        self._killer: threading.Thread | None = None

    def _receive(self, timeout: float):
        """The producer's next line, within ``timeout`` seconds."""
        assert self._process is not None and self._process.stdout is not None
        if not select.select([self._process.stdout], [], [], timeout)[0]:
            raise RuntimeError(f"the producer process said nothing in {timeout:g} s")
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the producer process ended (exit code {self._process.wait(10)})")
        what, value = json.loads(line)
        if what == "error":
            raise RuntimeError(f"the producer process failed: {value}")
        return value

    def _send(self, value) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(value) + "\n")
        self._process.stdin.flush()

    def launch(self) -> None:
        """Start the producer process (it connects while the worker sets up)."""
        self._process = subprocess.Popen(
            [sys.executable, "-P", producer_process.__file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._send({"library": self.library, "dsn": self.dsn, "offsets": self.load.offsets()})

    def ready(self) -> None:
        """Wait until the producer process has connected."""
        if self._process is None:
            self.launch()
        self._receive(60.0)

    def go(self, kill: Callable[[], None] | None = None) -> None:
        """Commit from now on; ``kill()`` at each of the case's termination times."""
        self.t0, self.t0_wall = time.monotonic() + LEAD, time.time() + LEAD
        self._send(["go", self.t0])
        times = self.case.terminations(self.load.offsets()[-1])
        if kill is not None and times:
            self._killer = threading.Thread(target=self._kill_at, args=(times, kill), daemon=True)
            self._killer.start()

    def _kill_at(self, times: list[float], kill: Callable[[], None]) -> None:
        for t in times:
            delay = self.t0 + t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            kill()
            self.terminated.append(time.time())

    def join(self) -> None:
        """Wait until the producer process has made every commit; keep them."""
        self.commits = [tuple(c) for c in self._receive(self.load.offsets()[-1] + 120.0)]
        assert self._process is not None
        self._process.wait(30.0)
        if self._killer is not None:
            self._killer.join(30.0)

    def stop(self) -> None:
        """End the producer process if it still runs (after an error on the worker's side)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10.0)
        for stream in (self._process.stdin, self._process.stdout) if self._process else ():
            if stream is not None:
                stream.close()

    def ids(self) -> list[Any]:
        return [job_id for job_id, _ in self.commits]

    def last_commit(self) -> float:
        return self.commits[-1][1] if self.commits else self.t0

    def record(
        self,
        *,
        poll_interval: float,
        fetch_size: int,
        handled: dict,
        heard: dict,
        lost: Callable[[Any], bool],
        reconnects: int,
        fetches: list | None = None,
        events: list | None = None,
    ) -> RealRun:
        """The run, job by job in commit order, in seconds after the producer's t0. ``handled``
        and ``heard`` map a job id to a ``time.time()`` reading, as the commits read from
        :mod:`.commitclock` do (the server's); ``fetches`` are ``(called, returned, jobs)`` and
        ``events`` ``(heard, operation, dropped)``, ``time.time()`` readings too (a fetch's
        jobs become their places in commit order)."""
        t0 = self.t0_wall
        committed = commitclock.read(self.dsn)
        missing = [job_id for job_id in self.ids() if job_id not in committed]
        if missing:
            raise RuntimeError(f"the commit clock has no commit of {len(missing)} jobs (first: {missing[0]})")
        returned = dict(self.commits)
        order = sorted(self.ids(), key=lambda job_id: committed[job_id])
        place = {job_id: k for k, job_id in enumerate(order)}

        def rel(t):
            return None if t is None else t - t0

        return RealRun(
            library=self.library,
            version=version(self.library),
            case=self.case.name,
            poll_interval=poll_interval,
            fetch_size=fetch_size,
            commits=[committed[j] - t0 for j in order],
            handled=[rel(handled.get(j)) for j in order],
            hint_at=[rel(heard.get(j)) for j in order],
            hint_lost=[bool(lost(j)) for j in order],
            returned=[returned[j] - self.t0 for j in order],
            terminations=[t - t0 for t in self.terminated],
            reconnects=reconnects,
            wall_seconds=time.monotonic() - self.started,
            fetches=[[a - t0, b - t0, [place[j] for j in jobs]] for a, b, jobs in fetches or ()],
            events=[[at - t0, op, dropped] for at, op, dropped in events or ()],
        )


async def producing(
    library: str, dsn: str, load: PoissonLoad, case: Case, work: Callable[[Producer], Awaitable[RealRun]]
) -> RealRun:
    """``work`` (a worker of ``library``'s, set up and run) beside the producer process,
    launched first so that it starts and connects while the worker sets up, and stopped
    however ``work`` ends."""
    producer = Producer(library, dsn, load, case)
    producer.launch()
    try:
        return await work(producer)
    finally:
        producer.stop()


async def drive(
    producer: Producer,
    handled: dict,
    poll_interval: float,
    *,
    listening: threading.Event | None,
    listener: str,
    kill: Callable[[], None] | None = None,
) -> None:
    """A run, once its worker is up: wait until the worker's ``listener`` LISTENs (unless
    it does not listen: ``listening`` None), let its first, empty fetch pass, produce, and
    wait until every job is handled or two polls and 5 s have passed since the last commit."""
    if listening is not None and not await asyncio.to_thread(listening.wait, 30.0):
        raise RuntimeError(f"{listener} did not LISTEN within 30 s")
    await asyncio.sleep(0.3)  # past the worker's first, empty fetch
    await produce(producer, kill)
    await await_handled(handled, producer.ids(), producer.last_commit() + 2 * poll_interval + 5.0)


async def produce(producer: Producer, kill: Callable[[], None] | None = None) -> None:
    """Let the producer process commit (launched already, or now); wait for its last commit."""
    await asyncio.to_thread(producer.ready)
    producer.go(kill)
    await asyncio.to_thread(producer.join)


async def await_handled(handled: dict, ids: list, deadline: float) -> None:
    """Wait until every job of ``ids`` was handled, or the monotonic ``deadline`` passed."""
    while time.monotonic() < deadline and not all(job_id in handled for job_id in ids):
        await asyncio.sleep(0.05)
