"""Issue 28: the outbox model against real job queues, procrastinate 3.10 and
pgqueuer 1.6, on the same PostgreSQL.

One worker of each library runs a seeded Poisson load (5 jobs/s, 190 jobs, a
2 s poll) in three cases — hints on; every hint lost; some lost (half dropped
in the worker, and procrastinate's listener connection terminated every ~5 s)
— and the outbox model with the library's preset runs the same commits with the
same lost hints (:mod:`fanoutsim.designs.outbox.realqueues`). The six real runs
take about 1.5-2.5 minutes (three at a time, each in processes of its own).

What holds today, with the outbox's current loop, is asserted as such. Measured
when this was written (2 cores shared with other work, load ~7; ms; KS with its
5% critical value, 0.14 for 190 against 190):

    | library       | case      | real p50 / p90 / p99 | model p50 / p90 / p99 | KS   |
    | procrastinate | hints     | 8.4 / 19.6 / 35      | 0.64 / 0.95 / 5.0     | 0.93 |
    | procrastinate | no_hints  | 1020 / 1790 / 2000   | 982 / 1770 / 1970     | 0.07 |
    | procrastinate | some_lost | 48.5 / 666 / 1240    | 35.8 / 539 / 1150     | 0.45 |
    | pgqueuer      | hints     | 5.1 / 11.9 / 64      | 0.57 / 3.8 / 8.8      | 0.67 |
    | pgqueuer      | no_hints  | 1090 / 1870 / 1980   | 990 / 1780 / 1990     | 0.10 |
    | pgqueuer      | some_lost | 24.3 / 531 / 1390    | 23.6 / 467 / 816      | 0.34 |

The hinted jobs make the gap: the model wakes a hint's delay (~0.6 ms) after
the commit and reads in no time; the real worker then fetches (~2-5 ms).

PHASE 2 (issue 28, after the outbox's loop is written once for both clocks):
with the loop options the presets' docstring lists (an idle-timeout poll, the
wake flag cleared after the fetch, no catch-up after a reconnect, a read cost
per fetch), KS must not tell the model from the real run in any of the six
cases. ``test_phase_2_the_model_cannot_be_told_from_the_real_runs`` states
that, and is expected to fail until then (strict: once it passes, the marker
must go).
"""
from __future__ import annotations

import numpy as np
import pytest

from fanoutsim.designs.outbox.realqueues import CASES, LIBRARIES, TABLE_HEAD, compare, model_run, run_real_all
from fanoutsim.designs.outbox.realqueues.record import ks_critical
from rqtools import need_libraries

POLL = 2.0


@pytest.fixture(scope="module")
def runs(pg_dsn):
    """The six real runs, on the test session's PostgreSQL."""
    need_libraries(*LIBRARIES)
    return run_real_all(dsn=pg_dsn, poll_interval=POLL)


@pytest.fixture(scope="module")
def compared(runs):
    out = {key: compare(run) for key, run in runs.items()}
    print("\n" + TABLE_HEAD + "\n" + "\n".join(c.row() for c in out.values()))
    return out


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
def test_the_model_loses_the_hints_the_real_worker_lost(runs, library, case):
    run = runs[(library, case)]
    t = model_run(run).trace()
    lost = set(t.loc[t["kind"] == "hint_dropped", "seq"].astype(int))
    assert lost == {k + 1 for k, gone in enumerate(run.hint_lost) if gone}


@pytest.mark.parametrize("library", LIBRARIES)
def test_today_the_model_agrees_when_every_hint_is_lost(compared, library):
    c = compared[(library, "no_hints")]
    # both wait for a 2 s poll: Uniform[0, 2 s), give or take the real idle timeout's rounds (KS
    # 0.06-0.13 measured, 5% critical 0.14). Asserted at 0.1% (critical 0.20), not 5%: the real run
    # is not seeded, and a 5% test fails one run in twenty by design. A model polling every 3 s
    # instead would be ~0.3 off.
    assert c.ks <= ks_critical(c.n_real, c.n_model, alpha=0.001), c.row()


@pytest.mark.parametrize("library", LIBRARIES)
def test_today_the_model_misses_the_read_cost_when_hints_are_on(compared, library):
    # TODAY: the model's reads take no time, so with hints on it handles a job within the
    # hint's delay (median ~0.6 ms), the real worker a fetch later (median 5-8 ms measured).
    # PHASE 2: the read cost as a wait closes this gap, and this test gives way to the one below.
    c = compared[(library, "hints")]
    assert c.model_ms[50] < c.real_ms[50] and c.ks > c.critical, c.row()


@pytest.mark.xfail(strict=True, reason="phase 2 of issue 28: the outbox loop's idle-timeout poll, late-cleared "
                                       "wake flag, reconnect without catch-up and read cost are not options yet")
def test_phase_2_the_model_cannot_be_told_from_the_real_runs(compared):
    disagree = [c.row() for c in compared.values() if not c.agrees]
    assert not disagree, "\n" + "\n".join(disagree)
