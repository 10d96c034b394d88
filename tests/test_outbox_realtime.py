"""The outbox dispatcher on the wall clock: threads, a DuckDB file, real time,
real crashes (seed 002). Every figure asserted is a bound the design promises,
never one copied from a run."""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from conftest import wait_for

import fanoutsim as fs
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.analysis import latency_frame
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.crashtest import kill9_campaign
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.faults import CrashAt, CrashAtPoint, CrashRandomly, FaultPlan, LateCommit, Notifications
from fanoutsim.kernel.timeutil import US

POLL = 0.2
FAST = OutboxConfig(safety_poll_interval=POLL, batch_limit=20)
SLACK = 0.3  # seconds: a fetch, the rows ahead in the batch, thread wake-ups on a busy 2-core box


@pytest.fixture
def make(tmp_path):
    """``make(name, config, faults)``: an OutboxRealtime on a DuckDB file in
    tmp_path, closed at teardown (reads work after ``stop()``, until ``close()``)."""
    made = []

    def _make(name, config=FAST, faults=None):
        rt = OutboxRealtime(config, store=str(tmp_path / f"{name}.duckdb"), faults=faults)
        made.append(rt)
        return rt

    yield _make
    for rt in made:
        rt.close()


@contextmanager
def running(rt):
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


def caught_up(rt, consumers):
    """Every consumer's cursor has reached the last committed row."""
    seqs = rt.outbox()["seq"]
    cursors = dict(zip(rt.cursors()["consumer"], rt.cursors()["seq"]))
    return len(seqs) > 0 and all(cursors.get(c, -1) >= seqs.max() for c in consumers)


def safety_poll_lateness(rt, consumer) -> float:
    """How late the consumer's safety polls woke, the median over them (seconds, >= 0)."""
    fetched = events(rt, "fetched", consumer)["t"].sort_values()
    gaps = fetched.diff().dropna() / 1e6
    polls = gaps[gaps >= POLL]
    return max(0.0, float(polls.median()) - POLL) if len(polls) else 0.0


def events(rt, kind, consumer=None):
    t = rt.trace()
    t = t[t["kind"] == kind]
    return t if consumer is None else t[t["consumer"] == consumer]


@pytest.mark.parametrize(
    "spec",
    [Notifications(drop=0.2, coalesce=True, silent=((0.5, 1.0),)), Notifications(drop=1.0)],
    ids=["lossy", "all-lost"],
)
def test_lost_hints_cost_latency_never_rows(make, spec):
    seen = {"indexer": [], "exporter": []}
    rt = make("hints", faults=FaultPlan([spec]))
    for name in seen:
        rt.register_consumer(name, fn=lambda row, name=name: seen[name].append(row["seq"]), duration=0.005)
    with running(rt):
        # a fixed number of commits, about 30 a second, from this thread: however
        # late a loaded machine runs it, they span the silent window and all are made
        for i in range(45):
            rt.commit(f"p{i}", "x")
            time.sleep(1 / 30)
        assert wait_for(lambda: caught_up(rt, seen), timeout=60)
    report = check_outbox(rt)
    committed = rt.outbox()["seq"].tolist()
    assert report.valid and report.total["lost"] == 0 and report.total["pending"] == 0
    assert len(committed) > 10 and report.total["delivered"] == 2 * len(committed)
    for name in seen:  # the consumer's own function ran for every committed row, in order
        assert seen[name] == committed
    m = rt.metrics()
    lat = latency_frame(rt)
    hintless = lat[~lat["hinted"]]
    assert len(hintless) > 0 and m["fanoutsim_outbox_hints_dropped_total"] > 0
    # A row whose hint was lost waits for the next safety poll: uniform under one interval,
    # half of it on average. A loaded machine wakes the poll late, and one late wake delays
    # every row of that poll at once, so the bound is per wake: one interval plus how late
    # the safety polls woke (a fetch an interval or more after the one before is a safety
    # poll; hints fetch sooner). A loop that missed a poll would put the median past it.
    assert hintless["latency_s"].median() <= POLL + safety_poll_lateness(rt, "indexer")
    hinted = lat[lat["hinted"]]
    if len(hinted):
        assert hinted["latency_s"].median() < hintless["latency_s"].median()
    if spec.drop == 1.0:
        assert len(events(rt, "hint")) == 0 and m["fanoutsim_outbox_hints_dropped_total"] == len(committed)
    else:  # the silent window cost hints too: sent while nobody listened
        assert m["fanoutsim_outbox_hints_missed_total"] > 0
        assert len(events(rt, "hint")) > 0


def test_a_crash_between_handling_and_the_cursor_redelivers_after_a_real_restart(make):
    plan = FaultPlan([CrashAtPoint("dispatch.after_handle_before_cursor", nth=3, downtime=0.5)])
    rt = make("crash", faults=plan)
    rt.register_consumer("indexer", duration=0.01)
    for i in range(6):  # before start: nobody listens yet, the first read takes them all
        rt.commit(f"p{i}", "x")
    with running(rt):
        assert wait_for(lambda: not rt.up, timeout=5)
        with pytest.raises(RuntimeError, match=r"down \(crashed\)"):
            rt.commit("p9", "while down")
        assert wait_for(lambda: rt.up and caught_up(rt, ["indexer"]), timeout=5)  # restarted by itself
        crashed = events(rt, "crashed")["t"].tolist()
        restarted = events(rt, "restarted")["t"].tolist()
        assert len(crashed) == 1 and len(restarted) == 1
        assert restarted[0] - crashed[0] >= 0.5 * US  # the downtime passed on the wall clock
        assert [r["event"] for r in rt.store.rows("runner_log")] == ["start", "start"]
    assert rt.metrics()["fanoutsim_outbox_hints_missed_total"] == 6  # sent before anyone listened
    report = check_outbox(rt)
    assert report.valid and report.total["lost"] == 0
    assert report.duplicates.to_dict("records") == [{"consumer": "indexer", "seq": 3, "cause": "crash"}]
    assert events(rt, "handled", "indexer")["seq"].tolist() == [1, 2, 3, 3, 4, 5, 6]
    assert rt.metrics()["fanoutsim_runner_crashes_total"] == 1


def test_planned_crashes_at_wall_times_lose_nothing(make):
    plan = FaultPlan([CrashAt(0.4, downtime=0.2), CrashRandomly(mean_gap=0.3, downtime=0.1, window=(0.8, 1.6))])
    rt = make("planned", faults=plan)
    rt.register_consumer("indexer", duration=0.005)
    rt.register_consumer("mailer", duration=0.01)
    rt.add_workload(30.0, stop=1.8)
    with running(rt):
        time.sleep(1.8)
        assert wait_for(lambda: rt.up and caught_up(rt, ["indexer", "mailer"]), timeout=5)
    crashes = events(rt, "crashed")
    assert crashes["detail"].iloc[0] == "time"
    first = (crashes["t"].iloc[0] - rt.start_us) / US
    assert 0.4 <= first < 0.4 + SLACK  # CrashAt(0.4): seconds since start
    random_at = (crashes.loc[crashes["detail"] == "random", "t"] - rt.start_us) / US
    assert all((0.8 <= t < 1.6 + SLACK) for t in random_at)
    log = [r["event"] for r in rt.store.rows("runner_log")]
    assert log.count("start") == len(crashes) + 1 and log[-1] == "stop"
    report = check_outbox(rt)
    assert report.valid and report.total["lost"] == 0 and report.total["pending"] == 0
    assert set(report.duplicates["cause"]) <= {"crash"}


def test_a_new_process_over_the_same_file_resumes_where_the_cursors_point(tmp_path):
    db = str(tmp_path / "resume.duckdb")
    seen = []
    first = OutboxRealtime(FAST, store=db)
    first.register_consumer("indexer", fn=lambda row: seen.append(row["seq"]), duration=0.005)
    first.start()
    for i in range(5):
        first.commit(f"p{i}", "x")
    due = first.commit("nudge", "in a while", kind="nudge.scheduled", due_at=first.now + 1.0)
    due_at = first.outbox().set_index("seq").loc[due, "due_at"]
    assert wait_for(lambda: len(first.deferred()) == 1 and caught_up(first, ["indexer"]))
    first.close()
    assert seen == list(range(1, due))  # the nudge is owed, not handled: a pause is a row

    second = OutboxRealtime(FAST, store=db)
    try:
        # the code registers again; the cursor is the one in the table
        assert second.register_consumer("indexer", fn=lambda row: seen.append(row["seq"]), duration=0.005) == due
        assert second.deferred()["seq"].tolist() == [due]
        second.start()
        second.commit("p9", "after the restart")
        assert wait_for(lambda: len(second.deferred()) == 0 and due + 1 in seen, timeout=5)
        handled = events(second, "handled", "indexer")
        nudge = handled[handled["seq"] == due]
        assert nudge["detail"].tolist() == ["due"]
        assert nudge["t"].iloc[0] >= due_at.value // 1000  # not before its time
        assert [r["event"] for r in second.store.rows("runner_log")] == ["start", "stop", "start"]
    finally:
        second.close()
    assert sorted(seen) == list(range(1, due + 2)) and len(seen) == len(set(seen))  # nothing twice
    assert len(events(second, "cursor_start")) == 0


def test_a_hung_step_is_cut_off_at_its_timeout_and_parked_while_others_flow(make):
    rt = make("hung")
    rt.register_consumer("hung", duration=5.0, timeout=0.2, backoff=0.1, jitter=0.0, retry_budget=3)
    rt.register_consumer("fast", duration=0.005)
    with running(rt):
        t0 = time.monotonic()
        rt.commit("p1", "x")
        time.sleep(0.35)  # hung is in its second attempt at row 1
        rt.commit("p2", "x")
        assert wait_for(lambda: len(rt.parked()) == 2, timeout=5)
        wall = time.monotonic() - t0
    assert wall < 2 * 5.0  # cut off: the 5 s step never ran to its end
    fails = events(rt, "failed", "hung")
    assert fails["detail"].str.endswith("timed out after 0.2s").all() and len(fails) == 6
    t = fails[fails["seq"] == 1]["t"].tolist()
    fetched = events(rt, "fetched", "hung")["t"].iloc[0]
    gaps = [(b - a) / US for a, b in zip([fetched] + t, t)]
    # each attempt takes the timeout; the retries wait 0.1 s, then 0.2 s (exponential)
    for gap, expected in zip(gaps, [0.2, 0.1 + 0.2, 0.2 + 0.2]):
        assert expected <= gap < expected + 0.15
    parked = rt.parked()
    assert parked["seq"].tolist() == [1, 2] and set(parked["attempts"]) == {3}
    # the fast consumer never waited for the hung one
    lat = latency_frame(rt).set_index(["consumer", "seq"])["latency_s"]
    assert lat["fast"].max() < SLACK  # while hung held each row for 0.2 + 0.1 + 0.2 + 0.2 + 0.2 s
    assert lat.get(("hung", 1)) is None  # parked, never handled
    report = check_outbox(rt)
    assert report.valid and report.total["parked"] == 2 and report.total["lost"] == 0


@pytest.mark.parametrize("mode", ["all", "gap"])
def test_late_commits_on_the_wall_clock(make, mode):
    cfg = OutboxConfig(safety_poll_interval=POLL, read_mode=mode, gap_timeout=2.0)
    rt = make(f"late-{mode}", cfg, FaultPlan([LateCommit(0.3, 0.3)]))
    rt.register_consumer("indexer", duration=0.002)
    rt.add_workload(40.0, stop=1.2)
    with running(rt):
        time.sleep(1.6)  # the last late writer has committed
        assert wait_for(lambda: caught_up(rt, ["indexer"]), timeout=5)
    report = check_outbox(rt)
    assert len(events(rt, "reserved")) > len(events(rt, "committed")) * 0.1  # late writers took seqs early
    if mode == "all":  # a late row committed under a cursor that had passed its seq: lost
        assert report.total["lost"] > 0 and set(report.lost["cause"]) == {"late_commit"} and not report.valid
    else:  # waiting at the gap closes the hole
        assert report.total["lost"] == 0 and report.valid


def test_bad_input_and_life_cycle_errors(tmp_path):
    with pytest.raises(TypeError, match="config must be an OutboxConfig, not SchedulerConfig"):
        OutboxRealtime(fs.SchedulerConfig(), store="memory")
    with pytest.raises(TypeError, match="seed must be an int"):
        OutboxRealtime(store="memory", seed="1")
    rt = OutboxRealtime(FAST, store=str(tmp_path / "bad.duckdb"))
    rt.register_consumer("indexer")
    with pytest.raises(KeyError, match="unknown consumer 'nobody'; registered: indexer"):
        rt.set_cursor("nobody", 0)
    with pytest.raises(ValueError, match=r"due_at -5 is in the past \(now is"):
        rt.commit("p", due_at=-5)
    with pytest.raises(ValueError, match="is in the past"):
        rt.commit("p", due_at=datetime.now(UTC) - timedelta(seconds=10))
    with pytest.raises(TypeError, match="due_at must be seconds since start"):
        rt.commit("p", due_at="tomorrow")
    with pytest.raises(ValueError, match="rate must be a finite number of commits per"):
        rt.add_workload(0)
    rt.start()
    with pytest.raises(RuntimeError, match="already running"):
        rt.start()
    seq = rt.commit("p", due_at=rt.now)  # "now" read a moment ago is not the past
    assert wait_for(lambda: caught_up(rt, ["indexer"]))
    t0 = time.monotonic()
    rt.stop()
    assert time.monotonic() - t0 < 1.0  # graceful and bounded
    rt.stop()  # a no-op
    with pytest.raises(RuntimeError, match="stopped"):
        rt.commit("p2")
    with pytest.raises(RuntimeError, match="make a new OutboxRealtime"):
        rt.start()
    assert rt.outbox()["seq"].tolist() == [seq]  # reads work until close
    rt.close()
    rt.close()  # a no-op


def test_kill_9_loses_no_committed_row(tmp_path):
    out = kill9_campaign(str(tmp_path / "k.duckdb"), str(tmp_path / "sink.txt"), kills=3, seed=1)
    print(out)
    assert out["clean_exit"] and out["starts"] == 4 and out["clean_stops"] == 1
    assert out["committed"] > 20 and out["lost"] == []
    assert out["cursor"] == out["last_seq"]
    # the cursor moves after every row: a kill re-delivers at most the row in hand
    assert out["extra_deliveries"] <= out["kills"]


def _rows_per_step(rt) -> list[int]:
    """Record how many rows each store step of ``rt`` takes behind a consumer."""
    from fanoutsim.designs.outbox.dispatcher import Batch

    steps: list[int] = []
    call = rt._call

    def counted(step, *args, **kwargs):
        before = args[0].i if args and isinstance(args[0], Batch) else 0
        out = call(step, *args, **kwargs)
        if isinstance(out, Batch):
            steps.append(out.i - before)
        return out

    rt._call = counted
    return steps


def test_on_the_wall_clock_a_step_takes_one_row_at_a_time(make):
    # a step holds the store lock: rows that take no time go one per step, so
    # writers and crashes can come between them (under SimPy, where nothing can,
    # one step takes them all)
    rt = make("steps")
    rt.register_consumer("indexer")  # no code, no duration
    for i in range(30):
        rt.commit(f"p{i}", "x")
    steps = _rows_per_step(rt)
    with running(rt):
        assert wait_for(lambda: caught_up(rt, ["indexer"]), timeout=10)
    assert sum(steps) == 30 and max(steps) == 1

    sim = fs.OutboxSimulation(FAST, seed=0)
    sim.register_consumer("indexer")
    for i in range(30):
        sim.commit(f"p{i}", "x")
    steps = _rows_per_step(sim)
    sim.run(until=1.0)
    assert sum(steps) == 30 and max(steps) == FAST.batch_limit


def test_a_writer_thread_that_starts_late_writes_the_seeds_whole_workload(monkeypatch):
    # on a loaded machine the writer's thread may first run well after start():
    # its Poisson schedule still begins at the start, so it writes what the
    # virtual run writes, the missed arrivals at once
    import fanoutsim.kernel.runtime.driver as runtime  # where a runtime's writer loop is made

    arrivals = runtime.arrivals

    def late(now, *args):
        first = [True]

        def reading():
            if first[0]:
                first[0] = False
                time.sleep(0.3)
            return now()

        return arrivals(reading, *args)

    def setup(run):
        run.register_consumer("indexer")
        run.add_workload(12.0, stop=3.0)

    sim = fs.OutboxSimulation(FAST, seed=5)
    setup(sim)
    sim.run(until=4.0)
    monkeypatch.setattr(runtime, "arrivals", late)
    rt = OutboxRealtime(FAST, store="memory", seed=5)
    setup(rt)
    with running(rt):
        assert wait_for(lambda: len(rt.outbox()) >= len(sim.outbox()), timeout=20)
    try:
        assert list(rt.outbox()["ref"]) == list(sim.outbox()["ref"])
    finally:
        rt.close()
