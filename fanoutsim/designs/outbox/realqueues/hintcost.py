"""Measure what a hint costs on this machine, for the presets' hint latency.

    python -m fanoutsim.designs.outbox.realqueues.hintcost            # print a summary
    python -m fanoutsim.designs.outbox.realqueues.hintcost --write    # and write the data file

For each library, one worker with hints on runs a seeded Poisson load (5 jobs/s,
400 jobs) on a throwaway embedded PostgreSQL, one library after the other (so
neither disturbs the other's timings); the producer is a process of its own.
Per job it records (see :class:`~.record.RealRun`):

``hint_latency_s``     commit -> the worker's notification handler heard the
                       job's hint: NOTIFY's delivery and the wake-up. The commit
                       time is the server's clock at COMMIT (:mod:`.commitclock`),
                       the handler's is the worker's ``time.time()``: one clock;
``read_cost_s``        hint heard -> the job's handler began, for each round of
                       fetches a job's own hint began (the worker was waiting: its
                       last fetch had found nothing; the next took that job first):
                       the worker's wake-up, the fetch (procrastinate: a pool
                       connection check and ``procrastinate_fetch_job_v2``;
                       pgqueuer: its dequeue) and the dispatch to the handler;
``empty_fetch_s``      each fetch that found nothing, called -> returned (the
                       window of procrastinate's lost wake-up);
``handled_latency_s``  commit -> handler began, every job.

The data file (:data:`~fanoutsim.designs.outbox.presets.HINT_COST_FILE`) keeps the
samples in seconds, rounded to the microsecond, with when and on what they were
measured; the presets read their hint latency from it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from importlib.metadata import version

from fanoutsim.designs.outbox.presets import HINT_COST_FILE
from fanoutsim.designs.outbox.realqueues.harness import LIBRARIES, POLL_INTERVAL, run_real, server
from fanoutsim.designs.outbox.realqueues.load import PoissonLoad
from fanoutsim.kernel.stats import keep_measurement, sample_line, samples_json

METHOD = (
    "one worker per library with hints on, a seeded Poisson load of {jobs} jobs at {rate:g}/s "
    "(seed {seed}), poll interval {poll:g} s, on an embedded PostgreSQL ({postgres}) over a Unix "
    "socket; the producer a process of its own, committing through the library's enqueue call. "
    "Commit: clock_timestamp() in a deferred constraint trigger (fires at COMMIT) on the job table; "
    "the worker's times: time.time(), the same clock. hint_latency_s: commit -> the worker's "
    "notification handler heard the job's hint; read_cost_s: hint heard -> handler began, for each "
    "round of fetches a job's own hint began (the fetch before it had found nothing, the next took "
    "that job first); empty_fetch_s: a fetch that found nothing, called -> returned (the library's "
    "fetch_job / dequeue, timed around the call); handled_latency_s: commit -> handler began. "
    "Seconds, rounded to 1 us."
)


def _rounded(x) -> list[float]:
    return [round(float(v), 6) for v in x]


def _postgres_version(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as con:
        return str(con.execute("SHOW server_version").fetchone()[0])


def measure(jobs: int = 400, rate: float = 5.0, seed: int = 1, dsn: str | None = None) -> dict:
    """The hint cost of each library, as the data file holds it."""
    load = PoissonLoad(rate=rate, jobs=jobs, seed=seed)
    out: dict = {"libraries": {}}
    with server(dsn) as url:
        postgres = _postgres_version(url)
        for library in LIBRARIES:
            run = run_real(library, "hints", load=load, poll_interval=POLL_INTERVAL, dsn=url)
            out["libraries"][library] = {
                "version": run.version,
                "jobs": len(run.commits),
                "unhandled": run.unhandled(),
                "hint_latency_s": _rounded(run.hint_latencies()),
                "read_cost_s": _rounded(run.read_costs()),
                "empty_fetch_s": _rounded(run.fetch_costs(False)),
                "handled_latency_s": _rounded(run.latencies()),
            }
    out = {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "postgresql": postgres,
            "psycopg": version("psycopg"),
            "asyncpg": version("asyncpg"),
            # the machine is shared: how busy it was, over the last 1 / 5 / 15 minutes
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "method": METHOD.format(jobs=jobs, rate=rate, seed=seed, poll=POLL_INTERVAL, postgres=postgres),
        **out,
    }
    return out


def summary(data: dict) -> str:
    lines = [
        f"measured {data['measured']} on {data['machine']['cpus']} cpus, PostgreSQL {data['machine']['postgresql']}"
    ]
    for library, d in data["libraries"].items():
        for key in ("hint_latency_s", "read_cost_s", "empty_fetch_s", "handled_latency_s"):
            lines.append(sample_line(f"{library} {d['version']:>7}", key, d[key]))
    return "\n".join(lines)


def dumps(data: dict) -> str:
    """The data file's text: indented, each list of samples on one line."""
    return samples_json(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fanoutsim.designs.outbox.realqueues.hintcost",
        description="Measure the hint cost of procrastinate and pgqueuer here.",
    )
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--write", action="store_true", help=f"write {HINT_COST_FILE.name} beside the presets")
    args = parser.parse_args(argv)
    data = measure(jobs=args.jobs)
    keep_measurement(data, summary(data), HINT_COST_FILE if args.write else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
