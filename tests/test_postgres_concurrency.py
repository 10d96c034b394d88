"""Real concurrency: several reactor pollers as separate OS processes sharing
one PostgreSQL (the runner, and ``fanoutsim serve --role poller`` processes).
The multi-poller duplicates come from real READ COMMITTED transactions racing
on one watermark, and the reactor's own checker names them from the merged
trace and the database's tables."""

from __future__ import annotations

import pytest

from fanoutsim.designs.reactor.pgreplicas import several_pollers


@pytest.mark.parametrize("pollers", [1, 3])
def test_several_poller_processes_duplicate_and_the_checker_says_why(pg_url, pollers):
    # Whether two pollers race on one watermark is up to the scheduler: a loaded
    # machine can serialize them for a whole run. Every run must lose nothing and
    # name its duplicates; with several pollers, one of a few runs must race.
    for _ in range(4):
        out = several_pollers(pg_url(), pollers, seconds=1.5, rate=40.0)
        total = out["report"].total
        # every process polled, each under its own name: the runner's, and poller@PID of each poller role
        assert out["pollers"] == ["poller"] + sorted(f"poller@{pid}" for pid in out["children"])
        assert len(out["children"]) == pollers - 1
        # each poller process ran cleanly: nothing said after "serving" (a thread's traceback would show)
        assert not any(out["said"].values()), out["said"]
        assert out["firings"] > 10 and total["expected"] == out["firings"]
        assert total["lost"] == 0 and total["pending"] == 0
        extra, causes = total["extra_deliveries"], total["duplicates_by_cause"]
        assert out["executions"] == out["firings"] + extra
        if pollers == 1:
            assert extra == 0
            return
        # Nearly every one is named several_pollers. Across processes a trace event bears
        # its step's start: a watermark write that waited on another poller's row lock
        # can sort before the dispatch it undid, and then the checker cannot tell why
        # ("unknown", never a wrong cause); seen at most once in a run here.
        assert set(causes) <= {"several_pollers", "unknown"}
        assert causes.get("several_pollers", 0) >= 0.9 * extra
        if extra > 0:  # two processes read one watermark before either moved it: both dispatched
            return
    pytest.fail("several pollers over one PostgreSQL never dispatched a firing twice in four runs")
