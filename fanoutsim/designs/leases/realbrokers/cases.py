"""The comparison's cases, each a seeded load run on a real broker (issue 39's list).

Each case is a frozen dataclass of its settings with a :meth:`real` method that
runs it on a started broker (an :class:`~.brokers.Admin`) and returns a
:class:`~.record.BrokerRun`; :mod:`.model` runs the same settings in the model.
Every run has a stream of its own. The harness waits for *events* — a count of
deliveries, acks, a broker that owes nothing more — with generous timeouts,
never for a fixed time.

==========  ===================================================================
``lease``   handler times from a lognormal law whose median is a little under
            the lease (AckWait, or the idle time a Redis claim asks for): the
            duplicates (effects applied twice) per message
``kill``    a consumer process killed with SIGKILL mid-batch (``batch``
            fetched, ``acked`` acked, the next one's effect applied): what is
            redelivered, to whom, and after how long
``poison``  a message whose handler always fails: its deliveries up to the
            limit, their times, and what the broker does at the limit
``floor``   several messages in flight acked out of order: the ack floor after
            each ack
``poisson`` Poisson publishes, two to four consumers, an in-flight limit that
            binds: publish -> handled latency
==========  ===================================================================

The consumers' handlers sleep (their times drawn from the case's law, seeded
by message and delivery), so a run's cost is waiting, not CPU.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from fanoutsim.designs.leases.realbrokers.brokers import Admin, ConsumerSpec, dead_letters
from fanoutsim.designs.leases.realbrokers.clients import EVENT_TIMEOUT, ClientProcess, start_all, stop_all
from fanoutsim.designs.leases.realbrokers.record import BrokerRun

PULL_WAIT = 1.0  # seconds a pull waits for a message (a Redis consumer less, when a claim comes due sooner)
# what one pull asks for: nats.py's fetch(batch) waits to fill its batch until its timeout, so a
# JetStream worker fetches one at a time (fetch's default batch); XREADGROUP's COUNT returns at once
PULL_BATCH = {"nats-jetstream": 1, "redis-streams": None}  # None: every free slot
SETTLE_EVERY = 0.05  # seconds between two looks at what a broker still owes
_streams = itertools.count(1)


class Run:
    """One real run in the making: its stream, its processes, its record."""

    def __init__(self, admin: Admin, case: Any, consumers: list[ConsumerSpec]) -> None:
        self.admin, self.case = admin, case
        jet = admin.broker == "nats-jetstream"
        self.t0 = time.time()
        self.stream = f"fs{case.name}{next(_streams)}{random.Random().randrange(16**6):06x}"
        self.consumers = consumers
        self.specs = {c.name: c for c in consumers}
        admin.create(self.stream, consumers, getattr(case, "retention", "limits") if jet else "limits")
        self.procs: list[ClientProcess] = []
        self.record = BrokerRun(admin.broker, admin.version, case.name, asdict(case))

    def job(self, consumers: list[str], name: str, **settings: Any) -> dict:
        """A consumer process's job (:data:`.client_process.JOB_KEYS`) on this run's stream:
        a member of each of ``consumers`` (their specs alike: the first's lease and limit)."""
        spec = self.specs[consumers[0]]
        claim = None
        if self.admin.broker == "redis-streams":
            dead = {c: dead_letters(self.stream, c) for c in consumers}
            claim = {"idle": spec.lease, "max_deliver": spec.max_deliver, "dead": dead}
        job = {
            "broker": self.admin.broker,
            "endpoint": self.admin.endpoint,
            "stream": self.stream,
            "consumers": consumers,
            "name": name,
            "wait": PULL_WAIT,
            "seed": getattr(self.case, "seed", 0),
            "poison_delay": 0.0,
            "hold_after": None,
            "claim": claim,
            **settings,
        }
        if job.get("batch") is None:
            job["batch"] = PULL_BATCH[self.admin.broker] or job["slots"]
        return job

    def start(self, jobs: list[dict]) -> list[ClientProcess]:
        procs = start_all(jobs)
        self.procs += procs
        return procs

    def publish(self, n: int, poison: bool = False) -> None:
        self.record.published.append([n, self.admin.publish(self.stream, n, poison) - self.t0, poison])

    def floor(self, step: Any, consumer: str) -> None:
        self.record.floors.append([step, consumer, self.admin.floor(self.stream, consumer)])

    def settle(self, timeout: float = EVENT_TIMEOUT) -> None:
        """Until the broker owes no consumer anything (every message acked, or past its
        limit) and no live process has a handler running."""
        deadline = time.monotonic() + timeout
        while True:
            owed = {c.name: self.admin.unacked(self.stream, c.name) for c in self.consumers}
            busy = [p.name for p in self.procs if p.process.poll() is None and _handling(p)]
            if not any(owed.values()) and not busy:
                return
            for p in self.procs:
                if p.errors:
                    raise RuntimeError(f"consumer process {p} failed: {p.errors[0]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.case.name}: after {timeout:g} s the broker still owes {owed}, busy: {busy}")
            time.sleep(SETTLE_EVERY)

    def finish(self) -> BrokerRun:
        """Stop the processes; the record, its times since the run's start."""
        stop_all(self.procs)
        rec, t0 = self.record, self.t0
        for p in self.procs:
            for e in p.events:
                if e[0] == "ready":
                    continue
                kind, consumer, n, deliveries, t, *done = e
                rec.events.append([kind, consumer, p.name, n, deliveries, t - t0, done[0] - t0 if done else None])
        rec.events.sort(key=lambda e: e[5])
        for c in self.consumers:
            rec.limits += [[c.name, n, d, t - t0] for n, d, t in self.admin.at_limit(self.stream, c.name)]
        rec.retained = self.admin.retained(self.stream)
        rec.wall_seconds = time.time() - t0
        return rec

    def abort(self) -> None:
        stop_all(self.procs, kill=True)


def numbered(count: int) -> list[str]:
    """The names of ``count`` consumers: c1, c2, ..."""
    return [f"c{k}" for k in range(1, count + 1)]


def exponential(mean: float) -> dict:
    """A client job's handler times, exponential of ``mean`` seconds."""
    return {"law": "exponential", "mean": mean}


def _handling(p: ClientProcess) -> bool:
    """Whether the process has a delivery it has not answered (acked, failed or held)."""
    return len(p.of("delivered")) > len(p.of("acked", "failed", "held"))


def running(run: Run, body) -> BrokerRun:
    """``body(run)``, then the record; every process stopped (killed if ``body`` failed)."""
    try:
        body(run)
    except BaseException:
        run.abort()
        raise
    return run.finish()


@dataclass(frozen=True)
class LeaseCase:
    """Case 1: handler times lognormal (``median``, ``sigma``) against a lease of
    ``lease`` seconds; ``messages`` published at once to one consumer that holds at
    most ``in_flight`` unacked (JetStream's MaxAckPending; Redis: none) with
    ``slots`` handlers."""

    name: str = "lease"
    messages: int = 240
    lease: float = 1.0
    median: float = 0.8
    sigma: float = 0.5
    in_flight: int = 24
    slots: int = 48
    seed: int = 0

    def work(self) -> dict:
        return {"law": "lognormal", "median": self.median, "sigma": self.sigma}

    def real(self, admin: Admin) -> BrokerRun:
        run = Run(admin, self, [ConsumerSpec("c", self.lease, self.in_flight)])

        def body(run: Run) -> None:
            (proc,) = run.start([run.job(["c"], "worker", slots=self.slots, work=self.work())])
            for n in range(1, self.messages + 1):
                run.publish(n)
            proc.go()
            run.settle(timeout=EVENT_TIMEOUT + self.messages * self.median)

        return running(run, body)


@dataclass(frozen=True)
class KillCase:
    """Case 2: in each of ``trials`` consumers, a process takes a batch of ``batch``
    and handles them at once (times exponential of mean ``mean_work``); at the
    effect after the ``acked``-th ack it freezes (SIGSTOP) and is killed with
    SIGKILL. A second process of the same consumer, waiting, gets what was in
    flight once the lease (``lease`` s) is over. The trials start ``stagger`` s
    apart, so that their redeliveries do not all come at one instant."""

    name: str = "kill"
    trials: int = 8
    batch: int = 8
    acked: int = 3
    lease: float = 1.0
    mean_work: float = 0.25
    stagger: float = 0.1
    seed: int = 0

    def names(self) -> list[str]:
        return numbered(self.trials)

    def work(self) -> dict:
        return exponential(self.mean_work)

    def real(self, admin: Admin) -> BrokerRun:
        run = Run(admin, self, [ConsumerSpec(c, self.lease, self.batch) for c in self.names()])
        work = self.work()

        def body(run: Run) -> None:
            batch = {"slots": self.batch, "batch": self.batch, "work": work}
            victims = run.start([run.job([c], "victim", hold_after=self.acked + 1, **batch) for c in self.names()])
            (rescuer,) = run.start([run.job(self.names(), "rescuer", **batch)])
            for n in range(1, self.batch + 1):
                run.publish(n)
            for v in victims:
                v.go()
                v.wait_for(lambda events: len([e for e in events if e[0] == "delivered"]) >= self.batch, "the batch")
                rescuer.go(v.consumers[0])  # it waits: nothing is free for it until a lease is over
                time.sleep(self.stagger)
            for v in victims:  # frozen at its held effect: killed there
                v.wait_for(lambda events: any(e[0] == "held" for e in events), "held effect")
                run.record.killed.append([v.consumers[0], v.name, v.kill() - run.t0])
            run.settle()

        return running(run, body)


@dataclass(frozen=True)
class PoisonCase:
    """Case 3: messages 1..``messages``, the ``poison``-th always failing (JetStream:
    nak'd with ``nak_delay``; Redis: left pending, claimed when idle for ``lease``),
    ``max_deliver`` deliveries at most (JetStream: with the ``backoff`` list); after
    the limit one more message, to see the floor pass the poison message."""

    name: str = "poison"
    retention: str = "interest"  # JetStream: the stream keeps a message until every consumer acked it
    messages: int = 4
    poison: int = 2
    max_deliver: int = 4
    backoff: tuple[float, ...] = (0.2, 0.4, 0.6)
    nak_delay: float = 0.3
    lease: float = 0.3  # Redis's claim idle time (JetStream's ack wait is backoff[0])
    seed: int = 0

    def real(self, admin: Admin) -> BrokerRun:
        jet = admin.broker == "nats-jetstream"
        spec = ConsumerSpec("c", self.lease, 16, self.max_deliver, self.backoff if jet else ())
        run = Run(admin, self, [spec])

        def body(run: Run) -> None:
            work = {"law": "fixed", "seconds": 0.0}
            (proc,) = run.start([run.job(["c"], "worker", slots=8, work=work, poison_delay=self.nak_delay)])
            for n in range(1, self.messages + 1):
                run.publish(n, poison=n == self.poison)
            proc.go()
            run.settle()
            run.floor("limit", "c")
            last = self.messages + 1
            run.publish(last)
            proc.wait_for(lambda events: any(e[0] == "acked" and e[2] == last for e in events), "the last ack")
            run.settle()
            run.floor("after", "c")

        return running(run, body)


@dataclass(frozen=True)
class FloorCase:
    """Case 4: ``messages`` delivered at once to one consumer and acked in a seeded
    order, one by one; the ack floor read before the first ack and after each."""

    name: str = "floor"
    messages: int = 8
    retention: str = "limits"  # JetStream's stream ("interest": acked messages removed at once)
    seed: int = 0

    def order(self) -> list[int]:
        order = list(range(1, self.messages + 1))
        random.Random(f"fanoutsim:realbrokers:floor:{self.seed}").shuffle(order)
        return order

    def real(self, admin: Admin) -> BrokerRun:
        run = Run(admin, self, [ConsumerSpec("c", 60.0, self.messages)])

        def body(run: Run) -> None:
            for n in range(1, self.messages + 1):
                run.publish(n)
            held: dict[int, Any] = {}
            while len(held) < self.messages:
                held.update({n: h for h, n, _ in admin.pull(run.stream, "c", self.messages - len(held))})
            run.floor(0, "c")
            for n in self.order():
                admin.ack(run.stream, "c", held[n])
                run.floor(n, "c")

        return running(run, body)


@dataclass(frozen=True)
class PoissonCase:
    """Case 5: ``messages`` published at Poisson times, ``rate`` a second, to
    ``consumers`` consumers (each gets every message: fan-out), each one process that
    holds at most ``in_flight`` unacked — JetStream's MaxAckPending, Redis's client
    bound — with handler times exponential of mean ``mean_work``."""

    name: str = "poisson"
    rate: float = 10.0
    messages: int = 160
    consumers: int = 2
    in_flight: int = 2
    mean_work: float = 0.15
    lease: float = 30.0
    seed: int = 0

    def offsets(self) -> list[float]:
        rng = random.Random(f"fanoutsim:realbrokers:load:{self.seed}")
        return list(itertools.accumulate(rng.expovariate(self.rate) for _ in range(self.messages)))

    def names(self) -> list[str]:
        return numbered(self.consumers)

    def work(self) -> dict:
        return exponential(self.mean_work)

    def real(self, admin: Admin) -> BrokerRun:
        run = Run(admin, self, [ConsumerSpec(c, self.lease, self.in_flight) for c in self.names()])
        jet = admin.broker == "nats-jetstream"
        # JetStream bounds what is in flight on the server; a Redis client bounds it itself
        slots = 2 * self.in_flight if jet else self.in_flight
        work = self.work()

        def body(run: Run) -> None:
            procs = run.start([run.job([c], "worker", slots=slots, work=work) for c in self.names()])
            for p in procs:
                p.go()
            start = time.monotonic() + 0.2
            for n, at in enumerate(self.offsets(), 1):
                delay = start + at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                run.publish(n)
            run.settle()

        return running(run, body)


@dataclass(frozen=True)
class CostCase:
    """The costs the presets draw (:mod:`.costs`): ``messages`` published one at a time
    to one idle consumer, each after the one before was acked and a gap drawn from
    [``gap_low``, ``gap_high``] s has passed (so that the consumer waits in its pull):
    publish -> delivered, and the ack's round trip."""

    name: str = "costs"
    messages: int = 200
    gap_low: float = 0.01
    gap_high: float = 0.03
    seed: int = 0

    def real(self, admin: Admin) -> BrokerRun:
        run = Run(admin, self, [ConsumerSpec("c", 30.0, 1)])
        rng = random.Random(f"fanoutsim:realbrokers:costs:{self.seed}")

        def body(run: Run) -> None:
            (proc,) = run.start([run.job(["c"], "worker", slots=1, work={"law": "fixed", "seconds": 0.0})])
            proc.go()
            time.sleep(0.2)  # its first pull waiting
            for n in range(1, self.messages + 1):
                run.publish(n)
                proc.wait_for(lambda events, n=n: any(e[0] == "acked" and e[2] == n for e in events), f"the ack of {n}")
                time.sleep(rng.uniform(self.gap_low, self.gap_high))
            run.settle()

        return running(run, body)

    @staticmethod
    def costs(run: BrokerRun) -> dict[str, list[float]]:
        """Per message: publish -> delivered, and the ack's round trip (seconds)."""
        at = run.published_at()
        first = {e[3]: e[5] for e in reversed(run.of("delivered")) if e[4] == 1}
        return {
            "publish_to_delivered_s": [first[n] - at[n] for n in sorted(first)],
            "ack_round_trip_s": [e[6] - e[5] for e in run.of("acked")],
        }


CASES = {
    c.name: c
    for c in (
        CostCase(),
        FloorCase(),
        FloorCase(name="floor_interest", retention="interest"),
        PoisonCase(),
        KillCase(),
        LeaseCase(),
        PoissonCase(),
    )
}
