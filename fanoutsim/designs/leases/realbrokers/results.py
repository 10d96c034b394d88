"""Lesson 14's leases on real brokers: the results of the real runs, kept in a file, and the model beside them.

    python -m fanoutsim.designs.leases.realbrokers.results            # print what it measured
    python -m fanoutsim.designs.leases.realbrokers.results --write    # and write the results file

It starts a throwaway ``nats-server -js`` 2.15 and a Redis 6.2 (:mod:`.servers`),
runs every case of the comparison on both (:func:`.harness.run_real_all`),
compares each with the model (:func:`.harness.compare_broker`), then lets the
model choose JetStream's AckWait for :data:`TARGET` duplicates per message
(:func:`choose_ack_wait`: the smallest of :data:`ACK_WAITS` it predicts at or
under the target) and runs the lease case once more on the real server at that
AckWait, with :data:`CONFIRM_MESSAGES` messages. About three minutes on two busy
cores. It writes :data:`RESULTS_FILE`: when and on what it ran, each broker's
table (real against model), the real duplicates per message at each AckWait it
ran, and what each broker's killed consumers cost.

Lesson 14 reads the file — a lesson never starts a server — and runs the model
live beside it: :func:`duplicate_rates` (the model's duplicates per message
against AckWait, under JetStream's honoured late ack and under RiffDB's
refusal), :func:`real_points` (the file's, with exact 95% intervals),
:func:`ack_wait_figure`, and :func:`kill_costs` (what a kill cost, real and model).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fanoutsim.designs.leases.presets import Measured
from fanoutsim.designs.leases.realbrokers import compare, harness
from fanoutsim.designs.leases.realbrokers.cases import CASES, KillCase
from fanoutsim.designs.leases.realbrokers.model import model_run
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.designs.leases.realbrokers.servers import BROKERS, NatsServer, RedisServer
from fanoutsim.kernel.plotting import plain_log, style
from fanoutsim.kernel.stats import keep_measurement, percentiles, poisson_interval

RESULTS_FILE = Path(__file__).with_name("results.json")
COMMAND = "python -m fanoutsim.designs.leases.realbrokers.results --write"
TARGET = 0.05  # duplicates per message the lesson's AckWait aims at
ACK_WAITS = (1.0, 1.5, 2.0, 2.5, 3.0)  # seconds: the AckWaits the model is asked about
CONFIRM_MESSAGES = 480  # messages of the real run at the AckWait the model chose
JETSTREAM = "nats-jetstream"


# -- the model's side, live -----------------------------------------------------------------------
def duplicate_rates(
    ack_waits=ACK_WAITS, *, rules=("honour", "refuse"), seeds: int = 1, messages: int = 240, measured=None
) -> pd.DataFrame:
    """The model's duplicates per message on JetStream's preset: the lease case (lognormal
    handlers, median 0.8 s) at each AckWait, under each late-ack rule (``"honour"``:
    JetStream's; ``"refuse"``: RiffDB's). ``measured``: the costs (None: the preset's file's)."""
    rows = []
    for rule in rules:
        for ack_wait in ack_waits:
            case = dataclasses.replace(CASES["lease"], lease=float(ack_wait), messages=messages)
            runs = [model_run(case, JETSTREAM, seed=s, measured=measured, late_ack=rule).record() for s in range(seeds)]
            dups = sum(r.duplicates() for r in runs)
            rows.append(
                {"ack_wait": float(ack_wait), "late_ack": rule, "messages": messages * seeds, "duplicates": dups}
            )
    out = pd.DataFrame(rows)
    return out.assign(per_message=out["duplicates"] / out["messages"])


def choose_ack_wait(rates: pd.DataFrame, target: float = TARGET) -> float:
    """The smallest AckWait whose duplicates per message (JetStream's rule) are at or under ``target``."""
    honour = rates[(rates["late_ack"] == "honour") & (rates["per_message"] <= target)]
    if honour.empty:
        raise ValueError(f"no AckWait of {sorted(set(rates['ack_wait']))} keeps duplicates at or under {target:g}")
    return float(honour["ack_wait"].min())


# -- the real side, from the file -------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def load() -> dict:
    """The results file (:data:`RESULTS_FILE`), written by :data:`COMMAND`."""
    if not RESULTS_FILE.exists():
        raise FileNotFoundError(f"{RESULTS_FILE.name} is not there yet: run {COMMAND}")
    return json.loads(RESULTS_FILE.read_text(encoding="utf-8"))


def real_points(data: dict) -> pd.DataFrame:
    """The real duplicates per message at each AckWait run on JetStream, with Garwood's
    exact 95% interval of the count over the messages."""
    rows = []
    for p in data["ack_wait"]["real"]:
        low, high = poisson_interval(p["duplicates"])
        n = p["messages"]
        rows.append({**p, "per_message": p["duplicates"] / n, "low": low / n, "high": high / n})
    return pd.DataFrame(rows)


def ack_wait_figure(rates: pd.DataFrame, real: pd.DataFrame, target: float = TARGET) -> Figure:
    """Duplicates per message against AckWait: the model under each late-ack rule, the real
    server's points with their intervals, and the target."""
    with style():
        fig = Figure(figsize=(8.0, 4.5), layout="constrained")
        ax = fig.add_subplot()
        looks = {
            "honour": ("o-", "#1f77b4", "model, late ack honoured (JetStream)"),
            "refuse": ("s--", "#7f7f7f", "model, late ack refused (RiffDB)"),
        }
        for rule, part in rates.groupby("late_ack", sort=False):
            fmt, color, label = looks[rule]
            ax.plot(part["ack_wait"], part["per_message"], fmt, color=color, label=label)
        err = [real["per_message"] - real["low"], real["high"] - real["per_message"]]
        ax.errorbar(
            real["ack_wait"],
            real["per_message"],
            yerr=err,
            fmt="D",
            color="#d62728",
            capsize=4,
            label="real nats-server 2.15 (95% interval)",
        )
        ax.axhline(target, color="#333333", ls=":", lw=1, label=f"target: {target:g} per message")
        chosen = choose_ack_wait(rates, target)
        ax.axvline(chosen, color="#1f77b4", ls=":", lw=1, label=f"the model's choice: {chosen:g} s")
        ax.set_yscale("log")
        plain_log(ax, "y")  # 0.01, 0.1, ... not 10^-2
        ax.set_xlabel("AckWait (s): handlers lognormal, median 0.8 s")
        ax.set_ylabel("duplicates per message")
        ax.set_title("AckWait against duplicates: the model's curve, the real server's points")
        ax.legend(loc="upper right")
    return fig


def kill_summary(run: BrokerRun, consumers: list[str]) -> dict:
    """What the kills of one run cost: per kill, the messages in flight, redelivered, applied
    twice, lost; and the waits (freeze -> first redelivery; delivery -> redelivery)."""
    outs = [compare.kill_outcome(run, c) for c in consumers]
    return {
        "kills": len(outs),
        "in_flight": sum(len(o["in_flight"]) for o in outs),
        "redelivered": sum(len(o["redelivered"]) for o in outs),
        "applied_twice": sum(len(o["twice"]) for o in outs),
        "lost": sum(o["lost"] for o in outs),
        "freeze_to_redelivery_s": [round(float(x), 4) for x in compare.freeze_to_redelivery(run)],
        "delivery_to_redelivery_s": [round(float(x), 4) for x in run.redelivery_delays()],
    }


def kill_costs(data: dict, seeds: int = 20, measured: dict | None = None) -> pd.DataFrame:
    """What a killed consumer costs on each broker, real (the file's) and model (live,
    ``seeds`` kills): per kill, the messages in flight, redelivered and applied twice, and
    how long the redelivered ones waited."""
    rows = []
    case = KillCase()
    for broker in BROKERS:
        m = None if measured is None else measured.get(broker)
        runs = [model_run(case, broker, seed=s, measured=m).record() for s in range(seeds)]
        model = _merge([kill_summary(r, ["c"]) for r in runs])
        for side, k in (("real", data["kill"][broker]), ("model", model)):
            rows.append(_kill_row(broker, side, k))
    return pd.DataFrame(rows)


def _merge(parts: list[dict]) -> dict:
    out = {key: sum(p[key] for p in parts) for key in ("kills", "in_flight", "redelivered", "applied_twice", "lost")}
    for key in ("freeze_to_redelivery_s", "delivery_to_redelivery_s"):
        out[key] = [x for p in parts for x in p[key]]
    return out


def _kill_row(broker: str, side: str, k: dict) -> dict:
    kills = k["kills"]
    return {
        "broker": broker,
        "side": side,
        "kills": kills,
        "in_flight_per_kill": k["in_flight"] / kills,
        "redelivered_per_kill": k["redelivered"] / kills,
        "applied_twice_per_kill": k["applied_twice"] / kills,
        "lost": k["lost"],
        "waited_p50_s": float(np.median(k["delivery_to_redelivery_s"])),
        "freeze_to_redelivery_p50_s": percentiles(k["freeze_to_redelivery_s"])[50],
    }


# -- the command --------------------------------------------------------------------------------------
def _confirm(server, ack_wait: float, measured: Measured) -> dict:
    """The lease case on the real JetStream at ``ack_wait``, beside the model's."""
    case = dataclasses.replace(CASES["lease"], lease=ack_wait, messages=CONFIRM_MESSAGES)
    real = harness.run_broker(server, {"lease": case})["lease"]
    models = [model_run(case, JETSTREAM, seed=s, measured=measured, real=real).record() for s in range(4)]
    check = compare.compare_lease(case, real, models)[0]
    return {
        "ack_wait": ack_wait,
        "messages": case.messages,
        "duplicates": real.duplicates(),
        "model": check.model,
        "agrees": check.agrees,
        "test": check.test,
    }


def measure() -> dict:
    """Every case on both brokers, the model's AckWait confirmed on JetStream: the file's contents."""
    with NatsServer() as nats, RedisServer() as redis:
        runs = harness.run_real_all({JETSTREAM: nats, "redis-streams": redis})
        costs = {b: harness.session_costs(runs[(b, "costs")]) for b in BROKERS}
        chosen = choose_ack_wait(duplicate_rates(measured=costs[JETSTREAM], rules=("honour",), seeds=2))
        confirmed = _confirm(nats, chosen, costs[JETSTREAM])
    tables = {b: [dataclasses.asdict(c) for c in harness.compare_broker(b, runs)] for b in BROKERS}
    issue = runs[(JETSTREAM, "lease")]
    return {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "command": COMMAND,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {b: runs[(b, "costs")].version for b in BROKERS},
        "tables": tables,
        "ack_wait": {
            "target": TARGET,
            "chosen": chosen,
            "real": [
                {
                    "ack_wait": CASES["lease"].lease,
                    "messages": CASES["lease"].messages,
                    "duplicates": issue.duplicates(),
                },
                {k: confirmed[k] for k in ("ack_wait", "messages", "duplicates")},
            ],
            "confirmed": confirmed,
        },
        "kill": {b: kill_summary(runs[(b, "kill")], CASES["kill"].names()) for b in BROKERS},
    }


def summary(data: dict) -> str:
    lines = [f"measured {data['measured']} ({', '.join(f'{b} {v}' for b, v in data['versions'].items())})"]
    for broker, rows in data["tables"].items():
        checks = [compare.Check(**row) for row in rows]
        lines.append(compare.table(broker, data["versions"][broker], checks))
    c = data["ack_wait"]["confirmed"]
    lines.append(
        f"AckWait {c['ack_wait']:g} s (the model's choice for {TARGET:g} duplicates per message): "
        f"real {c['duplicates']} of {c['messages']}, model {c['model']}, {c['test']}"
    )
    return "\n\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fanoutsim.designs.leases.realbrokers.results",
        description="Run the leases comparison on a real nats-server -js and Redis; keep what lesson 14 shows.",
    )
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS_FILE.name}")
    args = parser.parse_args(argv)
    data = measure()
    keep_measurement(data, summary(data), RESULTS_FILE if args.write else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
