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


class TopicBus:
    def __init__(self) -> None:
        self.subscribers: dict[str, list[Callable[[dict], None]]] = defaultdict(list)
        self.position: int | None = None  # last seq published; None until the first wake-up
        self.published = 0

    def subscribe(self, topic: str, callback: Callable[[dict], None]) -> None:
        self.subscribers[topic].append(callback)

    def unsubscribe(self, topic: str, callback: Callable[[dict], None]) -> None:
        if callback in self.subscribers.get(topic, ()):
            self.subscribers[topic].remove(callback)

    def publish(self, row: dict) -> int:
        """Hand the row to every live subscriber of its topic; how many got it."""
        n = 0
        for cb in list(self.subscribers.get(row["topic"], ())):
            try:
                cb(row)
                n += 1
            except Exception:  # a broken socket must not stop the feed
                pass
        self.published += 1
        return n
