"""Several reactor pollers as separate OS processes sharing one PostgreSQL.

The seed's scheduler runs one poller; run two and each reads a subscription's
watermark, fetches the firings past it and dispatches them before either
moves it — so both dispatch the same firings. Under the virtual clock that is
the ``Pollers`` fault; here it happens between real processes and real
READ COMMITTED transactions, and the reactor's own checker names it
(``several_pollers``) from the same trace and tables.

:func:`several_pollers` runs, over one PostgreSQL database (a DSN):

* this process: a full runner (``Realtime``, poller ``poller``): the workload,
  its poll loop, the executor and the prune loop;
* ``pollers - 1`` child processes, each a poll loop only (poller
  ``poller#k``: ``python -m fanoutsim.designs.reactor.pgreplicas poller DSN K
  OUT``), until SIGTERM, when each writes its trace to ``OUT`` (Parquet).

Their traces are merged by time into one; the checker reads it with the
database's tables. Every execution a child dispatched is claimed and run by
this process's executor (``FOR UPDATE`` is not needed: the claim is one
``UPDATE ... WHERE status = 'pending'``, which PostgreSQL re-checks after a
row lock, so two executors never both claim one row)::

    python -m fanoutsim.designs.reactor.pgreplicas run postgresql://... 3
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.engine import ReactorEngine
from fanoutsim.designs.reactor.realtime import Realtime

CONFIG = SchedulerConfig(reactor_poll_interval=0.05, executor_poll_interval=0.02)
REACTOR, WORKFLOW = "r", "wf"


class PollerReplica(Realtime):
    """A process that only polls: poller ``poller#replica``, no executor, no
    prune, no recovery (which would requeue the main runner's executions)."""

    def __init__(self, config: SchedulerConfig, store, replica: int) -> None:
        self.replica = replica
        super().__init__(config, store=store)

    def _new_engine(self, incarnation: int) -> ReactorEngine:
        engine = super()._new_engine(incarnation)
        engine.poller = f"poller#{self.replica}"
        return engine

    def _start_loops(self, engine: ReactorEngine) -> None:
        self._spawn(self._poll_loop(engine), "poll")


def serve_poller(dsn: str, replica: int, out: str) -> int:
    """The child: poll until SIGTERM, then write the trace to ``out``."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    rt = PollerReplica(CONFIG, dsn, replica)
    try:
        rt.registry.register_workflow(WORKFLOW)  # declared as in the runner; never run here
        rt.start()
        print("ready", flush=True)
        done.wait()
        rt.stop()
        pd.DataFrame(rt.trace()).to_parquet(out)
    finally:
        rt.close()
    return 0


class Merged:
    """What the checker reads: the runner's tables and config, every process's trace."""

    def __init__(self, main: Realtime, traces: list[pd.DataFrame]) -> None:
        self.config, self.store, self._main = main.config, main.store, main
        own = main.trace()
        merged = pd.concat([pd.DataFrame(own), *traces], ignore_index=True)
        merged = merged.sort_values("t", kind="stable").reset_index(drop=True)
        self._trace = type(own)(merged)
        self._trace.history = own.history

    def trace(self) -> pd.DataFrame:
        return self._trace

    def subscriptions(self, tenant=None) -> pd.DataFrame:
        return self._main.subscriptions(tenant)


def several_pollers(dsn: str, pollers: int = 3, seconds: float = 2.0, rate: float = 50.0) -> dict:
    """Run the runner and ``pollers - 1`` poll-only processes over ``dsn`` for
    ``seconds`` of workload, drain, check; returns the report and figures."""
    from fanoutsim.designs.reactor.checker import check

    rt = Realtime(CONFIG, store=dsn)
    children, outs = [], []
    folder = tempfile.mkdtemp(prefix="fanoutsim-pollers-")
    try:
        rt.runner.register_workflow(WORKFLOW, duration=0.001)
        rt.runner.subscribe_workflow_to_reactor(REACTOR, WORKFLOW)
        for k in range(1, pollers):
            out = str(Path(folder) / f"poller-{k}.parquet")
            proc = subprocess.Popen([sys.executable, "-m", __name__, "poller", dsn, str(k), out],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if proc.stdout.readline().strip() != "ready":
                proc.wait(30)
                raise RuntimeError(f"poller #{k} did not start: {proc.stderr.read()}")
            children.append(proc)
            outs.append(out)
        rt.add_workload(REACTOR, rate, stop=seconds)
        rt.start()
        time.sleep(seconds + 0.5)  # the workload's end, and the last firings polled
        for proc in children:
            proc.send_signal(signal.SIGTERM)
        for k, (proc, out) in enumerate(zip(children, outs), start=1):
            proc.wait(60)
            if proc.returncode != 0 or not os.path.exists(out):
                raise RuntimeError(f"poller #{k} exited with {proc.returncode}: {proc.stderr.read().strip()}")
        rt.stop()
        report = check(Merged(rt, [pd.read_parquet(o) for o in outs]))
        actors = set(rt.trace()["actor"]) | {a for o in outs for a in pd.read_parquet(o)["actor"]}
        return {"report": report, "pollers": sorted(a for a in actors if str(a).startswith("poller")),
                "firings": len(rt.firings()), "executions": len(rt.executions())}
    finally:
        for proc in children:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        rt.close()
        for o in outs:
            if os.path.exists(o):
                os.remove(o)
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)


if __name__ == "__main__":
    if sys.argv[1:2] == ["poller"]:
        sys.exit(serve_poller(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    out = several_pollers(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    print(json.dumps({k: v for k, v in out.items() if k != "report"}, indent=2))
    print(out["report"].total)
