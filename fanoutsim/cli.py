"""The ``fanoutsim`` command.

``fanoutsim run SCENARIO [--seed N] [--until SECONDS] [--out DIR] [--json] [--progress]``
``fanoutsim serve --store FILE [--scenario S] [--rate R] [--max-body-bytes N]``: a scenario
of any design on the wall clock, over a DuckDB file, until SIGTERM (``--store
postgresql://... [--role ROLE] [--trace PARQUET]``: over a PostgreSQL database that
several serving processes share, each running a role); ``fanoutsim write
--store FILE FIELD=VALUE ...``: that design's write command (a firing, a commit, a
publish; a field given twice is refused); ``fanoutsim fire --store FILE --reactor R
[--payload JSON]``: the reactor's write by its older name; ``fanoutsim status
--store FILE``: the design's status as JSON (see :mod:`fanoutsim.serve`). ``--store``
is the flag ``run`` takes, with the same rule for a file (a path ending in
``.duckdb``) or a ``postgresql://`` URI; ``--db`` is another name for it. ``--design``
must name a design. ``write``, ``fire`` and ``status`` refuse a FILE that does
not exist, and send the server's token from ``FILE.serve.json``. A store records
the design of its run (the first runtime to open it writes it), so a file made by
``run --store`` is served, written and read only as that design's.

runs a scenario file (see :mod:`fanoutsim.designs.reactor.scenario`), prints its delivery
report and the delivery checker's verdict (``--json``: both as JSON, and
nothing else, on stdout) and writes into DIR (default ``out/<scenario name>``):

* ``report.json`` — the delivery report, the checker's totals under ``check``;
* ``firings.parquet`` (``sources``, the decoded payload, as a JSON string),
  ``executions.parquet`` (``context`` as a JSON string)
  and ``subscriptions.parquet`` — the tables at the end of the run;
* the PNG figures of :func:`fanoutsim.plots.save_report_figures`.

A scenario with ``design = "outbox"`` (:mod:`fanoutsim.designs.outbox.scenario`) runs
the transactional outbox instead: it prints the outbox report (per consumer:
delivered, duplicates, lost with causes, parked, pending, commit -> handled
latency; the hints; the topic bus) and the outbox checker's verdict, and writes
``report.json`` (the checker's totals under ``check``), ``outbox.parquet``,
``cursors.parquet``, ``parked.parquet`` and the figures of
:func:`fanoutsim.designs.outbox.plots.save_outbox_figures`.

A scenario with ``design = "leases"`` (:mod:`fanoutsim.designs.leases.scenario`) runs
leased durable consumers: it prints the leases report (totals: published,
pruned, deliveries, duplicates and losses by cause, dead letters, pending, out
of order, acks failed closed, crashes, restores; per consumer the same with its
limits, in-flight leases and latency; the acks and nacks that failed closed, by
result) and the leases checker's verdict, and writes ``report.json`` (the
checker's totals under ``check``), ``events.parquet``, ``checkpoints.parquet``,
``dead_letters.parquet``, ``consumers.parquet`` and, when
:mod:`fanoutsim.designs.leases.plots` has ``save_leases_figures``, its figures.

``fanoutsim sweep SCENARIO --grid KEY=V1,V2 ... --seeds 0-9 [--workers N |
--scheduler tcp://HOST:8786] [--until S] [--budget B] --out DIR`` runs
:func:`fanoutsim.sweep` over the grid (each ``--grid`` one key; a value is read
as a TOML value — ``1.5``, ``10``, ``true``, ``"a b"`` — or else taken as
text) and the seeds (``0-9``, ``3``, ``0,2,5``, ``0-4,10``), on N local
processes (default 1) or on
the Dask cluster of the scheduler at ADDRESS, and writes into DIR (default
``out/<scenario name>-sweep``) ``sweep.parquet`` and ``sweep.csv`` (one row per
run) and the design's sweep figures; it prints the mean over seeds of each
setting and the design's recommendation (:func:`fanoutsim.sweep.recommend`:
the reactor's poll interval and batch limit, the outbox's safety poll, a lease
length — from a grid that varies one of them or several — or why there is
none), held to ``--budget`` (the reactor's p99 fire -> dispatch and the
outbox's p99 commit -> handled in seconds, defaults 1.5 and 2; the leases'
duplicates per event delivered, default 0.01). Finished runs are
cached in ``DIR/cache.duckdb`` (``--cache FILE``, ``--no-cache``): the same
command again runs only what is missing. Ctrl-C stops it, keeping the finished
runs (exit 130), and ends the runs under way in its worker processes.

Every command but ``serve`` takes SIGTERM as it takes Ctrl-C (SIGINT): it
stops with one line ``fanoutsim: interrupted...`` on stderr and cleans up the
same way — ``run`` removes the ``--store`` file it created and stops its
private PostgreSQL (``--store postgres``), ``sweep`` keeps the finished runs in
its cache and leaves no worker process behind — and exits with status 130
after SIGINT, 143 after SIGTERM (128 + the signal, as a shell reports a process
the signal killed). ``serve`` stops gracefully on either (exit 0).

A last line names the folder (on stderr with ``--json``). A run that takes
over two seconds shows its progress on stderr when stderr is a terminal
(``--progress`` / ``--no-progress`` decide). Any error — a missing file, a bad
scenario, a bad flag, a database file that cannot be used — prints one line
``fanoutsim: error: ...`` on stderr and exits with status 2; a password in
anything it quotes (a URI, a ``password=`` DSN) shows as ``***``. Output cut short
by its reader (``| head``) ends quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fanoutsim import __version__
from fanoutsim.kernel.store.redact import mask_secrets, remember_secrets

PROG = "fanoutsim"


class _UsageError(Exception):
    pass


class _Formatter(argparse.HelpFormatter):
    """argparse's help, with one difference: a text written in lines (an epilog
    of examples, a table of fields) keeps its lines, where argparse would run
    them together. A text in one piece (every description) is filled to the
    width as argparse fills it, but not split at a word's hyphen; a line too
    long for the width is wrapped too."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:  # argparse's fill, but a word is not split at its hyphen ("virtual-clock")
            return textwrap.fill(
                " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
            )
        return "\n".join(_wrap_line(line, width, indent) for line in text.splitlines())


# a row of a table in an epilog: its name, two spaces or more, its meaning
_TABLE_ROW = re.compile(r"\s*\S+\s{2,}(?=\S)")


def _wrap_line(line: str, width: int, indent: str) -> str:
    """``line`` within ``width``: a table row goes on under its meaning, any
    other line two spaces in from where it starts."""
    if len(indent) + len(line) <= width or not line.strip():
        return indent + line
    lead = line[: len(line) - len(line.lstrip())]
    row = _TABLE_ROW.match(line)
    hang = " " * (row.end() if row else len(lead) + 2)
    return textwrap.fill(
        line.strip(), width, initial_indent=indent + lead, subsequent_indent=indent + hang, break_on_hyphens=False
    )


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting,
    and formats its help with :class:`_Formatter` (every command alike)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse's signature
        # argparse quotes the value it refuses, which may be a URI or DSN with its password
        raise _UsageError(mask_secrets(f"{message} (see '{self.prog} --help')"))

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        # an argument no parser knows is reported by the top parser, which would
        # point at its own help: point at the command's, whose options were meant
        known, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(known, "command", None)
            where = f"{self.prog} {command}" if command else self.prog
            raise _UsageError(mask_secrets(f"unrecognized arguments: {' '.join(extras)} (see '{where} --help')"))
        return known


def _number(text: str, convert: Callable[[str], Any], ok: Callable[[Any], bool], not_a: str, must: str) -> Any:
    """An argparse type's value: ``convert(text)`` if it converts and is ``ok``;
    else an error "``'text'`` ``not_a``" or "``'text'`` ``must``"."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} {not_a}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{text!r} {must}")
    return value


def _finite(unit: str, *, zero: bool) -> Callable[[str], float]:
    """An argparse type: a finite number of ``unit`` > 0 (``zero``: >= 0)."""

    def parse(text: str) -> float:
        return _number(
            text,
            float,
            lambda v: math.isfinite(v) and (v >= 0 if zero else v > 0),
            f"is not a number of {unit}",
            f"must be a finite number of {unit} {'>=' if zero else '>'} 0",
        )

    return parse


_seconds = _finite("seconds", zero=False)


def _budget(text: str) -> float:
    """``--budget``: a finite number (its range is the design's: checked once the scenario is read)."""
    return _number(text, float, math.isfinite, "is not a number", "must be a finite number")


_rate = _finite("events per second", zero=True)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Seeded simulations of durable event fan-out.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _add_run_command(sub)
    _add_sweep_command(sub)
    _add_serve_command(sub)
    _add_client_commands(sub)
    _add_helper_commands(sub)
    _add_pg_command(sub)
    return parser


def _add_run_command(sub) -> None:
    """``fanoutsim run SCENARIO``."""
    run = sub.add_parser(
        "run",
        help="run a scenario file and report what it delivered",
        description="Run a scenario file, print its delivery report and write "
        "the tables, figures and report.json into a folder.",
    )
    run.add_argument("scenario", metavar="SCENARIO", help="a scenario .toml file")
    run.add_argument("--seed", type=int, metavar="N", help="override [run] seed")
    _until(run, "override [run] until (virtual seconds)")
    run.add_argument(
        "--store",
        metavar="STORE",
        help='override [run] store: "memory", "duckdb", a new .duckdb path, "postgres" (a throwaway '
        "PostgreSQL server) or a postgresql:// URI (a server of yours)",
    )
    run.add_argument("--out", metavar="DIR", help="output folder (default: out/<scenario name>)")
    run.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    _progress(run, "show progress on stderr for a run over two seconds (default: when stderr is a terminal)")


def _until(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--until", type=_seconds, metavar="SECONDS", help=help)


def _progress(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=help)


def _design_option(parser: argparse.ArgumentParser, type: Callable[[str], str] | None = None) -> None:
    """``--design NAME`` of the commands that open a store (``type``: how it is checked)."""
    parser.add_argument(
        "--design",
        type=type,
        metavar="NAME",
        help="the design the file must hold (needed for a file that records none)",
    )


def _add_sweep_command(sub) -> None:
    """``fanoutsim sweep SCENARIO --grid ...``."""
    sw = sub.add_parser(
        "sweep",
        help="run a scenario over a grid of settings x seeds; one row per run",
        description="Run a scenario of any design over the cartesian product of the grid and "
        "the seeds (fanoutsim.sweep), locally or on a Dask cluster; write the table "
        "as Parquet and CSV and the design's sweep figures into a folder.",
    )
    sw.add_argument("scenario", metavar="SCENARIO", help="a scenario .toml file")
    sw.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a grid key and its values (repeat for more keys): a config field, a design key such "
        "as rate, or a dotted path into the scenario file (consumers.enricher.lease_seconds)",
    )
    sw.add_argument("--seeds", default="0", metavar="SEEDS", help="seeds: 0-9, 3, 0,2,5 or 0-4,10 (default: 0)")
    where = sw.add_mutually_exclusive_group()
    where.add_argument("--workers", type=_workers, default=1, metavar="N", help="local worker processes (default 1)")
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a Dask scheduler (tcp://HOST:8786) whose workers run the runs; needs "
        "fanoutsim[dask] here and the same fanoutsim version on every worker",
    )
    _until(sw, "virtual seconds per run (default: the scenario's [run] until)")
    sw.add_argument("--out", metavar="DIR", help="output folder (default: out/<scenario name>-sweep)")
    sw.add_argument("--cache", metavar="FILE", help="DuckDB file of finished runs (default: DIR/cache.duckdb)")
    sw.add_argument("--no-cache", action="store_true", help="run everything, keep nothing")
    sw.add_argument(
        "--budget",
        type=_budget,
        metavar="BUDGET",
        help="the bar the recommended setting must meet: reactor, the p99 fire -> dispatch latency in "
        "seconds (default 1.5); outbox, the p99 commit -> handled latency in seconds (default 2); "
        "leases, the duplicates per event delivered (default 0.01)",
    )
    _progress(sw, "a progress bar on stderr (default: when stderr is a terminal)")


def _add_serve_command(sub) -> None:
    """``fanoutsim serve``: a scenario on the wall clock until stopped."""
    srv = sub.add_parser(
        "serve",
        help="run a scenario for real over a DuckDB file or PostgreSQL until stopped",
        description="Run a scenario's design on the wall clock until SIGTERM or SIGINT; it "
        "resumes from its store after any exit. Over a DuckDB file (--store "
        "FILE.duckdb) this process owns the file (DuckDB lets one process hold "
        "it) and runs every role; others reach it through FILE.serve.json, a "
        "sidecar with its control port and a token only the file's owner may "
        "read, which write / fire / status send. Over PostgreSQL (--store "
        "postgresql://...) the database is shared: no sidecar, no control port, "
        "no token; several serve processes run on it, each one --role of the "
        "design, and write / fire / status open the database themselves — who "
        "may write is whoever PostgreSQL lets connect (its roles and "
        "passwords). 'fanoutsim pg start' runs an embedded server several "
        "processes can share. A process that does not stop: SIGUSR1 prints "
        "where each of its threads is, to stderr.",
        epilog="e.g.\n  fanoutsim example realtime --out realtime.toml"
        "\n  fanoutsim serve --store run.duckdb --scenario realtime.toml"
        "\n  URI=$(fanoutsim pg start)"
        "\n  fanoutsim serve --store $URI --scenario realtime.toml "
        "--role poller &"
        "\n  fanoutsim serve --store $URI --scenario realtime.toml "
        "--role executor &"
        "\n  fanoutsim serve --store $URI --scenario realtime.toml "
        "--role writers &"
        "\n  fanoutsim status --store $URI",
    )
    _where(srv)
    srv.add_argument(
        "--scenario",
        metavar="S",
        help="a scenario .toml of any design (default: the file's design as it is; a new file: the reactor)",
    )
    srv.add_argument(
        "--rate",
        type=_rate,
        metavar="R",
        help="the workload at R events a second: the scenario's workloads scaled to R, or with "
        "no scenario (reactor) pricing_reactor fired R times a second; 0: none",
    )
    srv.add_argument("--port", type=_port, default=0, help="control port on 127.0.0.1 (default: any free one)")
    srv.add_argument(
        "--max-body-bytes",
        type=_bytes,
        default=None,
        metavar="N",
        help="refuse a request body over N bytes with 413 (default: 1048576, 1 MiB)",
    )
    srv.add_argument(
        "--role",
        default="all",
        metavar="ROLE",
        help="the part of the design's process to run, over PostgreSQL, or several joined by "
        f"commas ({_roles_help()}; default: all, the whole process)",
    )
    srv.add_argument(
        "--trace",
        metavar="PARQUET",
        help="write this process's trace there at a clean stop (where it goes must exist and be writable: "
        "checked before serving)",
    )
    _add_watch_option(srv)


def _add_client_commands(sub) -> None:
    """``write``, ``fire`` and ``status``: what reaches a served run (or its store)."""
    wr = sub.add_parser(
        "write",
        help="the design's write (a firing, a commit, a publish) into a DuckDB file",
        description="Send the write command of the file's design to its server (or, with "
        "none running, write into the file itself) and print the answer as JSON.",
        epilog=_write_fields_help(),
    )
    _where(wr)
    _design_option(wr, _design)
    wr.add_argument(
        "fields",
        nargs="*",
        metavar="FIELD=VALUE",
        help="the write's fields: FIELD=TEXT gives a string, FIELD:=JSON any JSON value",
    )

    _add_fire_command(sub)
    _add_status_command(sub)


def _add_fire_command(sub) -> None:
    """``fanoutsim fire``: the reactor's write, by flags."""
    fire = sub.add_parser(
        "fire",
        help="fire a reactor once into a reactor run's store; print the firing's id",
        description="Fire REACTOR once in TENANT with the sources of --payload into the reactor "
        "run in FILE (a .duckdb file) or URI (a PostgreSQL database): through the "
        "file's server when one runs (FILE.serve.json), else by writing into the "
        "store itself. Print the new firing's id on stdout; on stderr, the "
        "'fanoutsim explain' command that tells its story, and a warning when no "
        "subscription reads that reactor in that tenant. The reactor's write: "
        "fanoutsim write --store FILE reactor=R payload:=JSON does the same.",
        epilog="e.g. fanoutsim fire --store run.duckdb --reactor pricing_reactor",
    )
    _where(fire)
    fire.add_argument("--reactor", required=True, help="the reactor to fire, by name (required)")
    fire.add_argument("--tenant", default="public", help="the tenant it fires in (default: public)")
    fire.add_argument(
        "--payload",
        default="{}",
        help='a JSON object of source name -> value, e.g. \'{"quote": {"price": 120}}\' (default: {})',
    )


def _add_status_command(sub) -> None:
    """``fanoutsim status``: what a run has delivered and how far behind it is."""
    st = sub.add_parser(
        "status",
        help="print a run's status as JSON: each reader's lag or cursor, and who serves it",
        description="Print the status of the run in FILE or URI as JSON, from its server when "
        "one runs, else read from the store itself: its design; where each reader "
        "is and how far behind (the reactor's watermark lag per subscription, the "
        "outbox's cursor and cursor lag per consumer, each leases consumer's "
        "checkpoints, leases and dead letters); its metrics; the processes that "
        'serve it. Lags are as of "now", on the "clock" it names: "wall" for a '
        'store a process serves or wrote to, "virtual" for one a virtual-clock '
        "run (fanoutsim run --store) wrote last, as of that run's end. On stderr: "
        "a backlog that rose at every sample over serve's --window, or a server "
        "that stopped.",
        epilog="e.g. fanoutsim status --store run.duckdb",
    )
    _where(st)
    _design_option(st, _design)


def _add_pg_command(sub) -> None:
    """``fanoutsim pg start|url|stop``: an embedded PostgreSQL several processes share."""
    from fanoutsim.kernel.pg import DEFAULT_SHARED_DIR

    pg = sub.add_parser(
        "pg",
        help="an embedded PostgreSQL server several processes share: start, url, stop",
        description="start: run the embedded PostgreSQL (the postgres extra's pgserver) in its "
        "folder, on after this command returns, and print its URI (one running "
        "there already is kept); url: print the URI of the one running; stop: "
        "stop it (its data stays for the next start). Its URI names a Unix socket: "
        "this machine's processes reach it, no other.",
    )
    pg.add_argument("action", choices=("start", "url", "stop"))
    pg.add_argument(
        "--dir", default=DEFAULT_SHARED_DIR, metavar="DIR", help=f"the server's folder (default: {DEFAULT_SHARED_DIR})"
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``fanoutsim`` command's parser (what the documentation's CLI reference is read from)."""
    return _parser()


def _add_watch_option(srv) -> None:
    srv.add_argument(
        "--window",
        type=_seconds,
        default=20.0,
        metavar="SECONDS",
        help="status says the run is falling behind when its backlog rose at every sample over "
        "this many seconds (default 20)",
    )


def _add_helper_commands(sub) -> None:
    """``example``, ``schema`` and ``explain``: the commands that help a reader start and understand."""
    ex = sub.add_parser(
        "example",
        help="list the scenarios that ship with fanoutsim, or write one out",
        description="With no NAME, list the shipped scenarios (name, design, what each shows). "
        "With NAME, print that scenario's TOML, or write it to --out FILE (with any "
        "recording it replays beside it) to edit and run: fanoutsim run FILE.",
    )
    ex.add_argument("name", nargs="?", metavar="NAME", help="a shipped scenario (fanoutsim example lists them)")
    ex.add_argument("--out", metavar="FILE", help="write it to this new file instead of printing it")
    sc = sub.add_parser(
        "schema",
        help="print the JSON Schema of a design's scenario files",
        description="Print the JSON Schema of the scenario files of DESIGN (what an editor's "
        "TOML language server completes and checks a file against).",
    )
    sc.add_argument("design", metavar="DESIGN", help="a design: reactor, outbox or leases")
    xp = sub.add_parser(
        "explain",
        help="tell the story of one firing, outbox row or leased event of a run, or list its duplicates and losses",
        description="Print what happened to one firing (reactor), outbox row (outbox) or "
        "event (leases) of the run in FILE: when it was written, each delivery "
        "and, for a duplicate or a loss, the cause the checker named. With --duplicates "
        "or --lost instead of ID: every duplicated or lost item of the run, with its cause.",
        epilog="e.g.\n  fanoutsim run crashes.toml --store crashes.duckdb"
        "\n  fanoutsim explain crashes.duckdb --duplicates --lost"
        "\n  fanoutsim explain out/crashes --duplicates      # the folder run --out wrote"
        "\n  fanoutsim explain crashes.duckdb FIRING_ID",
    )
    xp.add_argument(
        "db",
        metavar="FILE",
        help="the run: a .duckdb file (made by serve or run --store), a postgresql:// URI, or (with "
        "--duplicates / --lost) the folder run --out wrote",
    )
    xp.add_argument(
        "id",
        metavar="ID",
        nargs="?",
        help="a firing id, an outbox seq or an event id <commit:ordinal> (fanoutsim fire and write print it)",
    )
    xp.add_argument("--duplicates", action="store_true", help="list every duplicated item, with its cause")
    xp.add_argument("--lost", action="store_true", help="list every lost item, with its cause")
    _design_option(xp, _design)


def _at_least_one(what: str):
    """An argparse type: a whole number of ``what`` >= 1."""

    def parse(text: str) -> int:
        return _number(
            text, int, lambda v: v >= 1, f"is not a whole number of {what}", f"must be a number of {what} >= 1"
        )

    return parse


_workers = _at_least_one("worker processes")
_bytes = _at_least_one("bytes")


def _value(text: str):
    """A grid value: a TOML value (1.5, 10, true, "a b"), or else the text itself."""
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_grid(items: Sequence[str]) -> dict:
    """``KEY=V1,V2`` items as a sweep grid ``{key: [v1, v2]}`` (raises ValueError)."""
    grid: dict = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--grid {item!r} is not KEY=V1,V2,... (e.g. --grid reactor_poll_interval=0.5,1,2)")
        if key in grid:
            raise ValueError(f"--grid {key!r} is given twice; give all its values in one --grid {key}=V1,V2")
        parts = [v.strip() for v in values.split(",")]
        if not values.strip() or any(not v for v in parts):
            raise ValueError(f"--grid {item!r}: an empty value; give values separated by commas, e.g. {key}=1,2")
        grid[key] = [_value(v) for v in parts]
    return grid


def parse_seeds(text: str) -> list[int]:
    """``0-9``, ``3``, ``0,2,5``, ``0-4,10`` as a list of seeds, in order, each
    once (raises ValueError)."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            if dash and lo:
                first, last = int(lo), int(hi)
                if last < first:
                    raise ValueError(f"--seeds {text!r}: the range {part!r} runs backwards; write {last}-{first}")
                seeds.extend(range(first, last + 1))
            else:
                seeds.append(int(part))
        except ValueError as exc:
            if "backwards" in str(exc):
                raise
            raise ValueError(
                f"--seeds {text!r}: {part!r} is not a seed or a range of seeds; give e.g. 0-9, 3, 0,2,5 or 0-4,10"
            ) from None
    duplicated = sorted({s for s in seeds if seeds.count(s) > 1})
    if duplicated:
        raise ValueError(f"--seeds {text!r} names seed {duplicated[0]} twice")
    return seeds


class _Once(argparse.Action):
    """An option given at most once, under any of its names (``--store``, ``--db``)."""

    def __call__(self, parser, namespace, value, option=None):
        if getattr(namespace, self.dest) is not None:
            parser.error(f"argument {'/'.join(self.option_strings)}: the store is given twice; give it once")
        setattr(namespace, self.dest, value)


def _store(text: str) -> str:
    """``--store`` (``--db``) of serve, write, fire and status: a DuckDB file
    by the rule ``run --store`` keeps, or a ``postgresql://`` URI."""
    from fanoutsim.kernel.store import is_postgres
    from fanoutsim.kernel.validate import is_duckdb_path

    if text in ("memory", "duckdb", "postgres"):
        raise argparse.ArgumentTypeError(
            f"{text!r} would be a store of this process alone, which no other "
            f"command can reach; give a path ending in .duckdb or a postgresql:// "
            f"URI of a server of yours"
        )
    if is_duckdb_path(text) or (is_postgres(text) and not text.endswith("://")):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a store: give a path ending in .duckdb or a postgresql:// URI")


def _where(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        "--db",
        dest="store",
        action=_Once,
        type=_store,
        required=True,
        metavar="FILE|URI",
        help="where the run lives: a .duckdb file, or a postgresql:// URI (one database several "
        "processes share); --db is another name for --store",
    )


def _design(text: str) -> str:
    """``--design``: the name of a registered design."""
    from fanoutsim import designs

    if text not in designs.names():
        raise argparse.ArgumentTypeError(f"{text!r} is not a design; designs: {', '.join(designs.names())}")
    return text


def _port(text: str) -> int:
    return _number(
        text,
        int,
        lambda v: 0 <= v <= 65535,
        "is not a port number",
        "is not a TCP port: give 1-65535, or 0 for any free one",
    )


def _roles_help() -> str:
    """Each design's roles but ``all``, for ``serve --help``: "reactor: poller, ...; leases: ..."."""
    from fanoutsim import designs

    parts = []
    for name in designs.names():
        try:
            roles = [r for r in designs.get(name).roles if r != "all"]
        except (ImportError, KeyError, TypeError):  # a design that cannot load: its own error, when used
            continue
        if roles:
            parts.append(f"{name}: {', '.join(roles)}")
    return "; ".join(parts)


def _write_fields_help() -> str:
    from fanoutsim import designs

    lines = ["fields, per design:"]
    for name in designs.names():
        try:
            fields = designs.get(name).write_fields
        except (ImportError, KeyError, TypeError):  # a design that cannot load: its own error, when used
            continue
        if fields:
            lines.append(f"  {name}:")
            lines.extend(f"    {k:<10} {v}" for k, v in fields.items())
    lines += ["", "e.g. fanoutsim write --db outbox.duckdb page=p1 body=hello due_in:=3"]
    return "\n".join(lines)


def _fields(items: Sequence[str]) -> dict:
    """``FIELD=TEXT`` (a string) and ``FIELD:=JSON`` (any JSON value) as a dict;
    a field given twice is refused (which one was meant cannot be told)."""
    out: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key or key == ":":
            raise ValueError(f"{item!r} is not FIELD=TEXT or FIELD:=JSON")
        as_json = key.endswith(":")
        if as_json:
            key = key[:-1]
        if key in out:
            raise ValueError(f"field {key!r} is given twice ({item!r}); give each field once")
        if as_json:
            try:
                out[key] = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{item!r}: the value after := is not JSON ({exc})") from None
        else:
            out[key] = text
    return out


def _error(message: str) -> int:
    # every error line goes through here, and any may quote what was typed: a URI or DSN's password never shows
    print(f"{PROG}: error: {mask_secrets(message)}", file=sys.stderr)
    return 2


# the exit statuses of a command stopped by Ctrl-C (SIGINT) and by SIGTERM: 128 + the signal, as a shell reports
INTERRUPTED = 130
TERMINATED = 143


def main(argv: Sequence[str] | None = None) -> int:
    remember_secrets(sys.argv[1:] if argv is None else argv)  # a driver's message may quote one alone
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        return _error(str(exc))
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if args.command == "serve":  # serve turns SIGTERM and SIGINT into its own graceful stop
        return _command(args)
    with _sigterm_as_ctrl_c() as received:
        code = _command(args)
    return TERMINATED if received and code == INTERRUPTED else code


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """While the block runs, SIGTERM raises KeyboardInterrupt in the main thread,
    so a command stopped by it (``kill``, ``timeout``, a supervisor) cleans up
    as Ctrl-C makes it: a store file it created removed, its private PostgreSQL
    stopped, a sweep's pool shut down with its finished runs kept. Yields the
    list of SIGTERMs received. Only the first raises: ``timeout`` sends one to
    the process and one to its group, and the second must not cut the clean-up
    of the first short. A sweep's workers do not inherit this handler: they
    start from a fork server or a spawned interpreter, which begin with
    SIGTERM's default (and die of it: the pool breaks and the sweep ends as
    interrupted)."""
    import signal
    import threading

    received: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) == 1:
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # only the main thread may install handlers
        yield received
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)  # a caller's own (pytest's, a notebook's) comes back


def _command(args: argparse.Namespace) -> int:
    """Run the command ``args`` names; its exit status."""
    try:
        if args.command == "run":
            code = _run(args)
        elif args.command == "sweep":
            code = _sweep(args)
        elif args.command in ("serve", "write", "fire", "status"):
            code = _realtime(args)
        elif args.command in _HELPER_COMMANDS:
            code = _HELPER_COMMANDS[args.command](args)
        elif args.command == "pg":
            code = _pg(args)
        else:  # pragma: no cover - argparse catches it
            code = _error(f"unknown command {args.command!r}")
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:  # one the command does not handle itself: a line, not a traceback
        print(f"{PROG}: interrupted", file=sys.stderr)
        return INTERRUPTED


def _pg(args: argparse.Namespace) -> int:
    """``fanoutsim pg start|url|stop``: the shared embedded server of ``--dir``."""
    from fanoutsim.kernel import pg

    try:
        if args.action == "start":
            with pg.announced():
                url = pg.start_shared(args.dir)
            print(url)
            print(
                f"the embedded PostgreSQL in {args.dir} runs; stop it with 'fanoutsim pg stop"
                f"{'' if args.dir == pg.DEFAULT_SHARED_DIR else ' --dir ' + args.dir}'",
                file=sys.stderr,
            )
            return 0
        if args.action == "url":
            url = pg.shared_url(args.dir)
            if url is None:
                return _error(f"no embedded PostgreSQL runs in {args.dir} (start one with 'fanoutsim pg start')")
            print(url)
            return 0
        if not pg.stop_shared(args.dir):
            return _error(f"no embedded PostgreSQL runs in {args.dir}; nothing to stop")
        print(f"stopped the embedded PostgreSQL in {args.dir}", file=sys.stderr)
        return 0
    except (pg.ServerError, OSError) as exc:
        return _error(str(exc))


def _reader_gone() -> int:
    """The reader of stdout went away (``| head``): stop quietly, as a Unix tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush must not fail too
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, what the shell reports for a tool killed by it


def _db_error(db: str, exc: BaseException) -> int:
    """One line for a database error DuckDB raised past the store's own checks."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return _error(f"{db}: {lines[0] if lines else type(exc).__name__}")


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 PID`` prints every thread's stack to stderr and serving goes
    on: where a process that will not stop is stuck (a lock, a statement)."""
    import faulthandler
    import signal

    if hasattr(signal, "SIGUSR1"):  # not on Windows
        try:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        except (AttributeError, ValueError, OSError):  # stderr is no file (called in-process, captured)
            pass


def _serve(args: argparse.Namespace) -> int:
    """``fanoutsim serve``; its errors are :func:`_realtime`'s to report."""
    from fanoutsim import serve as srv
    from fanoutsim.scenario import load_scenario

    trace = None if args.trace is None else srv.trace_problem(args.trace)
    if trace is not None:  # before serving: the trace is written only at the stop
        return _error(f"--trace {args.trace}: {trace}")
    _stacks_on_sigusr1()
    scenario = load_scenario(args.scenario) if args.scenario else None
    what = f"the {scenario.design} scenario {scenario.name}" if scenario is not None else "its run"

    def ready(port: int | None) -> None:  # said once the file is ours and the endpoint listens
        if port is None:  # PostgreSQL: no endpoint, the database is shared
            from fanoutsim.kernel.store.postgres import safe_dsn

            print(
                f"serving {safe_dsn(args.db)} with {what} as role {args.role} (pid {os.getpid()}); "
                f"stop with SIGTERM or Ctrl-C",
                file=sys.stderr,
                flush=True,
            )
            return
        print(
            f"serving {args.db} with {what} on 127.0.0.1:{port} (pid {os.getpid()}); stop with SIGTERM or Ctrl-C",
            file=sys.stderr,
            flush=True,
        )

    extra = {} if args.max_body_bytes is None else {"max_body_bytes": args.max_body_bytes}
    return srv.serve(
        args.db,
        scenario,
        rate=args.rate,
        port=args.port,
        ready=ready,
        role=args.role,
        trace=args.trace,
        window=args.window,
        **extra,
    )


def _realtime(args: argparse.Namespace) -> int:
    import duckdb

    from fanoutsim import serve as srv
    from fanoutsim.kernel.store.duckdb import StoreError
    from fanoutsim.scenario import ScenarioError

    try:
        args.db = args.store  # a .duckdb file or a postgresql:// URI, checked by _store
        if args.command == "serve":
            return _serve(args)
        if args.command == "fire":
            try:
                payload = json.loads(args.payload)
            except ValueError as exc:
                return _error(f"--payload is not JSON: {exc}")
            if not isinstance(payload, dict):
                return _error("--payload must be a JSON object of source name -> value")
            answer = srv.write(
                args.db, {"reactor": args.reactor, "payload": payload, "tenant": args.tenant}, design="reactor"
            )
            print(answer["firing"])
            _warn_write(answer)
            _hint_explain(args.db, answer["firing"])
            return 0
        if args.command == "write":
            answer = srv.write(args.db, _fields(args.fields), design=args.design)
            print(
                json.dumps({k: v for k, v in answer.items() if k != "warning"} if isinstance(answer, dict) else answer)
            )
            _warn_write(answer)
            _hint_explain(args.db, answer)
            return 0
        found = srv.status(args.db, design=args.design)
        print(json.dumps(found, indent=2))
        _warn_status(found)
        return 0
    except (ScenarioError, StoreError, ValueError, TypeError, RuntimeError) as exc:
        return _error(str(exc))
    except duckdb.Error as exc:  # a file damaged past its header, found by a later read
        return _db_error(args.db, exc)
    except BrokenPipeError:
        raise  # the reader of stdout left: main ends quietly
    except OSError as exc:  # e.g. the folder of FILE.serve.json cannot be written
        where = exc.filename or args.db
        if getattr(args, "trace", None) is not None and where == args.trace:  # serve's --trace, at the stop
            where = f"--trace {args.trace}"
        return _error(f"{where}: {exc.strerror or exc}")


def _run(args: argparse.Namespace) -> int:
    shown = args.progress if args.progress is not None else _is_terminal(sys.stderr)
    made: list = []  # [path, sim]: a .duckdb file this run creates, removed again if the command fails
    code = 1
    try:
        code = _run_steps(args, shown, made)
        return code
    except BrokenPipeError:
        code = 0  # the run is done; only its reader left (main ends quietly)
        raise
    except KeyboardInterrupt:
        dropped = ""
        if made:
            dropped = f"; removed {made[0]}, which it had created" if os.path.exists(made[0]) else ""
            _discard_store(*made)
            made.clear()
        print(f"{PROG}: interrupted{dropped}", file=sys.stderr)
        code = INTERRUPTED
        return code
    finally:
        if made and code != 0:
            _discard_store(*made)


def _discard_store(path: str, sim=None) -> None:
    """Close the store a failed ``run`` created at ``path`` and remove the file and its WAL,
    so the corrected command can create it again."""
    import gc

    store = getattr(sim, "store", None)
    try:
        if store is not None and hasattr(store, "close"):
            store.close()
    except Exception:  # noqa: BLE001 - closing a half-built store: removing it is what matters
        pass
    gc.collect()  # a store left in a failed build's frames closes its connection here
    for name in (path, f"{path}.wal"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            print(f"{PROG}: warning: could not remove {name}: {exc.strerror or exc}", file=sys.stderr)


def _run_steps(args: argparse.Namespace, shown: bool, made: list) -> int:
    from fanoutsim import progress
    from fanoutsim.kernel.pg import announced
    from fanoutsim.kernel.scenario import check_overrides
    from fanoutsim.kernel.store.duckdb import StoreError
    from fanoutsim.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(args.scenario)
        _, store, until = check_overrides(scenario, args.seed, args.store, args.until)
        problem = out_problem(Path(args.out) if args.out else Path("out") / scenario.name)
        if problem is not None:  # before the run, not after it
            return _error(problem)
        if isinstance(store, str) and store.endswith(".duckdb") and not os.path.exists(store):
            made.append(store)  # build refuses an existing file, so a file there after it is this run's
        with announced():  # store "postgres": a private PostgreSQL starts, which takes seconds
            sim = scenario.build(seed=args.seed, until=until, store=store)  # what scenario.run does, with a bar
        if made:
            made.append(sim)
        progress.run_virtual(sim, until, enabled=shown)
    except (ScenarioError, StoreError) as exc:
        return _error(str(exc))
    except OSError as exc:  # the [run] store's folder is missing or read-only
        return _error(f"{exc.filename or args.scenario}: {exc.strerror or exc}")
    try:
        return _report_run(args, scenario, sim, shown)
    finally:
        sim.close()  # the file is free for the next command; a throwaway server stops


def _report_run(args: argparse.Namespace, scenario, sim, shown: bool) -> int:
    from fanoutsim import progress, verdicts
    from fanoutsim.designs import design_of

    design = design_of(scenario)
    out = Path(args.out) if args.out else Path("out") / scenario.name
    with progress.step("checking", enabled=shown):
        report, checked = full_report(sim, scenario.name, getattr(scenario, "description", None))
    verdicts.keep(sim, report["verdicts"])  # in a store file: what explain FILE tells of its items
    try:
        written = write_outputs(sim, report, out, checked=checked)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        return _error(f"cannot write to {out}: {exc.strerror or exc}{where}")
    if args.json:
        print(json.dumps(report, indent=2))
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    else:
        print(design.format_report(report), end="")
        print()
        print(design.format_check(checked))
        why = format_causes(report["causes"])
        if why:
            print(f"\n{why}", end="")
        print(f"\nwrote {len(written)} files to {out}")
    return 0


def _client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise ValueError("--scheduler needs Dask's distributed package: pip install 'fanoutsim[dask]'") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise ValueError(f"cannot reach the Dask scheduler at {address}: {exc}") from None


def _sweep(args: argparse.Namespace) -> int:
    import importlib

    from fanoutsim.designs import design_of
    from fanoutsim.kernel.store.duckdb import StoreError
    from fanoutsim.scenario import ScenarioError, load_scenario

    sweeps = importlib.import_module("fanoutsim.sweep")  # the module (fanoutsim.sweep is also the function)
    shown = args.progress if args.progress is not None else _is_terminal(sys.stderr)
    try:
        scenario = load_scenario(args.scenario)
        grid = parse_grid(args.grid)
        seeds = parse_seeds(args.seeds)
        sweeps.grid_runs(args.scenario, grid, seeds, args.until)  # every problem before anything starts
    except (ScenarioError, StoreError, ValueError) as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"{exc.filename or args.scenario}: {exc.strerror or exc}")
    design = design_of(scenario)
    try:
        budget = _sweep_budget(design, args.budget)
    except ValueError as exc:
        return _error(f"--{exc}")
    out = Path(args.out) if args.out else Path("out") / f"{scenario.name}-sweep"
    cache = None if args.no_cache else Path(args.cache) if args.cache else out / "cache.duckdb"
    try:
        if cache is not None:
            sweeps.Cache(cache).check()  # before the output folder is made
    except ValueError as exc:
        return _error(f"--{exc}" if args.cache and not args.no_cache else str(exc))
    try:  # a scheduler that cannot be reached: before the output folder is made
        client = _client(args.scheduler) if args.scheduler else None
    except ValueError as exc:
        return _error(str(exc))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if client is not None:
            client.close()
        return _error(f"cannot write to {out}: {exc.strerror or exc}")
    try:
        df = sweeps.sweep(
            args.scenario,
            grid=grid,
            seeds=seeds,
            workers=args.workers,
            until=args.until,
            cache=cache,
            progress=shown,
            client=client,
        )
    except KeyboardInterrupt:
        kept = f"; the finished runs are kept in {cache}" if cache is not None else ""
        print(f"{PROG}: interrupted{kept}", file=sys.stderr)
        return INTERRUPTED
    except (sweeps.RunFailed, sweeps.ClusterMismatch, ValueError) as exc:
        return _error(str(exc))
    finally:
        if client is not None:
            client.close()
    try:
        written = _write_sweep(df, design, scenario, out, budget)
    except OSError as exc:
        return _error(f"cannot write to {out}: {exc.strerror or exc}")
    _print_sweep(df, design, scenario, seeds, sweeps.grid_runs(args.scenario, grid, seeds, args.until)[0], budget)
    print(f"\nwrote {len(written)} files to {out}")
    return 0


def _sweep_budget(design, budget: float | None) -> float | None:
    """``--budget`` as the design allows it (ValueError naming what it allows), before any run."""
    if budget is None:
        return None
    if design.sweep_recommend is None or design.sweep_budget is None:
        raise ValueError(f"budget: the {design.name} design recommends no setting from a sweep, so it has no budget")
    return design.sweep_budget.check(budget)


def _write_sweep(df, design, scenario, out: Path, budget: float | None = None) -> list[Path]:
    """Write the sweep's table (parquet and CSV) and the design's sweep figures
    (the recommendation's drawn against ``budget``) to ``out``; the paths written."""
    written = [out / "sweep.parquet", out / "sweep.csv"]
    df.to_parquet(written[0], index=False)
    df.to_csv(written[1], index=False)
    if design.sweep_figures is not None:
        bar = {} if budget is None else {"budget": budget}
        written += list(design.sweep_figures(df, scenario, out, **bar))
    return written


def _print_sweep(df, design, scenario, seeds: list, keys: list, budget: float | None = None) -> None:
    """Print the sweep's summary: its runs and validity, the mean over seeds of
    each grid point's shown columns, and the design's recommendation."""
    import pandas as pd

    print(
        f"{design.name} sweep of {scenario.name}: {len(df)} run{'s' if len(df) != 1 else ''} ({df.attrs['ran']} ran, "
        f"{df.attrs['from_cache']} from the cache), {len(seeds)} seed{'s' if len(seeds) != 1 else ''} each; "
        f"every run valid: {bool(df['valid'].all())}, lost {int(df['lost'].sum())}"
    )
    # every result column but the valid flag, the p95s and the means (they are in the files)
    shown_columns = [c for c in design.sweep_columns if c != "valid" and not c.endswith(("_p95_s", "_mean_s"))]
    shown_columns += [c for c in df.columns if c.endswith("]") and "_p99_" in c]  # each reader's own p99
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        table = df.groupby(keys, sort=False)[shown_columns].mean() if keys else df[shown_columns].mean().to_frame().T
        print(f"mean over seeds:\n{table.round(3).to_string()}")
    if design.sweep_recommend is not None:
        print(design.sweep_recommend(df, scenario, budget=budget))


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def full_report(sim, name: str, description: str | None = None):
    """The run's report (its design's ``report``, the checker's totals under
    ``check``, the scenario's ``description``, under ``causes`` every loss
    and duplicate cause with its meaning and whether the run's configuration
    expects it, and under ``verdicts`` every duplicated or lost item with its
    cause, :mod:`fanoutsim.verdicts`) and the check itself (its design's ``check``)."""
    from fanoutsim import verdicts
    from fanoutsim.designs import design_of

    design = design_of(sim)
    checked = design.check(sim)
    report = design.report(sim, name=name, checked=checked)
    if description:
        report = {"scenario": report.get("scenario"), "description": description, **report}
    report["causes"] = cause_rows(design, checked)
    report["verdicts"] = verdicts.of_check(design, checked)
    return report, checked


def format_causes(rows: list[dict]) -> str:
    """The causes of a report as text: per cause its count, whether the run
    expects it and what it means (empty when nothing was lost or duplicated)."""
    if not rows:
        return ""
    lines = ["Why (each cause the checker named)"]
    for r in rows:
        # a firing delivered three times is one duplicated item and two extra deliveries: counted as the latter
        noun = "lost" if r["kind"] == "lost" else ("extra delivery" if r["count"] == 1 else "extra deliveries")
        verdict = {True: "expected", False: "NOT expected", None: ""}[r["expected"]]
        lines.append(f"  {r['count']:,} {noun} by {r['cause']} ({verdict}): {r['meaning'] or 'see the checker'}")
    return "\n".join(lines) + "\n"


def cause_rows(design, checked) -> list[dict]:
    """Each duplicate and loss cause of a check: its count, one plain sentence
    (the design's ``causes``) and whether the configuration expects it."""
    summary = checked.summary
    rows = []
    for kind, key in (("lost", "lost_by_cause"), ("duplicates", "duplicates_by_cause")):
        for cause, n in sorted(summary[key].items()):
            meaning = design.causes.get(kind, {}).get(cause, "")
            expected = design.expected(checked, kind, cause) if design.expected is not None else None
            rows.append({"kind": kind, "cause": cause, "count": int(n), "meaning": meaning, "expected": expected})
    return rows


def out_problem(out: Path) -> str | None:
    """Why the files of a run cannot go into ``out`` (None: they can), asked
    before the run, so that a bad ``--out`` costs no simulation: a file where
    the folder should be, or no folder on the way that may be written."""
    if out.exists() and not out.is_dir():
        return f"cannot write to {out}: it is a file, not a folder"
    folder = out
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"cannot write to {out}: {folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot write to {out}: {folder} is not writable"
    if _foreign(out, {"report.json"}):  # every run writes one: a folder of someone else's files
        return (
            f"cannot write to {out}: it holds a report.json fanoutsim did not write there (no {OUTPUTS_LIST}); "
            "give another --out, or move that file away"
        )
    return None


def _foreign(out: Path, names: set[str]) -> list[Path]:
    """The files of ``names`` in ``out`` that no earlier run wrote there (its
    :data:`OUTPUTS_LIST` does not name them): someone else's, not to overwrite.
    A folder with no list whose report.json is a run's report is an older
    fanoutsim's (it kept no list): all of it counts as a run's."""
    present = [out / n for n in sorted(names) if (out / n).is_file()]
    ours = _listed(out)
    if ours is None:
        return [] if _a_runs_report(out / "report.json") else present
    return [p for p in present if p.name not in ours]


def _a_runs_report(path: Path) -> bool:
    """Whether ``path`` holds a report a run wrote (a JSON object with its check,
    causes or verdicts: an older fanoutsim's has one of them, if not all)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and bool({"verdicts", "causes", "check"} & report.keys())


def write_outputs(sim, report: dict, out: Path, *, checked=None) -> list[Path]:
    """The report, the design's tables as Parquet and its figures, into ``out``
    (``checked``: the run's check, which the figures read, when the caller has it).

    They are written into a new folder beside ``out``, then moved in once all
    of them are there: a failure on the way (a full disk, a name taken by a
    folder, Ctrl-C) leaves ``out`` as it was rather than half new. The files
    the last run wrote into ``out`` that this one does not (another design's
    tables, say) go: a folder holds one run. Only those: a list of them is kept
    in ``out`` (:data:`OUTPUTS_LIST`), and nothing else in it is touched; a
    file of an output's name that no run wrote there is refused, not replaced."""
    import shutil
    import tempfile

    from fanoutsim.designs import design_of

    design = design_of(sim)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        path = staging / "report.json"
        path.write_text(json.dumps(report, indent=2) + "\n")
        written = [path]
        for name, df in design.tables(sim).items():
            path = staging / f"{name}.parquet"
            df.to_parquet(path, index=False)
            written.append(path)
        written += [Path(p) for p in design.figures(sim, staging, checked=checked)]
        taken = [out / p.name for p in written if (out / p.name).is_dir()]
        if taken:
            raise IsADirectoryError(21, "a folder has the name of an output file", str(taken[0]))
        foreign = _foreign(out, {p.name for p in written})
        if foreign:  # a file of that name no run wrote there: someone else's
            raise FileExistsError(17, f"a file fanoutsim did not write there (no {OUTPUTS_LIST})", str(foreign[0]))
        out.mkdir(exist_ok=True)
        stale = _stale_outputs(out, {p.name for p in written})
        (staging / OUTPUTS_LIST).write_text(json.dumps(sorted(p.name for p in written)) + "\n")
        paths = []
        for p in written:
            os.replace(p, out / p.name)
            paths.append(out / p.name)
        os.replace(staging / OUTPUTS_LIST, out / OUTPUTS_LIST)
        for old in stale:
            old.unlink(missing_ok=True)
        return paths
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# the files the last run wrote into an output folder, by name (a folder holds one run)
OUTPUTS_LIST = ".fanoutsim-outputs.json"


def _listed(out: Path) -> list[str] | None:
    """The files the last run wrote into ``out``, by its :data:`OUTPUTS_LIST`
    (None: no list there — a folder of an older run, or not ours)."""
    try:
        before = json.loads((out / OUTPUTS_LIST).read_text())
    except (OSError, ValueError):
        return None
    return [n for n in before if isinstance(n, str)] if isinstance(before, list) else []


def _stale_outputs(out: Path, names: set[str]) -> list[Path]:
    """The files the last run listed in ``out`` that a run writing ``names`` does not write."""
    before = _listed(out) or []  # no list: nothing is removed
    return [out / n for n in before if n == Path(n).name and n not in names and (out / n).is_file()]


# -- example, schema, explain -----------------------------------------------------------
def _example(args: argparse.Namespace) -> int:
    from fanoutsim import examples

    if args.name is None:
        if args.out:
            return _error("--out needs a NAME: fanoutsim example NAME --out FILE (fanoutsim example lists them)")
        rows = [examples.summary(n) for n in examples.names()]
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"{r['name']:<{width}}  {r['design']:<7}  {r['description']}")
        print(f"\nwrite one to edit and run: {PROG} example NAME --out FILE && {PROG} run FILE")
        return 0
    try:
        source = examples.path(args.name)
        if args.out is None:
            print(source.read_text(encoding="utf-8"), end="")
            for recording in examples.replays(args.name):
                print(
                    f"{PROG}: note: this scenario replays {recording}, named relative to the file: write it "
                    f"with --out FILE to get the recording beside it",
                    file=sys.stderr,
                )
            return 0
        written = examples.write(args.name, args.out)
    except ValueError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write {exc.filename or args.out}: {exc.strerror or exc}")
    print(f"wrote {', '.join(map(str, written))}; run it with: {PROG} run {written[0]}")
    return 0


def _schema(args: argparse.Namespace) -> int:
    from fanoutsim import designs
    from fanoutsim.scenario import json_schema_text

    if args.design not in designs.names():
        return _error(f"no design named {args.design!r}; designs: {', '.join(designs.names())}")
    print(json_schema_text(args.design), end="")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from fanoutsim import serve as srv
    from fanoutsim import verdicts

    kinds = tuple(k for k, asked in (("duplicate", args.duplicates), ("lost", args.lost)) if asked)
    if kinds and args.id is not None:
        return _error("give an ID (one item's story) or --duplicates / --lost (every such item), not both")
    if not kinds and args.id is None:
        return _error("give an ID to tell one item's story, or --duplicates / --lost to list every such item")
    missing = _missing_run(args.db, story=not kinds)
    if missing is not None:
        return _error(missing)
    if not kinds and os.path.isdir(args.db):
        return _error(_no_story_in_folder(args.db))
    try:
        if kinds:
            print(verdicts.table(verdicts.read(args.db, design=args.design), kinds), end="")
        else:
            print(srv.explain(args.db, args.id, design=args.design), end="")
    except (ValueError, TypeError, RuntimeError, KeyError) as exc:
        return _error(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc))
    except OSError as exc:
        return _error(f"{exc.filename or args.db}: {exc.strerror or exc}")
    return 0


def _missing_run(path: str, *, story: bool) -> str | None:
    """What to do when nothing is at ``path`` (None: something is, or it is a URI).
    explain reads a finished run, so the next step is the command that makes one,
    not serve (which the store's own check would suggest): ``run --out`` writes a
    folder, ``run --store`` a store file; one item's ``story`` needs a store."""
    from fanoutsim.kernel.store import is_postgres
    from fanoutsim.kernel.validate import is_duckdb_path

    if is_postgres(path) or os.path.exists(path):
        return None
    if is_duckdb_path(path):
        return (
            f"{path}: no such file (a run's store file is made by '{PROG} run SCENARIO --store {path}', "
            f"or by '{PROG} serve --store {path}')"
        )
    if story:
        return (
            f"{path}: no such file or folder (an item's story is read from a run's store file, which "
            f"'{PROG} run SCENARIO --store FILE.duckdb' makes; a folder from run --out answers --duplicates / --lost)"
        )
    return (
        f"{path}: the folder does not exist (it is made by '{PROG} run SCENARIO --out {path}', "
        f"which writes the run's report there; or give the run's .duckdb store file)"
    )


def _no_story_in_folder(path: str) -> str:
    """Why an item's story is not in the folder ``path``, and where it is: a
    ``run --out`` folder keeps the checker's verdicts (report.json), not the
    tables an item's deliveries are read from."""
    story = (
        f"one item's story is read from a run's store: run the scenario with '--store FILE.duckdb', "
        f"then '{PROG} explain FILE.duckdb ID'"
    )
    if os.path.isfile(os.path.join(path, "report.json")):
        return (
            f"{path} is the folder of a run ('{PROG} run --out'): it answers --duplicates / --lost "
            f"(each such item and its cause), not an ID; {story}"
        )
    return f"{path} is a folder, not a run's store file; {story}"


def _hint_explain(db: str, answer) -> None:
    """After a write: what to do with the id it printed (on stderr, so stdout stays the answer)."""
    item = (
        answer
        if isinstance(answer, str)
        else next((answer[k] for k in ("firing", "seq", "event") if isinstance(answer, dict) and k in answer), None)
    )
    if item is None:
        return
    if _has_password(db):  # a masked password pasted back would be sent as "***": a placeholder instead
        print(f'{PROG}: its story as it is delivered: {PROG} explain "$URI" {item}', file=sys.stderr)
        print(
            f"{PROG}: (with URI set to this store's postgresql:// URI: it has a password, not printed)", file=sys.stderr
        )
        return
    print(f"{PROG}: its story as it is delivered: {PROG} explain {shlex.quote(db)} {item}", file=sys.stderr)


def _has_password(db: str) -> bool:
    """Whether the store ``db`` is a URI with a password in it (one that cannot
    be read counts as having one: it is not printed)."""
    if not db.startswith(("postgresql://", "postgres://")):
        return False
    import psycopg

    try:
        return bool(psycopg.conninfo.conninfo_to_dict(db).get("password"))
    except psycopg.Error:
        return True


def _warn_write(answer) -> None:
    """A write that nothing reads (a tenant no subscription has, an outbox with
    no consumer) succeeds, and says so on stderr: stdout stays the answer."""
    if isinstance(answer, dict) and answer.get("warning"):
        print(f"{PROG}: warning: {answer['warning']}", file=sys.stderr)


def _warn_status(found: dict) -> None:
    """The warnings status adds to its JSON, on stderr: falling behind; served by nobody now."""
    if found.get("falling_behind"):
        print(f"{PROG}: warning: {found['falling_behind']}", file=sys.stderr)
    if not found.get("running") and found.get("stopped_at"):
        print(
            f"{PROG}: not served now: the last server (pid {found.get('pid')}) stopped at {found['stopped_at']}",
            file=sys.stderr,
        )
    elif not found.get("running") and found.get("last_heartbeat_at"):
        print(
            f"{PROG}: not served now: the last server (pid {found.get('pid')}) died without a clean stop; "
            f"its last heartbeat was at {found['last_heartbeat_at']}",
            file=sys.stderr,
        )


_HELPER_COMMANDS = {"example": _example, "schema": _schema, "explain": _explain}
