"""A consumer process of a real broker: an application's worker, and nothing of fanoutsim.

Run by path (``python -P client_process.py``), so that it imports neither
fanoutsim nor anything beside this file: only the standard library and the
broker's client (nats-py for a JetStream durable pull consumer, redis-py's
asyncio client for a Redis Streams consumer group). It reads one JSON line from
stdin (the job: see :data:`JOB_KEYS`), connects, writes ``["ready"]``, and
consumes — each consumer from its ``go CONSUMER`` line on (``go``: all of them)
— until it reads ``stop``, or is killed.

Its loop is the usual worker's: a pull of up to ``min(batch, free slots)``
messages, waiting up to ``wait`` seconds for one, and a handler task per
message. A handler works for a time drawn from ``work`` (seeded by the message
and its delivery count, so a rerun draws the same), then applies its effect and
acks — JetStream's ``ack_sync`` (the ack's reply awaited), Redis's ``XACK``. A
poison message (payload ``poison``) fails instead: it is nak'd with
``poison_delay`` (JetStream), or left in the group's pending list (Redis has no
negative acknowledgement: a claim takes it once it is idle). With
``hold_after`` n, the handler whose effect is the n-th writes ``held`` and
stops the whole process (SIGSTOP: every handler freezes where it is) before
its ack: the parent kills it there, between an effect and its ack.

A Redis consumer claims before each read (``claim``: the idle time that is the
lease, the ``max_deliver`` limit and the stream dead letters go to): it takes
the group's entries idle for at least the lease (``XAUTOCLAIM``, which counts a
delivery), reads each one's delivery count (``XPENDING``), and moves those past
``max_deliver`` to the dead-letter stream (``XADD`` then ``XACK``) instead of
handling them — what the Redis documentation suggests in place of a broker's
dead letters. A blocking read for new entries (``XREADGROUP ... BLOCK``) is not
woken by an entry coming due for a claim, so the consumer blocks no longer
than until the next one does (the group's pending list tells each entry's idle
time): it claims an entry as soon as it may.

A process may serve several consumers (``consumers``: the durable consumers, or
the groups it is a member of), each with a pull loop and ``slots`` handlers of
its own. Each event is one JSON line on stdout, its time ``time.time()`` (one
clock on the machine): ``["delivered", consumer, n, deliveries, t]`` (the pull
returned it), ``["effect", ...]``, ``["acked", consumer, n, deliveries, t_sent,
t_done]``, ``["failed", ...]``, ``["dead_lettered", ...]``, ``["held", ...]``;
``["ready"]``; a failure ``["error", "..."]``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import sys
import threading
import time
import traceback

JOB_KEYS = (
    "broker",  # "nats-jetstream" or "redis-streams"
    "endpoint",  # nats://host:port, or the Redis server's Unix socket
    "stream",  # the stream (JetStream) or the stream's key (Redis)
    "consumers",  # durable consumers (JetStream) or consumer groups (Redis): a pull loop for each
    "name",  # this process's name (Redis: its consumer in each group; JetStream: for its events)
    "slots",  # handlers at once, per consumer
    "batch",  # messages one pull takes at most
    "wait",  # seconds a pull waits for a message
    "work",  # the handler's time: {"law": "fixed", "seconds"} | lognormal {median, sigma} | exponential {mean}
    "seed",  # what the handler times are drawn from
    "poison_delay",  # JetStream: a poison message's nak delay (seconds; 0: none)
    "hold_after",  # None, or n: a consumer's n-th effect is held before its ack (the parent kills the process)
    "claim",  # Redis: {"idle": seconds, "max_deliver": n or -1, "dead": {group: stream}}; None: no claims
)


PENDING_SCAN = 10_000  # pending entries a Redis consumer reads to know when the next comes due


def say(*event) -> None:
    sys.stdout.write(json.dumps(list(event)) + "\n")
    sys.stdout.flush()


def work_seconds(work: dict, seed: int, consumer: str, n: int, delivery: int) -> float:
    """The handler's time for delivery ``delivery`` of message ``n``: the same on every rerun."""
    rng = random.Random(f"fanoutsim:realbrokers:work:{seed}:{consumer}:{n}:{delivery}")
    law = work["law"]
    if law == "fixed":
        return float(work["seconds"])
    if law == "lognormal":
        return float(work["median"]) * math.exp(float(work["sigma"]) * rng.gauss(0.0, 1.0))
    if law == "exponential":
        return rng.expovariate(1.0 / float(work["mean"]))
    raise ValueError(f"work law must be fixed, lognormal or exponential, got {law!r}")


class JetStream:
    """A durable pull consumer's subscription, bound to the consumer the parent made."""

    def __init__(self, job: dict, consumer: str) -> None:
        self.job, self.consumer = job, consumer

    async def open(self) -> None:
        import nats

        self.nc = await nats.connect(self.job["endpoint"], allow_reconnect=False, max_reconnect_attempts=0)
        js = self.nc.jetstream()
        self.sub = await js.pull_subscribe_bind(durable=self.consumer, stream=self.job["stream"])

    async def pull(self, count: int) -> list[tuple]:
        """Up to ``count`` messages: ``(message, n, deliveries, poison)``."""
        try:
            msgs = await self.sub.fetch(count, timeout=self.job["wait"])
        except TimeoutError:
            return []
        out = []
        for m in msgs:
            body = json.loads(m.data)
            out.append((m, body["n"], m.metadata.num_delivered, bool(body.get("poison"))))
        return out

    async def ack(self, m) -> None:
        await m.ack_sync(timeout=30.0)

    async def fail(self, m) -> None:
        delay = self.job.get("poison_delay") or None
        await m.nak(delay=delay)

    async def close(self) -> None:
        await self.nc.close()


class RedisStreams:
    """One consumer of a Redis consumer group: claims (when asked to), then reads new entries."""

    def __init__(self, job: dict, consumer: str) -> None:
        self.job = job
        self.key, self.group, self.name = job["stream"], consumer, job["name"]
        self.look_at = 0.0  # time.time() from which a claim may find something (the pending list said)

    async def open(self) -> None:
        import redis.asyncio as aioredis

        self.r = aioredis.Redis(unix_socket_path=self.job["endpoint"])
        await self.r.ping()

    async def pull(self, count: int) -> list[tuple]:
        """Claim what is due, then read new entries: blocking (up to ``wait``, or until the
        next entry comes due for a claim) only when the claim found nothing. The claim and
        the pending list are read only once something may be due (or ``wait`` has passed:
        another member of the group may have taken entries since), so that a busy consumer's
        pull is one read, as it is when nothing is pending."""
        out, due = [], None
        if self.job.get("claim"):
            if time.time() >= self.look_at:
                out, due = await self._claim(count)
                self.look_at = time.time() + min(self.job["wait"], self.job["wait"] if due is None else due)
            else:
                due = self.look_at - time.time()
        if len(out) < count:
            block = None if out else max(1, int(1000 * min(self.job["wait"], self.job["wait"] if due is None else due)))
            got = await self.r.xreadgroup(self.group, self.name, {self.key: ">"}, count=count - len(out), block=block)
            for _, entries in got or ():
                out += [(eid, int(f[b"n"]), 1, f.get(b"poison") == b"1") for eid, f in entries]
        if out and self.job.get("claim"):  # what it took now comes due one lease on
            self.look_at = min(self.look_at, time.time() + self.job["claim"]["idle"])
        return out

    async def _claim(self, count: int) -> tuple[list[tuple], float | None]:
        """The group's entries idle for at least the lease, claimed (a delivery each; those
        past ``max_deliver`` go to the dead-letter stream), and the seconds until the next
        pending entry comes due (None: nothing pending)."""
        claim = self.job["claim"]
        idle_ms = int(round(claim["idle"] * 1000))
        # Redis 6.2 answers [next, entries]; 7 adds the ids deleted meanwhile
        entries = (await self.r.xautoclaim(self.key, self.group, self.name, idle_ms, "0-0", count=count))[1]
        out = []
        for eid, fields in entries:
            if fields is None:  # deleted from the stream meanwhile
                continue
            info = await self.r.xpending_range(self.key, self.group, min=eid, max=eid, count=1)
            deliveries = int(info[0]["times_delivered"]) if info else 1
            n = int(fields[b"n"])
            if 0 < claim["max_deliver"] < deliveries:
                await self.r.xadd(claim["dead"][self.group], {"n": n, "id": eid, "deliveries": deliveries - 1})
                await self.r.xack(self.key, self.group, eid)
                say("dead_lettered", self.group, n, deliveries - 1, time.time())
                continue
            out.append((eid, n, deliveries, fields.get(b"poison") == b"1"))
        pending = await self.r.xpending_range(self.key, self.group, min="-", max="+", count=PENDING_SCAN)
        due = min((idle_ms - p["time_since_delivered"] for p in pending), default=None)
        return out, None if due is None else max(due, 0) / 1000

    async def ack(self, eid) -> None:
        await self.r.xack(self.key, self.group, eid)

    async def fail(self, eid) -> None:
        return None  # no negative acknowledgement: the entry waits in the pending list for a claim

    async def close(self) -> None:
        await self.r.aclose()


class Worker:
    """The pull loop and the handlers of one consumer of the process."""

    def __init__(self, job: dict, consumer: str, broker) -> None:
        self.job, self.consumer, self.broker = job, consumer, broker
        self.running: set[asyncio.Task] = set()
        self.freed = asyncio.Event()
        self.effects = 0

    async def handle(self, m, n: int, deliveries: int, poison: bool) -> None:
        job, c = self.job, self.consumer
        await asyncio.sleep(work_seconds(job["work"], job["seed"], c, n, deliveries))
        if poison:
            say("failed", c, n, deliveries, time.time())
            await self.broker.fail(m)
            return
        say("effect", c, n, deliveries, time.time())
        self.effects += 1
        if job.get("hold_after") is not None and self.effects == job["hold_after"]:
            say("held", c, n, deliveries, time.time())
            os.kill(os.getpid(), signal.SIGSTOP)  # the whole process, at once: the parent kills it here
        sent = time.time()
        await self.broker.ack(m)
        say("acked", c, n, deliveries, sent, time.time())

    def _done(self, task: asyncio.Task) -> None:
        self.running.discard(task)
        self.freed.set()
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            say("error", f"handler: {type(exc).__name__}: {exc}")

    async def loop(self) -> None:
        slots, batch = self.job["slots"], self.job["batch"]
        while True:
            free = slots - len(self.running)
            if free <= 0:
                self.freed.clear()
                await self.freed.wait()
                continue
            got = await self.broker.pull(min(batch, free))
            for m, n, deliveries, poison in got:
                say("delivered", self.consumer, n, deliveries, time.time())
                task = asyncio.ensure_future(self.handle(m, n, deliveries, poison))
                self.running.add(task)
                task.add_done_callback(self._done)


def commands(consumers: list[str]) -> tuple[dict[str, asyncio.Future], asyncio.Future]:
    """Futures done at ``go CONSUMER`` (``go``: every consumer's) and at ``stop``
    (``stop`` too at the end of stdin: the parent has gone). Read on a daemon
    thread, which a process that ends for another reason does not wait for."""
    loop = asyncio.get_running_loop()
    go, stop = {c: loop.create_future() for c in consumers}, loop.create_future()

    def done(future: asyncio.Future) -> None:
        loop.call_soon_threadsafe(lambda: future.done() or future.set_result(None))

    def read() -> None:
        for line in sys.stdin:
            word, _, consumer = line.strip().partition(" ")
            if word == "go":
                for c in [consumer] if consumer else consumers:
                    done(go[c])
            elif word == "stop":
                break
        done(stop)

    threading.Thread(target=read, daemon=True).start()
    return go, stop


async def started(go: asyncio.Future, worker: Worker) -> None:
    """The worker's pull loop, once its consumer's ``go`` came."""
    await go
    await worker.loop()


async def run(job: dict) -> None:
    kind = JetStream if job["broker"] == "nats-jetstream" else RedisStreams
    brokers = {c: kind(job, c) for c in job["consumers"]}
    for broker in brokers.values():
        await broker.open()
    go, stop = commands(list(brokers))
    say("ready")
    workers = [Worker(job, c, b) for c, b in brokers.items()]
    loops = {asyncio.ensure_future(started(go[w.consumer], w)) for w in workers}
    done, _ = await asyncio.wait({*loops, stop}, return_when=asyncio.FIRST_COMPLETED)
    for task in (*loops, *(t for w in workers for t in w.running)):
        task.cancel()
    for task in done & loops:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()
    for broker in brokers.values():
        await broker.close()


def main() -> None:
    job = json.loads(sys.stdin.readline())
    try:
        asyncio.run(run(job))
    except Exception as exc:  # the parent raises it, with what failed here
        say("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
