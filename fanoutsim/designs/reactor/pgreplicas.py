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
* ``pollers - 1`` processes of the role ``poller`` (``fanoutsim serve --role
  poller``, :mod:`.roles`: the poll loop only, as poller ``poller@PID``), until
  SIGTERM, when each writes its trace (``--trace``, Parquet).

Their traces are merged by time into one; the checker reads it with the
database's tables. Every execution a poller process dispatched is claimed and
run by this process's executor (``FOR UPDATE`` is not needed: the claim is one
``UPDATE ... WHERE status = 'pending'``, which PostgreSQL re-checks after a
row lock, so two executors never both claim one row)::

    python -m fanoutsim.designs.reactor.pgreplicas run postgresql://... 3
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.realtime import Realtime
from fanoutsim.kernel.runtime.processes import kill_all, merged_trace, serve_role, stderr_tail, stop_all

CONFIG = SchedulerConfig(reactor_poll_interval=0.05, executor_poll_interval=0.02)
REACTOR, WORKFLOW = "r", "wf"
# what a poller process serves: CONFIG's intervals, the workflow and the subscription
SCENARIO = f"""
name = "pollers"
[run]
seed = 0
until = 60.0
[config]
reactor_poll_interval = {CONFIG.reactor_poll_interval}
executor_poll_interval = {CONFIG.executor_poll_interval}

[[workflows]]
name = "{WORKFLOW}"
duration = 0.001

[[subscriptions]]
reactor = "{REACTOR}"
workflow = "{WORKFLOW}"
"""


class Merged:
    """What the checker reads: the runner's tables and config, every process's trace."""

    def __init__(self, main: Realtime, traces: list) -> None:
        self.config, self.store, self._main = main.config, main.store, main
        own = main.trace()
        self._trace = merged_trace([own, *traces])
        self._trace.history = own.history  # every firing was this process's

    def trace(self):
        return self._trace

    def subscriptions(self, tenant=None):
        return self._main.subscriptions(tenant)


def several_pollers(dsn: str, pollers: int = 3, seconds: float = 2.0, rate: float = 50.0) -> dict:
    """Run the runner and ``pollers - 1`` poller processes over ``dsn`` for
    ``seconds`` of workload, drain, check; returns the report, the pollers'
    names, the poller processes' pids, the counts of firings and executions,
    and what each poller process wrote to stderr after it served (``said``)."""
    from fanoutsim.designs.reactor.checker import check

    rt = Realtime(CONFIG, store=dsn)
    children, outs = [], []
    folder = Path(tempfile.mkdtemp(prefix="fanoutsim-pollers-"))
    try:
        rt.runner.register_workflow(WORKFLOW, duration=0.001)
        rt.runner.subscribe_workflow_to_reactor(REACTOR, WORKFLOW)
        scenario = folder / "pollers.toml"
        scenario.write_text(SCENARIO)
        for k in range(1, pollers):
            outs.append(str(folder / f"poller-{k}.parquet"))
            children.append(serve_role(dsn, "poller", outs[-1], scenario))
        rt.add_workload(REACTOR, rate, stop=seconds)
        rt.start()
        time.sleep(seconds + 0.5)  # the workload's end, and the last firings polled
        stop_all(children)
        said = {proc.pid: stderr_tail(proc) for proc in children}
        rt.stop()
        merged = Merged(rt, outs)
        report = check(merged)
        actors = set(merged.trace()["actor"])
        return {
            "report": report,
            "pollers": sorted(a for a in actors if str(a).startswith("poller")),
            "children": [proc.pid for proc in children],
            "firings": len(rt.firings()),
            "executions": len(rt.executions()),
            "said": said,
        }
    finally:
        kill_all(children)
        rt.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] != ["run"] or len(sys.argv) < 3:
        sys.exit("usage: python -m fanoutsim.designs.reactor.pgreplicas run postgresql://... [POLLERS]")
    out = several_pollers(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    print(json.dumps({k: v for k, v in out.items() if k != "report"}, indent=2))
    print(out["report"].total)
