"""The ``fanoutsim`` command.

``fanoutsim run SCENARIO [--seed N] [--until SECONDS] [--out DIR] [--json]``
``fanoutsim serve --db FILE [--scenario S] [--rate R]``: a scenario of any design on
the wall clock, over a DuckDB file, until SIGTERM; ``fanoutsim write --db FILE
FIELD=VALUE ...``: that design's write command (a firing, a commit, a publish);
``fanoutsim fire --db FILE --reactor R [--payload JSON]``: the reactor's write by
its older name; ``fanoutsim status --db FILE``: the design's status as JSON (see
:mod:`fanoutsim.serve`).

runs a scenario file (see :mod:`fanoutsim.designs.reactor.scenario`), prints its delivery
report and the delivery checker's verdict (``--json``: both as JSON, and
nothing else, on stdout) and writes into DIR (default ``out/<scenario name>``):

* ``report.json`` — the delivery report, the checker's totals under ``check``;
* ``firings.parquet``, ``executions.parquet`` (``context`` as a JSON string)
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

A last line names the folder (on stderr with ``--json``). Any error — a
missing file, a bad scenario, a bad flag — prints ``fanoutsim: error: ...``
on stderr and exits with status 2.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Sequence

from fanoutsim import __version__

PROG = "fanoutsim"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds > 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Seeded simulations of durable event fan-out.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    run = sub.add_parser("run", help="run a scenario file and report what it delivered",
                         description="Run a scenario file, print its delivery report and write "
                                     "the tables, figures and report.json into a folder.")
    run.add_argument("scenario", metavar="SCENARIO", help="a scenario .toml file")
    run.add_argument("--seed", type=int, metavar="N", help="override [run] seed")
    run.add_argument("--until", type=_seconds, metavar="SECONDS",
                     help="override [run] until (virtual seconds)")
    run.add_argument("--out", metavar="DIR", help="output folder (default: out/<scenario name>)")
    run.add_argument("--json", action="store_true", help="print the report as JSON on stdout")

    srv = sub.add_parser("serve", help="run a scenario for real over a DuckDB file until stopped",
                         description="Run a scenario's design on the wall clock over a DuckDB file (which "
                                     "this process then owns) until SIGTERM or SIGINT; resumes from the file "
                                     "after any exit. Others reach it through FILE.serve.json (fanoutsim "
                                     "write / fire / status).")
    srv.add_argument("--db", required=True, metavar="FILE", help="the .duckdb file")
    srv.add_argument("--scenario", metavar="S",
                     help="a scenario .toml of any design (default: the file's design as it is; a new file: "
                          "the reactor)")
    srv.add_argument("--rate", type=_rate, metavar="R",
                     help="the workload at R events a second: the scenario's workloads scaled to R, or with "
                          "no scenario (reactor) pricing_reactor fired R times a second; 0: none")
    srv.add_argument("--port", type=int, default=0, help="control port on 127.0.0.1 (default: any free one)")

    wr = sub.add_parser("write", help="the design's write (a firing, a commit, a publish) into a DuckDB file",
                        description="Send the write command of the file's design to its server (or, with "
                                    "none running, write into the file itself) and print the answer as JSON.",
                        epilog=_write_fields_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    wr.add_argument("--db", required=True, metavar="FILE")
    wr.add_argument("--design", metavar="NAME", help="the design the file must hold (needed for a file that "
                                                     "records none)")
    wr.add_argument("fields", nargs="*", metavar="FIELD=VALUE",
                    help="the write's fields: FIELD=TEXT gives a string, FIELD:=JSON any JSON value")

    fire = sub.add_parser("fire", help="fire a reactor into a DuckDB file (through its server if one runs)")
    fire.add_argument("--db", required=True, metavar="FILE")
    fire.add_argument("--reactor", required=True)
    fire.add_argument("--tenant", default="public")
    fire.add_argument("--payload", default="{}", help='JSON object of sources, e.g. \'{"quote": {"price": 120}}\'')

    st = sub.add_parser("status", help="print the status of the run in a DuckDB file as JSON")
    st.add_argument("--db", required=True, metavar="FILE")
    st.add_argument("--design", metavar="NAME", help="the design the file must hold (needed for a file that "
                                                     "records none)")
    return parser


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of events per second") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of events per second >= 0")
    return value


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
    lines.append("e.g. fanoutsim write --db outbox.duckdb page=p1 body=hello due_in:=3")
    return "\n".join(lines)


def _fields(items: Sequence[str]) -> dict:
    """``FIELD=TEXT`` (a string) and ``FIELD:=JSON`` (any JSON value) as a dict."""
    out: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key or key == ":":
            raise ValueError(f"{item!r} is not FIELD=TEXT or FIELD:=JSON")
        if key.endswith(":"):
            key = key[:-1]
            try:
                out[key] = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{item!r}: the value after := is not JSON ({exc})") from None
        else:
            out[key] = text
    return out


def _error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        return _error(str(exc))
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if args.command == "run":
        return _run(args)
    if args.command in ("serve", "write", "fire", "status"):
        return _realtime(args)
    return _error(f"unknown command {args.command!r}")  # pragma: no cover - argparse catches it


def _realtime(args: argparse.Namespace) -> int:
    from fanoutsim import serve as srv
    from fanoutsim.scenario import ScenarioError, load_scenario
    from fanoutsim.kernel.store.duckdb import StoreError

    try:
        if args.command == "serve":
            scenario = load_scenario(args.scenario) if args.scenario else None
            what = f"the {scenario.design} scenario {scenario.name}" if scenario is not None else "its run"
            print(f"serving {args.db} with {what} (pid {os.getpid()}); stop with SIGTERM or Ctrl-C",
                  file=sys.stderr)
            return srv.serve(args.db, scenario, rate=args.rate, port=args.port)
        if args.command == "fire":
            try:
                payload = json.loads(args.payload)
            except ValueError as exc:
                return _error(f"--payload is not JSON: {exc}")
            if not isinstance(payload, dict):
                return _error("--payload must be a JSON object of source name -> value")
            answer = srv.write(args.db, {"reactor": args.reactor, "payload": payload, "tenant": args.tenant},
                               design="reactor")
            print(answer["firing"])
            return 0
        if args.command == "write":
            print(json.dumps(srv.write(args.db, _fields(args.fields), design=args.design)))
            return 0
        print(json.dumps(srv.status(args.db, design=args.design), indent=2))
        return 0
    except (ScenarioError, StoreError, ValueError, TypeError, RuntimeError) as exc:
        return _error(str(exc))


def _run(args: argparse.Namespace) -> int:
    from fanoutsim.designs import design_of
    from fanoutsim.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(args.scenario)
        sim = scenario.run(seed=args.seed, until=args.until)
    except ScenarioError as exc:
        return _error(str(exc))
    design = design_of(scenario)
    out = Path(args.out) if args.out else Path("out") / scenario.name
    report, checked = full_report(sim, scenario.name)
    try:
        written = write_outputs(sim, report, out)
    except OSError as exc:
        return _error(f"cannot write to {out}: {exc.strerror or exc}")
    if args.json:
        print(json.dumps(report, indent=2))
        print(f"wrote {len(written)} files to {out}", file=sys.stderr)
    else:
        print(design.format_report(report), end="")
        print()
        print(design.format_check(checked))
        print(f"\nwrote {len(written)} files to {out}")
    return 0


def full_report(sim, name: str):
    """The run's report (its design's ``report``, the checker's totals under
    ``check``) and the check itself (its design's ``check``)."""
    from fanoutsim.designs import design_of

    design = design_of(sim)
    checked = design.check(sim)
    return design.report(sim, name=name, checked=checked), checked


def write_outputs(sim, report: dict, out: Path) -> list[Path]:
    """The report, the design's tables as Parquet and its figures, into ``out``."""
    from fanoutsim.designs import design_of

    design = design_of(sim)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    paths.append(path)
    for name, df in design.tables(sim).items():
        path = out / f"{name}.parquet"
        df.to_parquet(path, index=False)
        paths.append(path)
    return paths + list(design.figures(sim, out))
