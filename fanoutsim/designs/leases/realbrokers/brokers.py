"""What the harness does on a broker itself: make a stream and its consumers,
publish, read a consumer's ack floor and what it still owes, and what the
broker did at a delivery limit — one interface, :class:`Admin`, for both brokers.

A message is known by its number ``n`` (1, 2, ... in publication order, the
payload ``{"n": n, "poison": ...}``), so that both brokers and the model speak
of the same message; each admin keeps the broker's own id of each (a
JetStream stream sequence, a Redis entry id).

==================  ================================  ====================================
                    :class:`JetStreamAdmin`            :class:`RedisAdmin`
==================  ================================  ====================================
a consumer          a durable pull consumer, explicit  a consumer group (its members are
                    ack, ``AckWait`` = the lease,      the consumer processes); the lease
                    ``MaxAckPending``, ``MaxDeliver``,  is the idle time a claim asks for
                    ``BackOff``
the stream          ``LimitsPolicy`` (the default), or entries stay until trimmed
                    ``InterestPolicy``: a message is
                    removed once every consumer acked
the ack floor       ``consumer_info().ack_floor``       what the pending list implies: the
                                                       message before the oldest pending
                                                       one (or the last delivered)
at the limit        the ``MAX_DELIVERIES`` advisory    the client's dead-letter stream
                    (its time: the server's stamp)     (its time: the entry id's)
==================  ================================  ====================================

:class:`JetStreamAdmin` is nats-py's asyncio client on a loop thread of its own,
so that the harness calls it as it calls Redis's: plain functions.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

CALL_TIMEOUT = 60.0  # seconds one admin call may take (a loaded machine is slow, never this slow)


@dataclass(frozen=True)
class ConsumerSpec:
    """One consumer of a stream, as the broker is told of it."""

    name: str
    lease: float  # seconds: JetStream's AckWait, or the idle time a Redis claim asks for
    in_flight: int = 1000  # JetStream's MaxAckPending (Redis: the client's own bound)
    max_deliver: int = -1  # JetStream's MaxDeliver; Redis: the client's dead-letter limit (-1: none)
    backoff: tuple[float, ...] = ()  # JetStream's BackOff (its first entry is the ack wait)


class Admin(Protocol):
    broker: str
    version: str
    endpoint: str

    def create(self, stream: str, consumers: list[ConsumerSpec], retention: str = "limits") -> None: ...
    def publish(self, stream: str, n: int, poison: bool = False) -> float: ...
    def floor(self, stream: str, consumer: str) -> int: ...
    def unacked(self, stream: str, consumer: str) -> int: ...
    def at_limit(self, stream: str, consumer: str) -> list[tuple[int, int, float]]: ...
    def retained(self, stream: str) -> int: ...
    def pull(self, stream: str, consumer: str, count: int) -> list[tuple[Any, int, int]]: ...
    def ack(self, stream: str, consumer: str, handle: Any) -> None: ...
    def close(self) -> None: ...


def dead_letters(stream: str, consumer: str) -> str:
    """The Redis stream a consumer group's clients move their dead letters to."""
    return f"{stream}:{consumer}:dead"


def server_time(stamp: str | None) -> float:
    """An advisory's RFC 3339 timestamp (nanoseconds, ``Z``) as ``time.time()`` seconds: the
    server's clock when it sent it (None: now, as heard)."""
    if not stamp:
        return time.time()
    whole, _, frac = stamp.rstrip("Z").partition(".")
    at = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC).timestamp()
    return at + float(f"0.{frac or 0}")


def payload(n: int, poison: bool) -> dict:
    return {"n": n, "poison": bool(poison)}


class JetStreamAdmin:
    """A nats-server -js, from the harness: streams with interest retention, durable pull consumers."""

    broker = "nats-jetstream"

    def __init__(self, endpoint: str, version: str) -> None:
        self.endpoint, self.version = endpoint, version
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="jetstream-admin")
        self._thread.start()
        self._seq: dict[str, dict[int, int]] = {}  # stream -> stream sequence -> n
        self._advisories: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
        self._subs: dict[tuple[str, str], Any] = {}
        self._call(self._connect())

    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(CALL_TIMEOUT)

    async def _connect(self) -> None:
        import nats

        self.nc = await nats.connect(self.endpoint, allow_reconnect=False)
        self.js = self.nc.jetstream()

    def create(self, stream: str, consumers: list[ConsumerSpec], retention: str = "limits") -> None:
        """A stream (``retention``: ``"limits"``, the server's default, or ``"interest"``:
        a message is removed once every consumer acked it) and its durable consumers."""
        self._call(self._create(stream, consumers, retention))

    async def _create(self, stream: str, consumers: list[ConsumerSpec], retention: str) -> None:
        from nats.js import api

        policy = {"limits": api.RetentionPolicy.LIMITS, "interest": api.RetentionPolicy.INTEREST}[retention]
        await self.js.add_stream(name=stream, subjects=[f"{stream}.m"], retention=policy)
        self._seq[stream] = {}
        for c in consumers:
            heard: list[tuple[int, int, float]] = []
            self._advisories[(stream, c.name)] = heard
            subject = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{c.name}"
            self._subs[(stream, c.name)] = await self.nc.subscribe(subject, cb=self._advisory(stream, heard))
            await self.js.add_consumer(
                stream,
                api.ConsumerConfig(
                    durable_name=c.name,
                    ack_policy=api.AckPolicy.EXPLICIT,
                    ack_wait=c.backoff[0] if c.backoff else c.lease,
                    max_ack_pending=c.in_flight,
                    max_deliver=c.max_deliver,
                    backoff=list(c.backoff) or None,
                ),
            )

    def _advisory(self, stream: str, heard: list):
        async def on(msg) -> None:
            body = json.loads(msg.data)
            n = self._seq[stream].get(body["stream_seq"], 0)
            heard.append((n, int(body["deliveries"]), server_time(body.get("timestamp"))))

        return on

    def publish(self, stream: str, n: int, poison: bool = False) -> float:
        """Publish message ``n``; returns ``time.time()`` before the publish call."""
        return self._call(self._publish(stream, n, poison))

    async def _publish(self, stream: str, n: int, poison: bool) -> float:
        at = time.time()
        ack = await self.js.publish(f"{stream}.m", json.dumps(payload(n, poison)).encode())
        self._seq[stream][ack.seq] = n
        return at

    def _info(self, stream: str, consumer: str):
        return self._call(self.js.consumer_info(stream, consumer))

    def floor(self, stream: str, consumer: str) -> int:
        """The last message of the contiguous acknowledged prefix (0: none)."""
        seq = self._info(stream, consumer).ack_floor.stream_seq
        return self._seq[stream].get(seq, 0)

    def unacked(self, stream: str, consumer: str) -> int:
        """Messages the consumer still owes an ack: pending acks, and those not delivered yet."""
        info = self._info(stream, consumer)
        return int(info.num_ack_pending or 0) + int(info.num_pending or 0)

    def at_limit(self, stream: str, consumer: str) -> list[tuple[int, int, float]]:
        """The ``MAX_DELIVERIES`` advisories heard: (n, deliveries, when)."""
        return list(self._advisories.get((stream, consumer), []))

    def retained(self, stream: str) -> int:
        return int(self._call(self.js.stream_info(stream)).state.messages)

    def pull(self, stream: str, consumer: str, count: int) -> list[tuple[Any, int, int]]:
        """Up to ``count`` messages for the harness itself: (message, n, deliveries)."""
        return self._call(self._pull(stream, consumer, count))

    async def _pull(self, stream: str, consumer: str, count: int) -> list[tuple[Any, int, int]]:
        key = ("pull", stream, consumer)
        if key not in self._subs:
            self._subs[key] = await self.js.pull_subscribe_bind(durable=consumer, stream=stream)
        msgs = await self._subs[key].fetch(count, timeout=10.0)
        return [(m, json.loads(m.data)["n"], m.metadata.num_delivered) for m in msgs]

    def ack(self, stream: str, consumer: str, handle: Any) -> None:
        self._call(handle.ack_sync(timeout=30.0))

    def close(self) -> None:
        try:
            self._call(self.nc.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)


class RedisAdmin:
    """A Redis server, from the harness: a stream per run, a consumer group per consumer."""

    broker = "redis-streams"

    def __init__(self, endpoint: str, version: str) -> None:
        import redis

        self.endpoint, self.version = endpoint, version
        self.r = redis.Redis(unix_socket_path=endpoint)
        self._n: dict[str, dict[bytes, int]] = {}  # stream -> entry id -> n

    def create(self, stream: str, consumers: list[ConsumerSpec], retention: str = "limits") -> None:
        """A stream and a consumer group per consumer (entries stay until trimmed: a Redis
        stream has no ``retention`` but limits)."""
        if retention != "limits":
            raise ValueError(
                f"a Redis stream keeps its entries until trimmed: retention must be 'limits', got {retention!r}"
            )
        self._n[stream] = {}
        for c in consumers:
            self.r.xgroup_create(stream, c.name, id="0", mkstream=True)

    def publish(self, stream: str, n: int, poison: bool = False) -> float:
        at = time.time()
        eid = self.r.xadd(stream, {"n": n, "poison": int(poison)})
        self._n[stream][eid] = n
        return at

    def _state(self, stream: str, consumer: str) -> tuple[dict, int]:
        """The group's pending summary and the message its last delivery stands on, read in
        one MULTI/EXEC: read apart, a delivery between the two reads (none pending, then 4
        delivered) showed a consumer that owed nothing before it had handled anything."""
        pipe = self.r.pipeline(transaction=True)
        pipe.xpending(stream, consumer)
        pipe.xinfo_groups(stream)
        summary, groups = pipe.execute()
        last = {g["name"].decode(): g for g in groups}[consumer]["last-delivered-id"]
        return summary, self._n[stream].get(last, 0)

    def floor(self, stream: str, consumer: str) -> int:
        """The message before the oldest pending one; with none pending, the last delivered."""
        summary, delivered = self._state(stream, consumer)
        if not summary["pending"]:
            return delivered
        return min(self._n[stream][summary["min"]] - 1, delivered)

    def unacked(self, stream: str, consumer: str) -> int:
        summary, delivered = self._state(stream, consumer)
        return int(summary["pending"]) + len(self._n[stream]) - delivered

    def at_limit(self, stream: str, consumer: str) -> list[tuple[int, int, float]]:
        """The consumer's dead letters: (n, deliveries, when: the entry id's ms)."""
        out = []
        for eid, fields in self.r.xrange(dead_letters(stream, consumer)):
            out.append((int(fields[b"n"]), int(fields[b"deliveries"]), int(eid.split(b"-")[0]) / 1000))
        return out

    def retained(self, stream: str) -> int:
        return int(self.r.xlen(stream))

    def pull(self, stream: str, consumer: str, count: int) -> list[tuple[Any, int, int]]:
        got = self.r.xreadgroup(consumer, "harness", {stream: ">"}, count=count, block=10_000)
        return [(eid, int(f[b"n"]), 1) for _, entries in got or () for eid, f in entries]

    def ack(self, stream: str, consumer: str, handle: Any) -> None:
        self.r.xack(stream, consumer, handle)

    def close(self) -> None:
        self.r.close()


ADMINS = {"nats-jetstream": JetStreamAdmin, "redis-streams": RedisAdmin}


def admin(server) -> Admin:
    """The admin of a started server (:mod:`.servers`)."""
    out: Admin = ADMINS[server.broker](server.endpoint, server.version)
    return out
