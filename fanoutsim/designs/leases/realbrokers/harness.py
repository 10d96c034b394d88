"""Run every case on the real brokers, then the model beside each, and compare.

:func:`run_real_all` runs the cases (:data:`~.cases.CASES`) on each started
server, the two brokers at once (a thread each), the cases of one broker one
after the other — the costs first, on a quiet broker; :func:`compare_broker`
runs the model of each case with the broker's preset and the costs measured
in this session (:func:`session_costs`: on a shared machine they move with its
load, so the model of a run draws the costs of the machine as it was then),
and returns the checks of :mod:`.compare`::

    from fanoutsim.designs.leases.realbrokers import harness, servers

    with servers.NatsServer() as nats, servers.RedisServer() as redis:
        runs = harness.run_real_all({"nats-jetstream": nats, "redis-streams": redis})
    for broker in servers.BROKERS:
        checks = harness.compare_broker(broker, runs)
        print(compare.table(broker, runs[(broker, "costs")].version, checks))

About a minute and a half for both brokers on two busy cores (the Poisson case
publishes for 20 s; a kill case starts eleven processes).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fanoutsim.designs.leases.presets import Measured
from fanoutsim.designs.leases.realbrokers import compare as cmp
from fanoutsim.designs.leases.realbrokers.brokers import admin
from fanoutsim.designs.leases.realbrokers.cases import CASES, CostCase
from fanoutsim.designs.leases.realbrokers.model import model_floors, model_run
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.kernel.dist import Dist

# the model's runs beside each real one: seeds (the real run's publish times, the model's draws)
MODEL_SEEDS = {"lease": 4, "kill": 40, "poisson": 3}


def run_broker(server: Any, cases: dict[str, Any] | None = None) -> dict[str, BrokerRun]:
    """Every case on one started server (:mod:`.servers`), one after the other."""
    a = admin(server)
    try:
        return {name: case.real(a) for name, case in (cases or CASES).items()}
    finally:
        a.close()


def run_real_all(servers: dict[str, Any], cases: dict[str, Any] | None = None) -> dict[tuple[str, str], BrokerRun]:
    """Every case on every broker (``servers``: broker -> started server), the brokers at once."""
    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        done = {broker: pool.submit(run_broker, server, cases) for broker, server in servers.items()}
        return {(broker, name): run for broker, future in done.items() for name, run in future.result().items()}


def session_costs(run: BrokerRun) -> Measured:
    """The costs a cost run measured (:class:`~.cases.CostCase`), as the preset draws them."""
    costs = CostCase.costs(run)
    return Measured.of(costs["publish_to_delivered_s"], costs["ack_round_trip_s"])


def lateness(case: Any, real: BrokerRun) -> Dist | None:
    """What the real consumer processes' event loops added to each handler in ``real``
    (:meth:`~.record.BrokerRun.handler_lateness`), as an empirical law (None: no handler ran)."""
    late = real.handler_lateness(case.work(), case.seed)
    return Dist.empirical([float(x) for x in late]) if len(late) else None


def _models(
    case: Any, broker: str, measured: Measured, real: BrokerRun, seeds: int, replay: bool = True
) -> list[BrokerRun]:
    """The model's runs of ``case`` beside ``real``: its publish times (``replay``; else the
    case's own), the costs ``measured``, the real consumers' lateness."""
    late, publishes = lateness(case, real), real if replay else None
    runs = [model_run(case, broker, seed=s, measured=measured, real=publishes, lateness=late) for s in range(seeds)]
    return [run.record() for run in runs]


def compare_broker(
    broker: str,
    runs: dict[tuple[str, str], BrokerRun],
    *,
    alpha: float = 0.05,
    cases: dict[str, Any] | None = None,
    measured: Measured | None = None,
) -> list[cmp.Check]:
    """The checks of every case of ``broker``: its real runs against the model's."""
    cases = cases or CASES
    m = measured or session_costs(runs[(broker, "costs")])
    out: list[cmp.Check] = []
    for name, case in cases.items():
        real = runs.get((broker, name))
        if real is None or name == "costs":
            continue
        out += _compare_case(case, broker, real, m, alpha)
    return out


def _compare_case(case: Any, broker: str, real: BrokerRun, m: Measured, alpha: float) -> list[cmp.Check]:
    if case.name.startswith("floor"):
        floors = [f for _, _, f in real.floors]
        return [cmp.compare_floor(case.name, floors, model_floors(case, broker), case.order())]
    if case.name == "lease":
        return cmp.compare_lease(case, real, _models(case, broker, m, real, MODEL_SEEDS["lease"]), alpha)
    if case.name == "kill":
        # the model's trials each publish their batch at once (the real ones are staggered)
        return cmp.compare_kill(case, real, _models(case, broker, m, real, MODEL_SEEDS["kill"], replay=False), alpha)
    if case.name == "poison":
        run = model_run(case, broker, measured=m, real=real)
        last = max(n for n, _, _ in real.published)
        before = next(t for n, t, _ in run.record().published if n == last)
        real_floor = {step: f for step, _, f in real.floors}
        floors = {
            "limit": (real_floor["limit"], run.floor("c", before=before)),
            "after": (real_floor["after"], run.floor("c")),
        }
        return cmp.compare_poison(case, real, run.record(), floors, broker)
    if case.name == "poisson":
        return cmp.compare_poisson(case, real, _models(case, broker, m, real, MODEL_SEEDS["poisson"]), alpha)
    raise ValueError(f"no comparison for case {case.name!r}")


def with_settings(name: str, **changes: Any) -> Any:
    """A case of :data:`~.cases.CASES` with some settings changed (a smaller run, say)."""
    return dataclasses.replace(CASES[name], **changes)
