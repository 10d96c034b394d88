"""The checkers' tables add up: a row's columns make its expected count, the
columns' sums are the totals line's numbers, and each count means what the
report says it does."""

from __future__ import annotations

import re
from pathlib import Path

import fanoutsim as fs
from fanoutsim import OutboxSimulation
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.reactor.checker import format_check

SCENARIOS = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples"

_TOTALS = re.compile(
    r"expected (?P<expected>\d+)  delivered once (?P<once>\d+)  duplicated (?P<dup>\d+) "
    r"\(\+(?P<extra>\d+) extra deliveries\)  lost (?P<lost>\d+) .*pending (?P<pend>\d+)  "
    r"out of order (?P<ooo>\d+)"
)


def _printed_table(text: str) -> tuple[dict[str, int], list[dict[str, int]]]:
    """The verdict as printed: the totals line's numbers and the per-subscription
    rows (header name -> count), read from the text an engineer reads."""
    lines = text.splitlines()
    totals = {k: int(v) for k, v in _TOTALS.search(text).groupdict().items()}
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("subscription"))
    header = lines[at].split()
    rows = []
    for line in lines[at + 1 :]:
        cells = line.split()
        if len(cells) != len(header) or "->" not in cells[0]:
            break
        rows.append({h: int(c) for h, c in zip(header[1:-1], cells[1:-1])})
    return totals, rows


def test_reactor_subscription_columns_add_up_to_expected_and_to_the_totals():
    sim = fs.load_scenario(SCENARIOS / "crashes.toml").build(seed=0)
    sim.run(1200.0)
    checked = fs.check(sim)
    # a firing delivered three times or more tells firings from extra deliveries
    assert checked.total["extra_deliveries"] > checked.total["duplicated"] > 0
    totals, rows = _printed_table(format_check(checked))
    assert len(rows) == len(checked.per_subscription) > 1
    for row in rows:
        assert row["once"] + row["dup"] + row["lost"] + row["pend"] == row["expected"]
    for column in ("expected", "once", "dup", "extra", "lost", "pend", "ooo"):
        assert sum(row[column] for row in rows) == totals[column], column
    assert totals["once"] + totals["dup"] + totals["lost"] + totals["pend"] == totals["expected"]


def _overloaded_outbox() -> OutboxSimulation:
    """A consumer slower than the commits: a backlog ahead of its cursor at the
    end, and a row whose handling step is still running."""
    outbox = OutboxSimulation(OutboxConfig(safety_poll_interval=5.0), seed=1)
    outbox.register_consumer("indexer", duration=0.15)
    outbox.add_workload(10.0)
    outbox.run(until=120)
    return outbox


def test_outbox_pending_counts_the_rows_not_delivered_ahead_of_the_cursor():
    outbox = _overloaded_outbox()
    row = check_outbox(outbox).per_consumer.set_index("consumer").loc["indexer"]
    trace = outbox.trace()
    mine = trace["consumer"] == "indexer"
    start = int(trace.loc[mine & (trace["kind"] == "cursor_start"), "seq"].iloc[0])
    owed = {int(s) for s in trace.loc[trace["kind"] == "committed", "seq"] if s > start}
    delivered = {int(s) for s in trace.loc[mine & (trace["kind"] == "delivered"), "seq"]}
    retained = set(outbox.outbox()["seq"].astype(int))
    cursor = int(row["cursor"])
    # the cursor is the last seq handled in full: everything up to it was delivered
    assert {s for s in owed if s <= cursor} <= delivered
    # the case that reads oddly: a row delivered (its handler ran) above the cursor
    assert any(s > cursor for s in delivered & owed)
    ahead = {s for s in owed - delivered if s > cursor and s in retained}
    assert ahead and row["pending"] == len(ahead)
    assert row["delivered"] + row["lost"] + row["parked"] + row["pending"] == len(owed)
