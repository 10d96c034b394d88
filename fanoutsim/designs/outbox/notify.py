"""The notification channel: a best-effort hint that something committed.

It models Postgres ``LISTEN/NOTIFY`` as the seed describes it: the payload is
only the seq, never the change, so a hint that is dropped, coalesced or late
costs latency, never data — the durable ``outbox`` table and the cursors are
the truth, and the dispatcher's periodic safety poll reads them anyway.

What the :class:`~fanoutsim.designs.faults.Notifications` fault spec does here:

``drop``      each hint is lost with this probability;
``coalesce``  identical payloads sent in one transaction arrive once;
``delay``     each hint arrives after a drawn delay (a distribution);
``silent``    windows of virtual time in which the listener is disconnected.

And, for tests and comparisons, a rule of one's own (:meth:`NotificationChannel.lose_hints`):
the seqs whose hint is lost, named one by one or by a predicate, so a run can
lose exactly the hints another run (a real worker's, say) lost — no seeded
draw to steer. It composes with ``drop``: the draw is still made for every hint,
so the rule changes nothing about which other hints ``drop`` takes.

And, whatever the plan: every hint sent while the listener is disconnected —
a silent window, or the dispatcher process being down — is lost, as NOTIFY
does not queue for a listener that is not there.

The listener's connection (:class:`ListenerPool`, see
:mod:`.config`): reserved, it always has one; unreserved, it needs a free
connection of the pool when a hint arrives. While a
:class:`~fanoutsim.designs.outbox.faults.Backfill` holds every connection, the hint
waits until one comes free (the backfill's window ends) if that is at most
``listener_wait`` seconds away, else it is lost (``hint_missed``, detail
``no free connection``).

The channel is sans-IO too: :meth:`send` returns ``(delay, payload)`` pairs
and the runtime delivers each after its delay, asking
:meth:`~NotificationChannel.connection_wait` (0: go on; seconds: deliver it
again then; None: lost, already counted) and then :meth:`listening` at
delivery time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from fanoutsim.designs.faults import Notifications
from fanoutsim.designs.outbox.faults import Backfill
from fanoutsim.kernel.timeutil import US

if TYPE_CHECKING:
    from fanoutsim.designs.outbox.config import OutboxConfig
    from fanoutsim.kernel.faults.plan import FaultPlan
    from fanoutsim.kernel.trace import Trace


def _window(b: Backfill) -> tuple[float, float]:
    """A backfill's window, in virtual seconds (its check refuses none)."""
    return cast(tuple[float, float], b.window)


class ListenerPool:
    """The database pool as the listener sees it: ``size`` connections,
    ``reserved`` (one set aside for LISTEN) or not, and the backfills holding
    connections in their windows (virtual seconds since ``start_us``)."""

    def __init__(
        self, size: int = 10, reserved: bool = True, backfills: Iterable[object] = (), wait: float = 1.0
    ) -> None:
        self.size, self.reserved, self.wait = size, reserved, wait
        self.backfills = tuple(b for b in backfills if isinstance(b, Backfill))

    def shared(self) -> int:
        """Connections the pool shares (all but the reserved one)."""
        return self.size - (1 if self.reserved else 0)

    def held(self, t: float) -> int:
        """Shared connections the backfills hold at ``t`` (s)."""
        n = sum(
            self.shared() if b.connections is None else b.connections
            for b in self.backfills
            if _window(b)[0] <= t < _window(b)[1]
        )
        return min(n, self.shared())

    def free_in(self, t: float) -> float:
        """Seconds from ``t`` until the listener has a connection (0: now)."""
        if self.reserved or self.held(t) < self.shared():
            return 0.0
        ends = [w[1] for w in map(_window, self.backfills) if w[0] <= t < w[1]]
        return max(ends) - t  # every holder is done by then (a later one may start: asked again)


def listener_pool(config: OutboxConfig, plan: FaultPlan | None) -> ListenerPool:
    """The pool of a run: ``config``'s size, reservation and wait, ``plan``'s backfills."""
    return ListenerPool(
        config.pool_size, config.reserve_listener, plan.of(Backfill) if plan else (), config.listener_wait
    )


class NotificationChannel:
    def __init__(
        self,
        spec: Notifications | None = None,
        *,
        rng: random.Random | None = None,
        start_us: int = 0,
        trace: Trace | None = None,
        pool: ListenerPool | None = None,
    ) -> None:
        self.spec = spec or Notifications()
        self.pool = pool or ListenerPool()
        self.rng = rng or random.Random(0)
        self.start_us = start_us
        self.trace = trace
        self.connected = True  # the listener's connection (down with the dispatcher process)
        self.sent = self.dropped = self.coalesced = self.missed = self.delivered = 0
        self._lost: Callable[[int], bool] | None = None

    def lose_hints(self, which: Iterable[int] | Callable[[int], bool] | None) -> None:
        """From now on, lose the hint of every seq in ``which`` (seqs), or for which
        ``which(seq)`` is true; None: lose none this way. Such a hint is counted as
        dropped and traced ``hint_dropped`` (detail ``lose_hints``)."""
        if which is None or callable(which):
            self._lost = which
            return
        if isinstance(which, (str, bytes)):
            raise TypeError(f"lose_hints takes seqs (ints) or a predicate of a seq, got {which!r}")
        seqs = frozenset(which)
        bad = [s for s in seqs if isinstance(s, bool) or not isinstance(s, int) or s < 1]
        if bad:
            raise ValueError(f"lose_hints: a seq is an int >= 1, got {sorted(map(repr, bad))[0]}")
        self._lost = seqs.__contains__

    def _silent(self, now: int) -> bool:
        silent = self.spec.silent
        if not silent:  # the usual case, asked at every hint
            return False
        t = (now - self.start_us) / US
        return any(w[0] <= t < w[1] for w in silent)

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
            drawn = spec.drop > 0 and self.rng.random() < spec.drop
            ruled = not drawn and self._lost is not None and bool(self._lost(int(p)))
            if drawn or ruled:
                self.dropped += 1
                if self.trace is not None:
                    self.trace.add(now, "hint_dropped", "notify", what=p, detail="lose_hints" if ruled else None)
                continue
            out.append((spec.delay.sample(self.rng), p))
        return out

    def connection_wait(self, now: int, payload: str, waited: float = 0.0) -> float | None:
        """Can the listener take a hint now (``waited``: seconds it already
        waited for a connection)? 0: yes; seconds: deliver it again after so
        long (traced ``hint_waiting``); None: no connection in time — the hint
        is lost, counted as missed and traced."""
        if self.pool.reserved:  # the hot path: the seed's design never waits
            return 0.0
        w = self.pool.free_in((now - self.start_us) / US)
        if w <= 0:
            return 0.0
        if waited + w <= self.pool.wait:
            if self.trace is not None:
                self.trace.add(now, "hint_waiting", "notify", what=payload, detail=f"{w:g}s")
            return w
        self.missed += 1
        if self.trace is not None:
            self.trace.add(now, "hint_missed", "notify", what=payload, detail="no free connection")
        return None

    def arrive(self, now: int, payload: str) -> bool:
        """A hint reaches the listener now: True if someone was listening."""
        if not self.listening(now):
            self.missed += 1
            if self.trace is not None:
                self.trace.add(now, "hint_missed", "notify", what=payload)
            return False
        self.delivered += 1
        return True
