"""Presets: the leases model set to what a real broker does for leased, acknowledged consumption.

``LeaseConfig.preset("nats-jetstream-2.15")`` is a :class:`~.config.LeaseConfig`
with NATS JetStream's rules and defaults for a durable pull consumer in the
options of :mod:`~fanoutsim.designs.leases.config` ("The brokers' rules"), and
``LeaseConfig.preset("redis-streams-6.2")`` Redis Streams' for a consumer
group; :func:`preset` is the whole record: where each value comes from
(``sources``) and the client settings the broker's own client uses
(``client``: keyword arguments of ``register_consumer``)::

    p = preset("nats-jetstream-2.15")
    sim = LeaseSimulation(LeaseConfig.preset("nats-jetstream-2.15", lease_seconds=1.0), seed=0)
    sim.register_consumer("worker", duration=..., **p.client_arguments())

The scenario files ``fanoutsim/examples/presets/leases-<preset>.toml`` set the
same values; they are written by :func:`scenario_toml` (``python -m
fanoutsim.designs.leases.presets fanoutsim/examples/presets``), since their
costs are the measured samples, inline.

The costs — a lease's hand-off (publish -> delivered to a waiting pull) and
an ack's round trip — come from :data:`BROKER_COSTS_FILE`, written by the
comparison harness's measuring command on a real ``nats-server -js`` and a real
Redis (its ``method`` says how, ``measured`` when). Its format::

    {"measured": "<UTC time>", "machine": "...", "method": "...",
     "brokers": {"nats-jetstream": {"version": "2.15.1", "messages": 400,
                                    "publish_to_delivered_s": [...],
                                    "ack_round_trip_s": [...]},
                 "redis-streams": {...}}}

Until the file holds a broker's measurement, its preset works without costs
(``deliver_cost`` and ``ack_cost`` stay None: no cost, no draw), and
:meth:`Preset.measured` says which command writes them. On another machine,
or under another load, measure again there, or give :meth:`Preset.config_values`
a :class:`Measured` of your own.

NATS JetStream (nats-server main, 2.15.0-dev at 1787eee; the issue's runs: 2.15.1)
==================================================================================

Read from ``server/consumer.go`` and nats.py's ``nats/js/api.py``
(``ConsumerConfig``: ``ack_wait`` and ``backoff`` in seconds,
``max_deliver``, ``max_ack_pending``) and ``nats/js/client.py``:

* ``AckWait`` 30 s (``JsAckWaitDefault``), ``MaxAckPending`` 1,000
  (``JsDefaultMaxAckPending``), ``MaxDeliver`` -1, no limit
  (``setConsumerConfigDefaults``); any ack wait and in-flight limit
  (``limits = "open"``); a pull's batch 1 (nats.py ``fetch(batch=1, timeout=5)``);
* a late ack is honoured: ``processAckMsgLocked`` acks whatever
  ``o.pending[sseq]`` holds, whichever delivery the ack answers;
* ``MaxDeliver`` counts deliveries and acts when the next would be made
  (``checkPending`` -> ``hasMaxDeliveries``; ``getNextMsg``: ``dc > o.maxdc``),
  with the ``MAX_DELIVERIES`` advisory, and the stream keeps the message
  (``needAck`` reads ``rdc``); the ack floor ``consumer_info`` reports (the
  consumer store's, ``server/filestore.go`` ``consumerFileStore.UpdateAcks``)
  passes it only at a later ack;
* a nak's delay with a ``BackOff`` list: ``processNak`` sets the pending
  timestamp to ``now - AckWait + delay``, measured against the delivery's
  ``BackOff`` entry in ``checkPending``;
* the stream's default retention is ``LimitsPolicy`` (age, size and count
  only; the issue's runs used an ``interest`` stream:
  ``LeaseConfig.preset("nats-jetstream-2.15", retention_policy="interest")``).
  ``MaxAge`` defaults to 0 (no limit): ``retention`` stays the model's 7 days.

Redis Streams (6.2.14)
======================

Read from ``src/t_stream.c``:

* ``XACK`` removes the PEL entry whoever holds it (``xackCommand`` looks the
  ID up in the group's PEL only): a late ack is honoured;
* nothing expires by itself: ``XAUTOCLAIM key group consumer min-idle-time
  start [COUNT count]`` takes the entries idle at least ``min-idle-time`` and
  increments their ``delivery_count`` (``xautoclaimCommand``; ``COUNT``
  defaults to 100) — ``lease_expiry = "claim"``, the lease is the
  min-idle-time (the caller's argument: no default, the model's 60 s);
* no delivery limit and no dead letters (``max_deliver = -1``), no bound on
  the PEL (the model's cap); Redis has no negative acknowledgement: a failed
  worker's nack leaves its entry in the PEL, for a claim once it is idle;
* ``XTRIM MINID`` deletes entries below an ID whatever the PEL holds
  (``retention_policy = "limits"``, by age).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.presetkit import preset_named, scenario_head, toml_value, write_scenarios

BROKER_COSTS_FILE = Path(__file__).with_name("broker_costs.json")
# what writes BROKER_COSTS_FILE (the comparison harness's measuring command)
MEASURE_COMMAND = "python -m fanoutsim.designs.leases.realbrokers.costs --write"


@functools.lru_cache(maxsize=1)
def broker_costs() -> dict:
    """The measured costs (:data:`BROKER_COSTS_FILE`), or ``{"brokers": {}}`` before any measurement."""
    if not BROKER_COSTS_FILE.exists():
        return {"brokers": {}}
    return json.loads(BROKER_COSTS_FILE.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Measured:
    """What a lease's hand-off and an ack cost on one machine, measured (seconds,
    empirical laws): ``deliver_cost``, publish -> delivered to a waiting pull, and
    ``ack_cost``, an ack's round trip."""

    deliver_cost: Dist  # publish -> delivered to a waiting pull
    ack_cost: Dist  # an ack's round trip

    @classmethod
    def of(cls, deliver, ack) -> Measured:
        """From samples (lists of seconds >= 0), each an empirical law."""
        return cls(*(Dist.empirical([float(x) for x in samples]) for samples in (deliver, ack)))


@dataclass(frozen=True)
class Preset:
    """A real broker's rules and defaults, in the leases options, each with where it
    comes from: ``name`` (what :meth:`~fanoutsim.designs.leases.config.LeaseConfig.preset` takes), ``broker`` (the key
    of its measurement in :data:`BROKER_COSTS_FILE`) and ``version`` (the release
    the values were read from); ``options``, the
    :class:`~fanoutsim.designs.leases.config.LeaseConfig` fields it sets
    (bar the measured costs); ``client``, the broker's client's settings, as
    ``register_consumer`` keyword arguments; ``sources``, where each value comes
    from."""

    name: str
    broker: str  # the key of its measurement in BROKER_COSTS_FILE
    version: str
    options: tuple[tuple[str, object], ...]  # LeaseConfig fields, bar the measured costs
    client: tuple[tuple[str, object], ...]
    sources: tuple[tuple[str, str], ...]

    def measured(self) -> Measured | None:
        """The costs measured in :data:`BROKER_COSTS_FILE` (None: not measured yet;
        :data:`MEASURE_COMMAND` writes them)."""
        data = broker_costs()["brokers"].get(self.broker)
        if data is None:
            return None
        return Measured.of(data["publish_to_delivered_s"], data["ack_round_trip_s"])

    def config_values(self, measured: Measured | None = None) -> dict:
        """The :class:`~.config.LeaseConfig` fields the preset sets (the costs:
        ``measured``'s, or the file's, or none before a measurement)."""
        m = measured or self.measured()
        costs = {} if m is None else {"deliver_cost": m.deliver_cost, "ack_cost": m.ack_cost}
        return {**dict(self.options), **costs}

    def client_arguments(self) -> dict:
        """``register_consumer`` keyword arguments of the broker's client (its pull's batch and wait)."""
        return dict(self.client)


def _preset(name: str, *, broker: str, version: str, options: dict, client: dict, sources: dict) -> Preset:
    """A :class:`Preset` from its tables (each a dict, in the order the scenario file lists them)."""
    return Preset(name, broker, version, tuple(options.items()), tuple(client.items()), tuple(sources.items()))


_MEASURED = (
    f"measured: broker_costs.json, brokers.{{broker}}.publish_to_delivered_s ({MEASURE_COMMAND})",
    f"measured: broker_costs.json, brokers.{{broker}}.ack_round_trip_s ({MEASURE_COMMAND})",
)
_CONSUMER_GO = "nats-server server/consumer.go"

PRESETS = {
    "nats-jetstream-2.15": _preset(
        "nats-jetstream-2.15",
        broker="nats-jetstream",
        version="2.15",
        options={
            "limits": "open",
            "batch_limit": 1,
            "in_flight_limit": 1000,
            "lease_seconds": 30.0,
            "max_deliver": -1,
            "max_deliver_rule": "deliveries",
            "at_max_deliver": "advisory",
            "nack_delay_rule": "plus_backoff",
            "late_ack": "honour",
            "lease_expiry": "recovery",
            "expiry_timer": "deadline",
            "retention_policy": "limits",
            "max_retry_delay": 7 * 86400.0,
        },
        client={"batch_limit": 1, "pull_mode": "wait", "poll_interval": 5.0},
        sources={
            "limits": f"{_CONSUMER_GO}: AckWait is any duration and MaxAckPending up to the account's limits",
            "batch_limit": "nats.py nats/js/client.py: PullSubscription.fetch(batch=1, timeout=5)",
            "in_flight_limit": f"{_CONSUMER_GO}: JsDefaultMaxAckPending = 1000",
            "lease_seconds": f"{_CONSUMER_GO}: JsAckWaitDefault = 30 * time.Second",
            "max_deliver": f"{_CONSUMER_GO}: setConsumerConfigDefaults sets MaxDeliver = -1, no limit",
            "max_deliver_rule": (
                f"{_CONSUMER_GO}: checkPending -> hasMaxDeliveries at the last delivery's deadline; "
                "getNextMsg skips a redelivery with dc > o.maxdc"
            ),
            "at_max_deliver": (
                f"{_CONSUMER_GO}: notifyDeliveryExceeded sends the MAX_DELIVERIES advisory, needAck keeps "
                "the message in the stream (rdc); server/filestore.go: consumerFileStore.UpdateAcks moves "
                "the reported ack floor past it only at a later ack"
            ),
            "nack_delay_rule": (
                f"{_CONSUMER_GO}: processNak sets p.Timestamp = now - AckWait + delay; "
                "checkPending's deadline is the delivery's BackOff entry"
            ),
            "late_ack": f"{_CONSUMER_GO}: processAckMsgLocked acks o.pending[sseq], whichever delivery acks",
            "lease_expiry": f"{_CONSUMER_GO}: checkPending redelivers every pending message past its deadline",
            "expiry_timer": f"{_CONSUMER_GO}: checkPending ends with o.resetPtmr(next): the next deadline",
            "retention_policy": "nats.py nats/js/api.py: StreamConfig.retention unset: the server's LimitsPolicy",
            "max_retry_delay": "nats.py nats/aio/msg.py: Msg.nak(delay) takes any delay (the model's cap: a week)",
            "pull_mode": "nats.py nats/js/client.py: fetch waits up to its timeout for messages (5 s)",
            "deliver_cost": _MEASURED[0].format(broker="nats-jetstream"),
            "ack_cost": _MEASURED[1].format(broker="nats-jetstream"),
        },
    ),
    "redis-streams-6.2": _preset(
        "redis-streams-6.2",
        broker="redis-streams",
        version="6.2",
        options={
            "limits": "open",
            "batch_limit": 100,
            "in_flight_limit": 100_000,  # config.OPEN_IN_FLIGHT_RANGE's top (config imports this module)
            "lease_seconds": 60.0,
            "max_deliver": -1,
            "max_deliver_rule": "deliveries",
            "late_ack": "honour",
            "lease_expiry": "claim",
            "retention_policy": "limits",
        },
        client={"batch_limit": 100, "pull_mode": "wait", "poll_interval": 5.0},
        sources={
            "limits": "redis src/t_stream.c: min-idle-time is any number of ms; a group's PEL has no bound",
            "batch_limit": "redis src/t_stream.c: xautoclaimCommand's long count = 100 (XREADGROUP: all, no COUNT)",
            "in_flight_limit": "redis src/t_stream.c: no bound on the PEL (the model's cap, 100,000)",
            "lease_seconds": "redis: XAUTOCLAIM's min-idle-time is the caller's argument (the model's 60 s)",
            "max_deliver": "redis src/t_stream.c: delivery_count is counted, never limited",
            "max_deliver_rule": "redis src/t_stream.c: delivery_count counts deliveries (XREADGROUP sets 1)",
            "late_ack": "redis src/t_stream.c: xackCommand removes the group's PEL entry, whoever holds it",
            "lease_expiry": (
                "redis src/t_stream.c: xautoclaimCommand claims entries idle >= min-idle-time, nack->delivery_count++"
            ),
            "retention_policy": "redis src/t_stream.c: XTRIM MINID deletes entries whatever the PEL holds",
            "pull_mode": "redis: XREADGROUP ... BLOCK waits for new entries",
            "deliver_cost": _MEASURED[0].format(broker="redis-streams"),
            "ack_cost": _MEASURED[1].format(broker="redis-streams"),
        },
    ),
}


_DESCRIPTION = (
    "A {broker} {version} consumer at the broker's rules and defaults as the leases model: handlers "
    "from a lognormal law whose median is 0.8 x the 1 s lease, 5 events/s."
)
_STORY = """The issue's comparison: one consumer with a 1 s lease whose handlers take a
lognormal time with a median of 0.8 s (a third of them overrun the lease), 50
at once, 5 events/s on one partition. Overrun handlers' work is delivered twice;
how often again depends on the late-ack rule."""
_TABLES = """
[leases]
{leases}

[[consumers]]
name = "worker"
lease_seconds = 1.0
batch_limit = 50
duration = {{ dist = "lognormal", median = 0.8, sigma = 0.5 }}
{client}

[[workload]]
rate = 5.0
partitions = 1
stop = 240.0
"""


def scenario_toml(name: str) -> str:
    """The text of the preset's scenario file (``fanoutsim/examples/presets/leases-<name>.toml``)."""
    p = preset(name)
    data = broker_costs()["brokers"].get(p.broker)
    measured = (
        f"costs not measured yet: {MEASURE_COMMAND} writes them"
        if data is None
        else f"costs measured {broker_costs().get('measured', '?')}, {data.get('messages', '?')} messages; "
        'see broker_costs.json\'s "method"'
    )
    head = scenario_head(
        **{
            "design": "leases",
            "name": p.name,
            "title": f"{p.broker} {p.version}'s rules and defaults",
            "costs_file": "broker_costs.json",
            "sources": p.sources,
            "measured": measured,
            "story": _STORY,
            "description": _DESCRIPTION.format(broker=p.broker, version=p.version),
            "until": 300.0,
        }
    )
    client = {k: v for k, v in p.client if k != "batch_limit"}
    return head + _TABLES.format(
        leases="\n".join(f"{k} = {toml_value(v)}" for k, v in p.config_values().items()),
        client="\n".join(f"{k} = {toml_value(v)}" for k, v in client.items()),
    )


# preset(name): the preset called ``name`` (a key of PRESETS), or a ValueError naming them
preset: Callable[[str], Preset] = functools.partial(preset_named, PRESETS)
# ``python -m fanoutsim.designs.leases.presets DIR``: write every preset's scenario file into DIR
main = functools.partial(write_scenarios, design="leases", names=PRESETS, text=scenario_toml)

if __name__ == "__main__":
    sys.exit(main(sys.argv))
