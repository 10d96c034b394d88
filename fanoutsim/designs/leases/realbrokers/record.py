"""What one real run recorded, message by message, and what the comparison reads of it.

A :class:`BrokerRun` holds, in seconds after the run's start (``time.time()``,
one clock for the harness, the broker and every consumer process):

``published``  ``[n, t, poison]``: when the harness called publish for message ``n``;
``events``     ``[kind, consumer, process, n, deliveries, t, t_done]``, as the
               consumer processes said them (:mod:`.client_process`): a
               delivery, an effect, an ack (sent at ``t``, answered at
               ``t_done``), a failure, a dead letter, a held effect;
``floors``     ``[step, consumer, floor]``: a consumer's ack floor (the last
               message of its acknowledged prefix) read after a step;
``limits``     ``[consumer, n, deliveries, t]``: what the broker did at the
               delivery limit (JetStream's ``MAX_DELIVERIES`` advisory; the Redis
               client's dead letter);
``killed``     ``[consumer, process, t]``: the processes killed with SIGKILL.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

EVENT = ("kind", "consumer", "process", "n", "deliveries", "t", "t_done")


@dataclass
class BrokerRun:
    broker: str  # "nats-jetstream" | "redis-streams"
    version: str  # the server's release
    case: str  # the case's name (:mod:`.cases`)
    settings: dict  # the case's settings, as run
    published: list[list] = field(default_factory=list)
    events: list[list] = field(default_factory=list)
    floors: list[list] = field(default_factory=list)
    limits: list[list] = field(default_factory=list)
    killed: list[list] = field(default_factory=list)
    retained: int = 0  # messages still in the stream at the end
    wall_seconds: float = 0.0

    def of(self, *kinds: str, consumer: str | None = None, process: str | None = None) -> list[list]:
        """The events of these kinds (of one consumer, one process), in the order said."""
        return [
            e
            for e in self.events
            if e[0] in kinds and (consumer is None or e[1] == consumer) and (process is None or e[2] == process)
        ]

    def consumers(self) -> list[str]:
        return sorted({e[1] for e in self.events})

    def effects(self, consumer: str | None = None) -> Counter:
        """How many times each (consumer, n)'s effect was applied."""
        return Counter((e[1], e[3]) for e in self.of("effect", consumer=consumer))

    def duplicates(self, consumer: str | None = None) -> int:
        """Effects applied more than once: each extra one counts."""
        return sum(k - 1 for k in self.effects(consumer).values() if k > 1)

    def handled(self, consumer: str | None = None) -> int:
        """Messages whose effect was applied at least once (per consumer)."""
        return len(self.effects(consumer))

    def published_at(self) -> dict[int, float]:
        return {int(n): float(t) for n, t, _ in self.published}

    def handled_latencies(self, consumer: str | None = None) -> np.ndarray:
        """Publish -> the first effect, seconds, per (consumer, message), in message order."""
        first: dict[tuple[str, int], float] = {}
        for e in self.of("effect", consumer=consumer):
            first.setdefault((e[1], e[3]), e[5])
        at = self.published_at()
        return np.asarray([t - at[n] for (_, n), t in sorted(first.items(), key=lambda kv: (kv[0][1], kv[0][0]))])

    def deliveries(self, consumer: str, n: int) -> list[tuple[int, float]]:
        """Message ``n``'s deliveries to ``consumer``: (delivery count, when), in time order."""
        return sorted((e[4], e[5]) for e in self.of("delivered", consumer=consumer) if e[3] == n)

    def redelivery_delays(self, consumer: str | None = None) -> np.ndarray:
        """For each redelivery (a delivery count > 1): seconds since the delivery before it."""
        out = []
        for c in [consumer] if consumer is not None else self.consumers():
            for n in sorted({e[3] for e in self.of("delivered", consumer=c)}):
                got = dict(self.deliveries(c, n))
                out += [got[d] - got[d - 1] for d in sorted(got) if d > 1 and d - 1 in got]
        return np.asarray(out, dtype=float)

    def handler_lateness(self, work: dict, seed: int) -> np.ndarray:
        """Per handled delivery: delivered -> its effect, less the handler time it drew
        (:func:`.client_process.work_seconds`, the same draw): what the consumer
        process's event loop added to the handler — its wake-up after the sleep, its
        turn among the other tasks (seconds, at least 0)."""
        from fanoutsim.designs.leases.realbrokers.client_process import work_seconds

        got = {(e[1], e[2], e[3], e[4]): e[5] for e in self.of("delivered")}
        out = []
        for e in self.of("effect"):
            start = got.get((e[1], e[2], e[3], e[4]))
            if start is not None:
                out.append(max(0.0, e[5] - start - work_seconds(work, seed, e[1], e[3], e[4])))
        return np.asarray(out, dtype=float)

    def most_in_flight(self, consumer: str) -> int:
        """The most of the consumer's messages delivered and not yet acked (or failed) at once."""
        changes = [(e[5], 1) for e in self.of("delivered", consumer=consumer)]
        changes += [(e[6], -1) for e in self.of("acked", consumer=consumer)]  # when the ack was answered
        changes += [(e[5], -1) for e in self.of("failed", consumer=consumer)]
        most = now = 0
        for _, step in sorted(changes, key=lambda c: (c[0], c[1])):  # an end before a start at one time
            now += step
            most = max(most, now)
        return most

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> BrokerRun:
        return cls(**d)
