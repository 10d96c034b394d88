"""The leases model beside a real run: the same case, the broker's preset, the same load.

:func:`model_run` runs :class:`~fanoutsim.designs.leases.simulation.LeaseSimulation`
with ``LeaseConfig.preset(...)`` of the broker (:data:`PRESET_OF`), the
case's settings (lease, in-flight limit, delivery limit, BackOff) and the
client the real consumer process is (:mod:`.client_process`): a waiting pull
(``pull_mode = "wait"``) keeping ``slots`` handlers busy, the same law of
handler times (drawn from the model's own seeded stream, not the real run's
draws), the same poison rule and nak delay. It publishes each message at the
time the real run published it (when a real run is given), and draws the
costs (publish -> delivered, the ack's round trip) from a
:class:`~fanoutsim.designs.leases.presets.Measured` — the costs this session
measured on the broker (:class:`~.cases.CostCase`), or the preset's file.

:meth:`ModelRun.record` reads the model's run as a :class:`~.record.BrokerRun`, so
that one set of readers serves both sides: a lease granted is a ``delivered``
event (at the grant: the hand-off's cost, a millisecond, is drawn inside the
worker and not traced), the trace's ``delivered`` an ``effect``, ``acked`` an
ack, ``nacked`` a failure, ``max_deliveries``/``dead_lettered``/``dropped``
what the broker did at the limit. The kill case's freeze is the model's crash
(``CrashAtPoint("worker.after_effect_before_ack")``: the process dies between
an effect and its ack, and restarts at once, as the waiting second process
takes over).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fanoutsim.designs.leases.config import LeaseConfig
from fanoutsim.designs.leases.presets import Measured, preset
from fanoutsim.designs.leases.realbrokers.cases import (
    PULL_WAIT,
    FloorCase,
    KillCase,
    LeaseCase,
    PoisonCase,
    PoissonCase,
)
from fanoutsim.designs.leases.realbrokers.client_process import work_seconds
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.faults import CrashAtPoint, FaultPlan
from fanoutsim.kernel.timeutil import US

PRESET_OF = {"nats-jetstream": "nats-jetstream-2.15", "redis-streams": "redis-streams-6.2"}
PARTITION = "p0"  # a stream of the harness is one subject (JetStream) or one key (Redis): one partition
LIMIT_KINDS = ("max_deliveries", "dead_lettered", "dropped")


def law(work: dict) -> Callable[[Any], float]:
    """The handler-time law of a client job's ``work``, as the model's ``duration(rng)``."""
    kind = work["law"]
    if kind == "fixed":
        seconds = float(work["seconds"])
        return lambda rng: seconds
    if kind == "lognormal":
        median, sigma = float(work["median"]), float(work["sigma"])
        return lambda rng: median * math.exp(sigma * rng.gauss(0.0, 1.0))
    if kind == "exponential":
        rate = 1.0 / float(work["mean"])
        return lambda rng: rng.expovariate(rate)
    raise ValueError(f"work law must be fixed, lognormal or exponential, got {kind!r}")


def config(broker: str, measured: Measured | None, retention: str = "limits", **overrides: Any) -> LeaseConfig:
    """The broker's preset with the costs ``measured`` (None: the preset's file's), the
    stream's ``retention`` (JetStream: ``"limits"``, the server's default, or
    ``"interest"``) and ``overrides``."""
    values = preset(PRESET_OF[broker]).config_values(measured)
    return LeaseConfig(**{**values, "retention_policy": retention, **overrides})


def _poison(lease) -> bool:
    return bool(json.loads(lease.payload or "{}").get("poison"))


def consumer_settings(case: Any, broker: str) -> dict:
    """``register_consumer`` keyword arguments for a case's consumer, as the real job has it."""
    jet = broker == "nats-jetstream"
    if isinstance(case, LeaseCase):
        limits = {"in_flight_limit": case.in_flight} if jet else {}
        return {"lease_seconds": case.lease, "batch_limit": case.slots, "duration": law(case.work()), **limits}
    if isinstance(case, KillCase):
        limits = {"batch_limit": case.batch, "in_flight_limit": case.batch}
        return {"lease_seconds": case.lease, "duration": law(case.work()), **limits}
    if isinstance(case, PoisonCase):
        return {
            "lease_seconds": case.lease,
            "batch_limit": 8,
            "in_flight_limit": 16,
            "duration": 0.0,
            "poison": _poison,
            "nack_delay": case.nak_delay,
        }
    if isinstance(case, PoissonCase):
        limits = {"in_flight_limit": case.in_flight} if jet else {}
        slots = 2 * case.in_flight if jet else case.in_flight
        return {"lease_seconds": case.lease, "batch_limit": slots, "duration": law(case.work()), **limits}
    raise TypeError(f"no model of case {type(case).__name__}")


def case_config(case: Any, broker: str, measured: Measured | None, **rules: Any) -> LeaseConfig:
    """The preset as the case sets the broker: its stream's retention, its delivery limit
    and BackOff (poison); ``rules`` over them."""
    retention = getattr(case, "retention", "limits") if broker == "nats-jetstream" else "limits"
    if isinstance(case, PoisonCase):
        backoff = case.backoff if broker == "nats-jetstream" else ()
        limit = {"max_deliver": case.max_deliver, "backoff": backoff, "at_max_deliver": _at_limit(broker)}
        return config(broker, measured, retention, **{**limit, **rules})
    return config(broker, measured, retention, **rules)


def _at_limit(broker: str) -> str:
    """What is done at the delivery limit: JetStream's advisory; the Redis client's dead letter."""
    return "advisory" if broker == "nats-jetstream" else "dead_letter"


@dataclass
class ModelRun:
    """A finished model run and the message number of each event it published."""

    sim: Any
    numbers: dict[str, int]  # event id -> the message's number n
    case: Any
    broker: str

    def record(self) -> BrokerRun:
        """The run read as a real run's record (see the module's docstring)."""
        sim, case, broker = self.sim, self.case, self.broker
        t = sim.trace()
        at = (t["t"].to_numpy() - sim.start_us) / US
        rec = BrokerRun(broker, f"model ({PRESET_OF[broker]})", case.name, {})
        events = []
        for k, row in enumerate(t.itertuples(index=False)):
            if row.kind == "published":
                rec.published.append([self.numbers[row.event_id], float(at[k]), False])
            elif row.kind == "crashed":
                rec.killed.append(["c", "model", float(at[k])])
            elif (ev := _event(row, float(at[k]), self.numbers)) is not None:
                events.append(ev)
        rec.limits = [[e[1], e[3], e[4], e[5]] for e in events if e[0] in LIMIT_KINDS]
        rec.events = [e for e in events if e[0] not in LIMIT_KINDS]
        return rec

    def floor(self, consumer: str, before: float | None = None) -> int:
        """The consumer's checkpoint, as the message number it stands on (0: none): now, or
        as it stood just ``before`` that time (seconds since the start; from the trace)."""
        t = self.sim.trace()
        moves = t[(t["kind"] == "checkpoint") & (t["consumer"] == consumer)]
        if before is not None:
            moves = moves[(moves["t"] - self.sim.start_us) / US < before]
        return 0 if moves.empty else self.numbers[moves["event_id"].iloc[-1]]


def model_floors(case: FloorCase, broker: str) -> list[int]:
    """Case 4 in the model, by hand: the messages leased at once, acked in the case's
    order; the checkpoint (as a message number) before the first ack and after each."""
    from fanoutsim.designs.leases.simulation import LeaseSimulation

    sim = LeaseSimulation(case_config(case, broker, None), seed=case.seed)
    m = case.messages
    sim.register_consumer("c", client=False, lease_seconds=60.0, batch_limit=m, in_flight_limit=m)
    numbers = {sim.publish(PARTITION, "message", {"n": n, "poison": False}): n for n in range(1, m + 1)}
    leases = {}
    while len(leases) < m:
        leases.update({numbers[lease.event_id]: lease for lease in sim.consume("c", m - len(leases))})
    run = ModelRun(sim, numbers, case, broker)
    floors = [run.floor("c")]
    for n in case.order():
        lease = leases[n]
        if sim.ack("c", lease.event_id, lease.token, lease.incarnation) != "acked":
            raise RuntimeError(f"the model refused the ack of message {n}")
        floors.append(run.floor("c"))
    return floors


def model_run(
    case: Any,
    broker: str,
    *,
    seed: int = 0,
    measured: Measured | None = None,
    real: BrokerRun | None = None,
    lateness: Dist | None = None,
    until: float = 600.0,
    **rules: Any,
) -> ModelRun:
    """The model's run of ``case`` on ``broker``'s preset. Messages are published at
    ``real``'s times (None: the case's own — a burst at time 0, or its Poisson times),
    one commit each; then it runs ``until`` seconds more (its loops wait for what is due).
    ``lateness``: what the consumer process's event loop adds to each handler (a law of
    seconds, :meth:`~.record.BrokerRun.handler_lateness`), drawn on top of its time.
    ``rules``: :class:`~fanoutsim.designs.leases.config.LeaseConfig` fields set over the
    preset's (``late_ack="refuse"``: RiffDB's rule, say)."""
    from fanoutsim.designs.leases.simulation import LeaseSimulation

    plan = None
    if isinstance(case, KillCase):
        plan = FaultPlan([CrashAtPoint("worker.after_effect_before_ack", nth=case.acked + 1, downtime=0.0)])
    sim = LeaseSimulation(case_config(case, broker, measured, **rules), seed=seed, faults=plan)
    names = case.names() if isinstance(case, PoissonCase) else ["c"]
    for name in names:
        settings = consumer_settings(case, broker)
        settings["duration"] = _durations(case, name, settings["duration"], real, lateness)
        sim.register_consumer(name, pull_mode="wait", poll_interval=PULL_WAIT, **settings)
    numbers = {}
    for n, at, poison in _publishes(case, real):
        if at > sim.now:
            sim.run(until=at)
        numbers[sim.publish(PARTITION, "message", {"n": n, "poison": poison})] = n
    sim.run(until=sim.now + until)
    return ModelRun(sim, numbers, case, broker)


def _durations(case: Any, consumer: str, base: Any, real: BrokerRun | None, lateness: Dist | None):
    """A model consumer's handler times: ``base`` (the case's law), or — under a Poisson
    load beside a real run — the very times the real consumer drew, message by message
    (a consumer's leases are granted in message order there, none expires), so that the
    two queues see one sequence of work; with ``lateness`` drawn on top."""
    if isinstance(case, PoissonCase) and real is not None:
        times = iter([work_seconds(case.work(), case.seed, consumer, n, 1) for n, _, _ in sorted(real.published)])
        base = lambda rng: next(times)  # noqa: E731
    if lateness is None:
        return base
    draw = base if callable(base) else (lambda rng: base)
    return lambda rng: draw(rng) + lateness.sample(rng)


def _publishes(case: Any, real: BrokerRun | None) -> list[tuple[int, float, bool]]:
    if real is not None:
        return [(int(n), float(t), bool(p)) for n, t, p in real.published]
    if isinstance(case, PoissonCase):
        return [(n, t, False) for n, t in enumerate(case.offsets(), 1)]
    count = case.batch if isinstance(case, KillCase) else case.messages
    poison = case.poison if isinstance(case, PoisonCase) else None
    return [(n, 0.0, n == poison) for n in range(1, count + 1)]


_KINDS = {"leased": "delivered", "delivered": "effect", "acked": "acked", "nacked": "failed"}


def _attempt(detail: Any) -> int:
    """The delivery count a trace row's detail names (``attempt 3: ...``, ``4 deliveries: ...``)."""
    words = str(detail).replace(":", " ").split()
    for i, w in enumerate(words):
        if w == "attempt" and i + 1 < len(words) and words[i + 1].isdigit():
            return int(words[i + 1])
    return int(words[0]) if words and words[0].isdigit() else 0


def _event(row, at: float, numbers: dict[str, int]) -> list | None:
    """A trace row of the model as a record's event (None: not one of them)."""
    if row.kind not in _KINDS and row.kind not in LIMIT_KINDS:
        return None
    if row.kind == "delivered" and row.actor != "worker":
        return None
    kind = _KINDS.get(row.kind, row.kind)
    n, attempt = numbers[row.event_id], _attempt(row.detail)
    done = at if kind == "acked" else None
    return [kind, row.consumer, "model", n, attempt, at, done]
