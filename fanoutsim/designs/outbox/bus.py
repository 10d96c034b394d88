"""The topic bus: each row's topic, published to whoever is listening now.

This is the WebSocket half of the fan-out (open pages update live). It is
best-effort and not durable by design: a subscriber that is not connected when
a row is published never hears of it and re-fetches when it reconnects. So the
bus keeps no cursor in the tables — only an in-memory position that starts at
the end of the log when a dispatcher process starts, and its subscribers die
with the process.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.tables.port import OutboxRow

# a live subscriber: handed each row of its topic as it is published
Subscriber = Callable[["OutboxRow"], None]


class TopicBus:
    def __init__(self) -> None:
        self.subscribers: dict[str, list[Subscriber]] = defaultdict(list)
        self.position: int | None = None  # last seq published; None until the first wake-up
        self.published = 0

    def subscribe(self, topic: str, callback: Subscriber) -> None:
        self.subscribers[topic].append(callback)

    def unsubscribe(self, topic: str, callback: Subscriber) -> None:
        if callback in self.subscribers.get(topic, ()):
            self.subscribers[topic].remove(callback)

    def publish(self, row: OutboxRow) -> int:
        """Hand the row to every live subscriber of its topic (each its own copy:
        the store's rows are read, never changed); how many got it."""
        self.published += 1
        topic = row["topic"]
        listeners = self.subscribers.get(topic) if self.subscribers and topic is not None else None
        if not listeners:  # no topic: no listener
            return 0
        n = 0
        for cb in list(listeners):
            try:
                cb(row.copy())
                n += 1
            except Exception:  # a broken socket must not stop the feed
                pass
        return n
