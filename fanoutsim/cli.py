"""The ``fanoutsim`` command.

``fanoutsim run SCENARIO [--seed N] [--until SECONDS] [--out DIR] [--json]``
``fanoutsim serve --db FILE [--scenario S] [--rate R]``, ``fanoutsim fire --db FILE
--reactor R [--payload JSON]``, ``fanoutsim status --db FILE``: the engine on the
wall clock (see :mod:`fanoutsim.designs.reactor.serve`).

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

    srv = sub.add_parser("serve", help="run the engine for real over a DuckDB file until stopped",
                         description="Run the engine on the wall clock over a DuckDB file (which this "
                                     "process then owns) until SIGTERM or SIGINT; resumes from the file "
                                     "after any exit. Others reach it through FILE.serve.json.")
    srv.add_argument("--db", required=True, metavar="FILE", help="the .duckdb file")
    srv.add_argument("--scenario", metavar="S", help="a scenario .toml: config, workflows, subscriptions, workload")
    srv.add_argument("--rate", type=_rate, metavar="R",
                     help="fire pricing_reactor R times a second (replaces the scenario's workload; 0: none)")
    srv.add_argument("--port", type=int, default=0, help="control port on 127.0.0.1 (default: any free one)")

    fire = sub.add_parser("fire", help="fire a reactor into a DuckDB file (through its server if one runs)")
    fire.add_argument("--db", required=True, metavar="FILE")
    fire.add_argument("--reactor", required=True)
    fire.add_argument("--tenant", default="public")
    fire.add_argument("--payload", default="{}", help='JSON object of sources, e.g. \'{"quote": {"price": 120}}\'')

    st = sub.add_parser("status", help="print the status of the run in a DuckDB file as JSON")
    st.add_argument("--db", required=True, metavar="FILE")
    return parser


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of firings per second") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of firings per second >= 0")
    return value


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
    if args.command in ("serve", "fire", "status"):
        return _realtime(args)
    return _error(f"unknown command {args.command!r}")  # pragma: no cover - argparse catches it


def _realtime(args: argparse.Namespace) -> int:
    from fanoutsim.designs.reactor import serve as srv
    from fanoutsim.designs.reactor.scenario import ScenarioError, load_scenario
    from fanoutsim.kernel.store.duckdb import StoreError

    try:
        if args.command == "serve":
            # the server runs the reactor design only: an outbox or leases file is refused by name
            scenario = load_scenario(args.scenario, design="reactor") if args.scenario else None
            print(f"serving {args.db} (pid {os.getpid()}); stop with SIGTERM or Ctrl-C", file=sys.stderr)
            return srv.serve(args.db, scenario, rate=args.rate, port=args.port)
        if args.command == "fire":
            try:
                payload = json.loads(args.payload)
            except ValueError as exc:
                return _error(f"--payload is not JSON: {exc}")
            if not isinstance(payload, dict):
                return _error("--payload must be a JSON object of source name -> value")
            print(srv.fire(args.db, args.reactor, payload, args.tenant))
            return 0
        print(json.dumps(srv.status(args.db), indent=2))
        return 0
    except (ScenarioError, StoreError, ValueError, TypeError, RuntimeError) as exc:
        return _error(str(exc))


def _run(args: argparse.Namespace) -> int:
    from fanoutsim.designs.reactor.checker import format_check
    from fanoutsim.report import (format_leases_check, format_leases_report, format_outbox_check,
                         format_outbox_report, format_report)
    from fanoutsim.designs.reactor.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(args.scenario)
        sim = scenario.run(seed=args.seed, until=args.until)
    except ScenarioError as exc:
        return _error(str(exc))
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
        fmt_report, fmt_check = {"outbox": (format_outbox_report, format_outbox_check),
                                 "leases": (format_leases_report, format_leases_check)}.get(
            scenario.design, (format_report, format_check))
        print(fmt_report(report), end="")
        print()
        print(fmt_check(checked))
        print(f"\nwrote {len(written)} files to {out}")
    return 0


def _is_outbox(sim) -> bool:
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    return isinstance(sim, OutboxSimulation)


def _is_leases(sim) -> bool:
    from fanoutsim.designs.leases.simulation import LeaseSimulation

    return isinstance(sim, LeaseSimulation)


def full_report(sim, name: str):
    """The delivery report with the checker's totals under ``check``, and the check
    (for an outbox run: :func:`~fanoutsim.designs.outbox.analysis.outbox_report` and
    :func:`~fanoutsim.designs.outbox.checker.check_outbox`; for a leases run:
    :func:`~fanoutsim.report.leases_report` and :func:`~fanoutsim.designs.leases.checker.check_leases`)."""
    if _is_outbox(sim):
        from fanoutsim.designs.outbox.analysis import outbox_report
        from fanoutsim.designs.outbox.checker import check_outbox

        checked = check_outbox(sim)
        return outbox_report(sim, name=name, checked=checked), checked
    if _is_leases(sim):
        from fanoutsim.designs.leases.checker import check_leases
        from fanoutsim.report import leases_report

        checked = check_leases(sim)
        return leases_report(sim, name=name, checked=checked), checked
    from fanoutsim.analysis import delivery_report
    from fanoutsim.designs.reactor.checker import check

    report = delivery_report(sim, name=name)
    checked = check(sim)
    report["check"] = checked.total
    return report, checked


def _leases_figures():
    """``fanoutsim.designs.leases.plots.save_leases_figures``, or None while it does not exist."""
    try:
        from fanoutsim.designs.leases import plots as leases
    except ImportError:
        return None
    return getattr(leases, "save_leases_figures", None)


def write_outputs(sim, report: dict, out: Path) -> list[Path]:
    """The report, the three tables as Parquet and the figures, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    paths.append(path)
    if _is_outbox(sim):
        from fanoutsim.designs.outbox.plots import save_outbox_figures

        for name, df in (("outbox", sim.outbox()), ("cursors", sim.cursors()), ("parked", sim.parked())):
            path = out / f"{name}.parquet"
            df.to_parquet(path, index=False)
            paths.append(path)
        return paths + save_outbox_figures(sim, out)
    if _is_leases(sim):
        for name, df in (("events", sim.events()), ("checkpoints", sim.checkpoints()),
                         ("dead_letters", sim.dead_letters()), ("consumers", sim.consumers())):
            path = out / f"{name}.parquet"
            df.to_parquet(path, index=False)
            paths.append(path)
        save = _leases_figures()
        return paths + (list(save(sim, out)) if save is not None else [])
    from fanoutsim.plots import save_report_figures

    executions = sim.executions()
    executions["context"] = [json.dumps(c, separators=(",", ":")) for c in executions["context"]]
    for name, df in (("firings", sim.firings()), ("executions", executions),
                     ("subscriptions", sim.subscriptions())):
        path = out / f"{name}.parquet"
        df.to_parquet(path, index=False)
        paths.append(path)
    paths += save_report_figures(sim, out)
    return paths
