"""Measure what a lease's hand-off and an ack cost on this machine, for the brokers' presets.

    python -m fanoutsim.designs.leases.realbrokers.costs            # print a summary
    python -m fanoutsim.designs.leases.realbrokers.costs --write    # and write the data file

For each broker — a throwaway ``nats-server -js`` 2.15 and a throwaway Redis
6.2 (:mod:`.servers`), one after the other, so that neither disturbs the
other's timings — one consumer process (:mod:`.client_process`: nats-py's
``fetch``, redis-py's ``XREADGROUP ... BLOCK``) waits in its pull, and the
harness publishes 200 messages one at a time, each once the one before was
acked and a gap of 10-30 ms has passed (:class:`~.cases.CostCase`). Per message:

``publish_to_delivered_s``  the harness called publish (``js.publish``, which
                            waits for the stream's ack; ``XADD``) -> the
                            consumer's pull returned the message: the model's
                            ``deliver_cost``, a lease's hand-off to a waiting pull;
``ack_round_trip_s``        the consumer sent its ack -> the broker's answer
                            came back (nats-py's ``ack_sync``, ``XACK``): the
                            model's ``ack_cost``.

Both clocks are ``time.time()`` on one machine. The data file
(:data:`~fanoutsim.designs.leases.presets.BROKER_COSTS_FILE`) keeps the samples
in seconds, rounded to the microsecond, with when and on what they were
measured; the presets (``LeaseConfig.preset("nats-jetstream-2.15")``,
``"redis-streams-6.2"``) draw their costs from it. Their scenario files inline
the samples: after ``--write``, write them again with
``python -m fanoutsim.designs.leases.presets fanoutsim/examples/presets``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from importlib.metadata import version

from fanoutsim.designs.leases.presets import BROKER_COSTS_FILE
from fanoutsim.designs.leases.realbrokers.brokers import admin
from fanoutsim.designs.leases.realbrokers.cases import CostCase
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.designs.leases.realbrokers.servers import BROKERS, server
from fanoutsim.kernel.stats import keep_measurement, sample_line, samples_json

CLIENTS = {"nats-jetstream": "nats-py", "redis-streams": "redis"}
METHOD = (
    "one consumer process per broker waiting in its pull (nats-py fetch(1, timeout=1); redis-py "
    "XREADGROUP COUNT 1 BLOCK 1000), {messages} messages published one at a time by the measuring process, "
    "each once the one before was acked and a uniform 10-30 ms gap had passed; a throwaway "
    "nats-server -js (store in a temporary folder, 127.0.0.1) and a throwaway redis-server (Unix "
    "socket, no persistence, hz 100), one broker after the other. publish_to_delivered_s: the "
    "publish call began (js.publish, which waits for the stream's ack; XADD) -> the consumer's pull "
    "returned the message; ack_round_trip_s: the consumer's ack sent -> answered (ack_sync; XACK). "
    "time.time() on one machine; seconds, rounded to 1 us."
)


def run_costs(broker: str, messages: int = 200, seed: int = 0) -> BrokerRun:
    """The cost run on a throwaway server of ``broker``."""
    with server(broker) as s:
        a = admin(s)
        try:
            return CostCase(messages=messages, seed=seed).real(a)
        finally:
            a.close()


def entry(run: BrokerRun) -> dict:
    """One broker's part of the data file, from its cost run."""
    costs = CostCase.costs(run)
    return {
        "version": run.version,
        "client": f"{CLIENTS[run.broker]} {version(CLIENTS[run.broker])}",
        "messages": len(run.published),
        **{key: [round(float(v), 6) for v in values] for key, values in costs.items()},  # to the microsecond
    }


def measure(messages: int = 200, seed: int = 0, brokers=BROKERS) -> dict:
    """Each broker's costs, as the data file holds them."""
    out = {broker: entry(run_costs(broker, messages, seed)) for broker in brokers}
    return {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            # the machine is shared: how busy it was, over the last 1 / 5 / 15 minutes
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "method": METHOD.format(messages=messages),
        "brokers": out,
    }


def summary(data: dict) -> str:
    lines = [f"measured {data['measured']} on {data['machine']['cpus']} cpus"]
    for broker, d in data["brokers"].items():
        for key in ("publish_to_delivered_s", "ack_round_trip_s"):
            lines.append(sample_line(f"{broker} {d['version']:>7}", key, d[key], width=22))
    return "\n".join(lines)


def dumps(data: dict) -> str:
    """The data file's text: indented, each list of samples on one line."""
    return samples_json(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fanoutsim.designs.leases.realbrokers.costs",
        description="Measure a lease's hand-off and an ack's round trip on a real nats-server -js and Redis here.",
    )
    parser.add_argument("--messages", type=int, default=200, help="messages per broker (default 200)")
    parser.add_argument("--write", action="store_true", help=f"write {BROKER_COSTS_FILE.name} beside the presets")
    args = parser.parse_args(argv)
    if args.messages < 1:
        parser.error(f"--messages must be at least 1, got {args.messages}")
    data = measure(messages=args.messages)
    keep_measurement(data, summary(data), BROKER_COSTS_FILE if args.write else None)
    if args.write:
        print("write the presets' scenario files again with:")
        print("  python -m fanoutsim.designs.leases.presets fanoutsim/examples/presets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
