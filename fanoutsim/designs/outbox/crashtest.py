"""A kill -9 campaign against the outbox dispatcher on the wall clock, for real.

A child process runs an :class:`~.realtime.OutboxRealtime` over one
DuckDB file with a steady workload and one consumer, ``sink``, whose function
appends each row's seq to a side file (flushed and fsynced) — the consumer's
effect, outside the database, as a real consumer's would be. The parent
SIGKILLs the child at random moments and starts it again each time; then one
last child, with no workload, drains the backlog and stops cleanly.

The promise under test (seed 002): "a server can crash mid-fan-out and lose
nothing". Every row in the ``outbox`` table must appear in the side file at
least once. Duplicates are allowed — the cursor moves only after the row is
handled, so a kill between the two re-delivers — but the cursor moves after
every row, so each kill re-delivers at most the one row the consumer had in
hand::

    python -m fanoutsim.designs.outbox.crashtest campaign run.duckdb 10
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from typing import IO

from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.designs.stores import open_store
from fanoutsim.kernel.runtime.crashtest import main, module_child, serve_sink, side_lines, sink_campaign

CONFIG = OutboxConfig(safety_poll_interval=0.2, batch_limit=20)
MODULE = "fanoutsim.designs.outbox.crashtest"  # the child: python -m MODULE serve ...


def serve(db: str, side: str, rate: float, *, drain: bool = False, drain_timeout: float = 60.0) -> int:
    """The child: run until SIGTERM/SIGINT (or, with ``drain``, until the sink's
    cursor has reached the last committed row); returns an exit status."""
    rt = OutboxRealtime(CONFIG, store=db)
    return serve_sink(
        rt,
        side,
        lambda fh: rt.register_consumer("sink", _sink(fh), duration=0.01),
        lambda: _drained(rt),
        rate=rate,
        drain=drain,
        drain_timeout=drain_timeout,
        workload={"pages": 20},
    )


def _sink(fh: IO[str]) -> Callable[[dict], None]:
    def sink(row: dict) -> None:
        fh.write(f"{row['seq']}\n")
        fh.flush()
        os.fsync(fh.fileno())  # the effect is durable before the cursor may move

    return sink


def _drained(rt: OutboxRealtime) -> bool:
    seqs = [r["seq"] for r in rt.store.rows("outbox")]
    cursor = {r["consumer"]: r["seq"] for r in rt.store.rows("cursors")}.get("sink", 0)
    return not seqs or cursor >= max(seqs)


def _start(db: str, side: str, rate: float, drain: bool = False) -> subprocess.Popen:
    return module_child(MODULE, db, side, rate, drain)


def seqs_in(side: str) -> Counter:
    """How often each seq reached the side file (complete lines only)."""
    return Counter(int(line) for line in side_lines(side))


def kill9_campaign(
    db: str,
    side: str | None = None,
    *,
    kills: int = 3,
    seed: int = 0,
    up=(0.3, 1.0),
    rate: float = 50.0,
    drain_timeout: float = 60.0,
) -> dict:
    """Run the campaign; returns its figures (``lost`` lists committed seqs the
    sink never saw)."""
    side = side or f"{db}.sink.txt"
    # the last child has no new commits: it drains the backlog and stops cleanly
    end = sink_campaign(
        lambda r, drain: _start(db, side, r, drain),
        open_store,
        db,
        ("outbox", "cursors"),
        rate=rate,
        kills=kills,
        seed=seed,
        up=up,
        drain_timeout=drain_timeout,
    )
    committed = [r["seq"] for r in end.rows["outbox"]]
    cursors = {r["consumer"]: r["seq"] for r in end.rows["cursors"]}
    seen = seqs_in(side)
    return end.figures(
        committed=len(committed),
        lost=[s for s in committed if not seen[s]],
        extra_deliveries=sum(n - 1 for n in seen.values() if n > 1),
        max_deliveries_of_one_row=max(seen.values(), default=0),
        cursor=cursors.get("sink"),
        last_seq=max(committed, default=0),
    )


if __name__ == "__main__":
    # python -m fanoutsim.designs.outbox.crashtest serve DB SIDE RATE [--drain]
    # python -m fanoutsim.designs.outbox.crashtest campaign DB [KILLS]
    sys.exit(main(sys.argv[1:], MODULE, serve, kill9_campaign))
