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
        """Hand the row to every live subscriber of its topic; how many got it."""
        n, topic = 0, row["topic"]
        for cb in list(self.subscribers.get(topic, ()) if topic is not None else ()):  # no topic: no listener
            try:
                cb(row)
                n += 1
            except Exception:  # a broken socket must not stop the feed
                pass
        self.published += 1
        return n
