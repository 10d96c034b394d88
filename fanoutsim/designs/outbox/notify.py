"""The notification channel: a best-effort hint that something committed.

It models Postgres ``LISTEN/NOTIFY`` as the seed describes it: the payload is
only the seq, never the change, so a hint that is dropped, coalesced or late
costs latency, never data — the durable ``outbox`` table and the cursors are
the truth, and the dispatcher's periodic safety poll reads them anyway.

What the :class:`~fanoutsim.kernel.faults.Notifications` fault spec does here:

``drop``      each hint is lost with this probability;
``coalesce``  identical payloads sent in one transaction arrive once;
``delay``     each hint arrives after a drawn delay (a distribution);
``silent``    windows of virtual time in which the listener is disconnected.

And, whatever the plan: every hint sent while the listener is disconnected —
a silent window, or the dispatcher process being down — is lost, as NOTIFY
does not queue for a listener that is not there.

The channel is sans-IO too: :meth:`send` returns ``(delay, payload)`` pairs
and the runtime delivers each after its delay, asking :meth:`listening` at
delivery time.
"""
from __future__ import annotations

import random

from fanoutsim.kernel.faults import Notifications
from fanoutsim.kernel.timeutil import US


class NotificationChannel:
    def __init__(self, spec: Notifications | None = None, *, rng: random.Random | None = None,
                 start_us: int = 0, trace=None) -> None:
        self.spec = spec or Notifications()
        self.rng = rng or random.Random(0)
        self.start_us = start_us
        self.trace = trace
        self.connected = True  # the listener's connection (down with the dispatcher process)
        self.sent = self.dropped = self.coalesced = self.missed = self.delivered = 0

    def _silent(self, now: int) -> bool:
        t = (now - self.start_us) / US
        return any(w[0] <= t < w[1] for w in self.spec.silent)

    def listening(self, now: int) -> bool:
        return self.connected and not self._silent(now)

    def send(self, now: int, payloads: list[str]) -> list[tuple[float, str]]:
        """One transaction's hints; which of them travel, and after what delay."""
        spec = self.spec
        if spec.coalesce:
            unique = list(dict.fromkeys(payloads))
            self.coalesced += len(payloads) - len(unique)
            payloads = unique
        out = []
        for p in payloads:
            self.sent += 1
            if spec.drop > 0 and self.rng.random() < spec.drop:
                self.dropped += 1
                if self.trace is not None:
                    self.trace.add(now, "hint_dropped", "notify", firing=p)
                continue
            out.append((spec.delay.sample(self.rng), p))
        return out

    def arrive(self, now: int, payload: str) -> bool:
        """A hint reaches the listener now: True if someone was listening."""
        if not self.listening(now):
            self.missed += 1
            if self.trace is not None:
                self.trace.add(now, "hint_missed", "notify", firing=payload)
            return False
        self.delivered += 1
        return True
