"""Run the real libraries: one worker per (library, case), each in a database of its own.

:func:`run_real` runs one in this process; :func:`run_real_all` runs several
at once, each in a process of its own (``python -m`` this module): by default
three at a time, one library's three cases, then the other's — about 1.5 to 2.5
minutes for the six on two busy cores. More at once is quicker and disturbs the
millisecond timings of the runs with hints (each worker and its producer
compete for the same cores). Each run gets a new
database on the server (``CREATE DATABASE``, dropped after): the libraries'
tables and NOTIFY channels have fixed names, and a database keeps both apart.
Without a DSN, a throwaway embedded PostgreSQL 16 is started
(:class:`fanoutsim.kernel.pg.EmbeddedServer`, the ``postgres`` extra).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from fanoutsim.designs.outbox.realqueues.load import CASES, Case, PoissonLoad
from fanoutsim.designs.outbox.realqueues.record import RealRun

LIBRARIES = ("procrastinate", "pgqueuer")
# what each run imports: the library, and the driver its worker runs on
REQUIRES = {
    "procrastinate": ("procrastinate", "psycopg", "psycopg_pool"),
    "pgqueuer": ("pgqueuer", "asyncpg", "psycopg"),
}
POLL_INTERVAL = 2.0  # seconds: issue 28's runs (procrastinate's fetch_job_polling_interval, pgqueuer's dequeue_timeout)
DEFAULT_LOAD = PoissonLoad()  # one shared default: the load is a frozen dataclass, so no call can change it
RUN_TIMEOUT = 300.0  # seconds one run may take in its process, set-up included


def check_library(library: str) -> None:
    """Refuse a library the harness does not drive; say which it does, and how to install them."""
    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {', '.join(map(repr, LIBRARIES))}, got {library!r}")
    for module in REQUIRES[library]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise RuntimeError(
                f"{module} is not installed (the {library} runs need it); install the comparison's "
                "libraries with: pip install 'fanoutsim[realqueues]'"
            ) from None


def _case(case: str | Case) -> Case:
    if isinstance(case, Case):
        return case
    if case not in CASES:
        raise ValueError(f"case must be one of {', '.join(map(repr, CASES))} or a Case, got {case!r}")
    return CASES[case]


@contextlib.contextmanager
def database(dsn: str):
    """A new, empty database on ``dsn``'s server, for one run: its DSN; dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"fanoutsim_rq_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def server(dsn: str | None):
    """``dsn``, or a throwaway embedded PostgreSQL's for the block."""
    if dsn is not None:
        yield dsn
        return
    from fanoutsim.kernel.pg import EmbeddedServer

    with EmbeddedServer() as embedded:
        yield embedded.dsn


def run_real(
    library: str,
    case: str | Case = "hints",
    *,
    load: PoissonLoad = DEFAULT_LOAD,
    poll_interval: float = POLL_INTERVAL,
    dsn: str | None = None,
) -> RealRun:
    """One worker of ``library`` under ``load`` in ``case``, in this process."""
    check_library(library)
    case = _case(case)
    module = importlib.import_module(f"fanoutsim.designs.outbox.realqueues.{library}_run")
    with server(dsn) as url, database(url) as db:
        return module.run(db, load, case, poll_interval)


def run_real_all(
    pairs: Iterable[tuple[str, str | Case]] | None = None,
    *,
    load: PoissonLoad = DEFAULT_LOAD,
    poll_interval: float = POLL_INTERVAL,
    dsn: str | None = None,
    parallel: int = 3,
) -> dict[tuple[str, str], RealRun]:
    """Each (library, case) run in a process of its own, at most ``parallel`` at once;
    ``pairs`` defaults to every library in every case of :data:`~.load.CASES`."""
    pairs = [
        (lib, _case(c)) for lib, c in (pairs if pairs is not None else [(lib, c) for lib in LIBRARIES for c in CASES])
    ]
    for lib in {lib for lib, _ in pairs}:
        check_library(lib)
    with server(dsn) as url, ThreadPoolExecutor(max_workers=parallel) as pool:
        runs = list(pool.map(lambda pair: _in_process(pair[0], pair[1], load, poll_interval, url), pairs))
    return {(run.library, run.case): run for run in runs}


def _in_process(library: str, case: Case, load: PoissonLoad, poll_interval: float, dsn: str) -> RealRun:
    """One run in a process of its own; what to run goes on its stdin (the DSN too, never in argv)."""
    job = {
        "library": library,
        "case": dataclasses.asdict(case),
        "load": dataclasses.asdict(load),
        "poll_interval": poll_interval,
        "dsn": dsn,
    }
    with subprocess.Popen(
        [sys.executable, "-m", __name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            out, err = process.communicate(json.dumps(job) + "\n", timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise RuntimeError(f"the {library} / {case.name} run took more than {RUN_TIMEOUT:g} s") from None
    lines = out.strip().splitlines()
    if process.returncode != 0 or not lines:
        tail = "\n".join(err.strip().splitlines()[-15:])
        raise RuntimeError(f"the {library} / {case.name} run failed (exit code {process.returncode}):\n{tail}")
    return RealRun.from_dict(json.loads(lines[-1]))


def _main() -> None:
    job = json.loads(sys.stdin.readline())
    run = run_real(
        job["library"],
        Case(**job["case"]),
        load=PoissonLoad(**job["load"]),
        poll_interval=job["poll_interval"],
        dsn=job["dsn"],
    )
    print(json.dumps(run.as_dict()))


if __name__ == "__main__":
    _main()
