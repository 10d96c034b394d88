"""Issue 28: the outbox model against real job queues, procrastinate 3.10 and
pgqueuer 1.6, on the same PostgreSQL.

One worker of each library runs a seeded Poisson load (5 jobs/s, 190 jobs, a
2 s poll) in three cases — hints on; every hint lost; some lost (half dropped
in the worker, and procrastinate's listener connection terminated every ~5 s)
— and the outbox model with the library's preset (its poll, wake, fetch and
self-wake rules: ``presets.py``) runs the same commits with the same lost hints
(:mod:`fanoutsim.designs.outbox.realqueues`). The six real runs take about
two minutes (three at a time, each in processes of its own).

The model draws the hint latency, the read cost of a round and the cost of an
empty fetch that the library's three runs measured in this session
(``session_costs``): on this shared machine they move with its load (a
hinted job's median was 4 ms in one session and 10 ms in another), and KS on
millisecond latencies tells a 10% shift in them apart. With ``hint_cost.json``'s
costs instead, the hinted cases agree only when the load is what it was when
the file was written. Measured in the session this was last written in (2
cores shared with other work, load ~6; ms; KS with its 5% critical value, 0.14
for 190 against 190):

    | library       | case      | real p50 / p90 / p99 | model p50 / p90 / p99 | KS   |
    | procrastinate | hints     | 4.95 / 14.5 / 46.9   | 5.38 / 14.3 / 343     | 0.07 |
    | procrastinate | no_hints  | 1040 / 1830 / 1950   | 1050 / 1800 / 1990    | 0.06 |
    | procrastinate | some_lost | 44.6 / 629 / 1230    | 48.9 / 736 / 1240     | 0.05 |
    | pgqueuer      | hints     | 2.86 / 8.37 / 52.8   | 2.77 / 9.14 / 188     | 0.04 |
    | pgqueuer      | no_hints  | 1060 / 1880 / 2000   | 1050 / 1790 / 1990    | 0.07 |
    | pgqueuer      | some_lost | 27.0 / 501 / 1360    | 15.2 / 515 / 1140     | 0.04 |

Six tests at 5% each fail together one run in four when the model is exactly
right, so the six are held to 5% together (Bonferroni: each at 5%/6, critical
0.17); the table prints each at 5% alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from rqtools import need_libraries

from fanoutsim.designs.outbox.realqueues import (
    CASES,
    LIBRARIES,
    TABLE_HEAD,
    compare,
    model_run,
    run_real_all,
    session_costs,
)
from fanoutsim.designs.outbox.realqueues.record import ks_critical

POLL = 2.0


@pytest.fixture(scope="module")
def runs(pg_dsn):
    """The six real runs, on the test session's PostgreSQL."""
    need_libraries(*LIBRARIES)
    return run_real_all(dsn=pg_dsn, poll_interval=POLL)


@pytest.fixture(scope="module")
def costs(runs):
    """Each library's costs as its three runs measured them in this session."""
    return {lib: session_costs(run for (name, _), run in runs.items() if name == lib) for lib in LIBRARIES}


@pytest.fixture(scope="module")
def compared(runs, costs):
    out = {key: compare(run, measured=costs[key[0]]) for key, run in runs.items()}
    print("\nthe model with this session's costs:\n" + TABLE_HEAD + "\n" + "\n".join(c.row() for c in out.values()))
    # for the record, not asserted: with hint_cost.json's costs (measured under another load)
    print(
        "\nwith hint_cost.json's costs:\n" + TABLE_HEAD + "\n" + "\n".join(compare(run).row() for run in runs.values())
    )
    return out


FAMILY = 0.05 / 6  # the six comparisons together at 5% (Bonferroni)


PAIRS = [(lib, case) for lib in LIBRARIES for case in CASES]


@pytest.mark.parametrize("library,case", PAIRS)
def test_every_committed_job_is_handled(runs, library, case):
    run = runs[(library, case)]
    assert len(run.commits) == 190 and run.unhandled() == 0
    assert run.poll_interval == POLL and run.version.startswith({"procrastinate": "3.10.", "pgqueuer": "1.6."}[library])
    assert (run.latencies() > 0).all()


@pytest.mark.parametrize("library", LIBRARIES)
def test_with_hints_on_a_job_is_handled_within_milliseconds(runs, library):
    run, without = runs[(library, "hints")], runs[(library, "no_hints")]
    assert not any(run.hint_lost) and len(run.hint_latencies()) == 190
    lat = run.latencies()
    assert np.median(lat) < 0.05, f"{library}: hinted median {np.median(lat) * 1000:.1f} ms"
    assert np.percentile(lat, 90) < np.median(without.latencies()) / 4


@pytest.mark.parametrize("library", LIBRARIES)
def test_with_every_hint_lost_each_job_waits_for_the_poll(runs, library):
    run = runs[(library, "no_hints")]
    assert all(run.hint_lost) and not run.terminations
    lat = run.latencies()
    assert lat.max() < POLL + 0.5  # the poll bounds it (an idle timeout: after the round, plus the round)
    assert 0.5 * POLL / 2 < np.median(lat) < 1.5 * POLL / 2  # about half a poll


def test_some_lost_procrastinate_reconnects_after_each_termination_and_fetches_nothing_then(runs):
    run = runs[("procrastinate", "some_lost")]
    assert len(run.terminations) >= 1 and run.reconnects == len(run.terminations)
    assert 0.3 < np.mean(run.hint_lost) < 0.85


def test_some_lost_pgqueuer_drops_about_half_and_never_reconnects(runs):
    run = runs[("pgqueuer", "some_lost")]
    assert not run.terminations and run.reconnects == 0  # its listener is its only connection: not killed
    assert 0.3 < np.mean(run.hint_lost) < 0.75


@pytest.mark.parametrize("library", LIBRARIES)
def test_some_lost_lies_between_hints_on_and_every_hint_lost(runs, library):
    med = {case: np.median(runs[(library, case)].latencies()) for case in CASES}
    assert med["hints"] < med["some_lost"] < med["no_hints"]


@pytest.mark.parametrize("library,case", PAIRS)
def test_the_model_loses_the_hints_the_real_worker_lost(runs, costs, library, case):
    run = runs[(library, case)]
    t = model_run(run, measured=costs[library]).trace()
    committed = t[t["kind"] == "committed"].set_index("seq")["t"]
    dropped = t[t["kind"] == "hint_dropped"]
    # a commit's hint is dropped as it commits; pgqueuer's own (status-write) hints at other times
    lost = {int(q) for q, at in zip(dropped["seq"], dropped["t"]) if committed.get(int(q)) == at}
    assert lost == {k + 1 for k, gone in enumerate(run.hint_lost) if gone}


def test_pgqueuer_wakes_itself_and_the_model_does_too(runs, costs):
    run = runs[("pgqueuer", "hints")]
    deletes = sum(op == "delete" for _, op, _ in run.events)
    assert deletes > 0.3 * len(run.commits)  # its status-log flushes: a NOTIFY each
    t = model_run(run, measured=costs["pgqueuer"]).trace()
    own = int((t["kind"] == "hint").sum()) - len(run.commits)
    assert 0.5 * deletes < own < 2 * deletes, (own, deletes)


def test_procrastinates_empty_fetches_are_cheaper_than_a_round(runs):
    # the window of its lost wake-up is an empty fetch, well under the read of a round
    run = runs[("procrastinate", "hints")]
    assert np.median(run.fetch_costs(False)) < np.median(run.read_costs())


@pytest.mark.parametrize("library,case", PAIRS)
def test_the_model_cannot_be_told_from_the_real_run(compared, library, case):
    c = compared[(library, case)]
    assert c.ks <= ks_critical(c.n_real, c.n_model, alpha=FAMILY), c.row()
