"""The checker's verdicts and its tools: explain, the trace exports."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import fanoutsim as fs
from fanoutsim.designs.reactor.checker import out_of_order
from fanoutsim.faults import CrashAtPoint, FaultPlan, Stall


def stalled_run(policy):
    sim = fs.Simulation(
        config=fs.SchedulerConfig(
            prune_policy=policy, reactor_firings_retention=20.0, reactor_firings_prune_interval=5.0
        ),
        faults=FaultPlan([Stall("wf", window=(0.0, 60.0), mode="pause")]),
    )
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", 1.0, payload="counter", stop=30.0)
    sim.run(until=90)
    return sim, fs.check(sim)


def test_ttl_prune_under_a_paused_subscription_is_a_loss_the_config_allows():
    sim, report = stalled_run("ttl")
    assert report.total["lost"] > 0 and set(report.lost["cause"]) == {"pruned"}
    assert not report.lost["promised"].any() and report.valid
    assert sim.metrics()["fanoutsim_reactor_firings_pruned_total"] >= report.total["lost"]


def test_conservative_prune_keeps_them_and_delivers_late():
    _, report = stalled_run("conservative")
    assert report.total["lost"] == 0 and report.total["delivered_once"] == report.total["expected"]


def test_crash_mid_prune_keeps_the_chunks_already_deleted():
    sim = fs.Simulation(
        config=fs.SchedulerConfig(
            reactor_firings_retention=10.0, reactor_firings_prune_interval=100.0, reactor_firings_prune_chunk=4
        ),
        faults=FaultPlan([CrashAtPoint("prune.mid_delete", nth=1, downtime=1.0)]),
    )
    for k in range(10):
        sim.run(until=1.0 + k)
        sim.fire("r", {"n": k})
    sim.run(until=99.5)
    sim.prune_once()  # the loop's own pass comes at t=100
    assert not sim.up  # died after the first chunk
    assert len(sim.firings()) == 6  # that chunk stayed deleted
    sim.run(until=101)  # restarted; its prune at start deletes the rest
    assert sim.firings().empty
    pruned = sim.trace().query("kind == 'pruned'")
    assert pruned["firing"].notna().sum() == 10


def test_explain_tells_one_firings_story(capsys):
    sim = fs.Simulation(faults=FaultPlan([CrashAtPoint("poll.after_dispatch_before_watermark", downtime=1.0)]))
    sid = sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(until=0.5)
    fid = sim.fire("r", {"n": 1})
    sim.run(until=5)
    timeline = fs.explain(sim, fid, sid)
    out = capsys.readouterr().out
    assert out.startswith(f"firing {fid}: r@public")
    kinds = list(timeline["kind"])
    assert kinds[:3] == ["fired", "logged", "dispatched"]
    assert kinds.count("dispatched") == 2 and "crashed" in kinds and "restarted" in kinds
    assert "watermark" in kinds[kinds.index("restarted") :]  # passed only after the restart
    with pytest.raises(KeyError, match="not in this run's history"):
        fs.explain(sim, "nope")
    with pytest.raises(KeyError, match="subscription 'nope' does not exist"):
        fs.explain(sim, fid, "nope")


def test_trace_exports_to_duckdb_and_parquet(tmp_path):
    sim = fs.Simulation(seed=2)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", 2.0)
    sim.run(until=30)
    tr = sim.trace()
    path = tr.to_duckdb(str(tmp_path / "trace.duckdb"))
    con = duckdb.connect(path)
    try:
        assert con.execute("select count(*) from trace").fetchone()[0] == len(tr)
        n_logged = con.execute("select count(*) from trace_firings where logged_at is not null").fetchone()[0]
        assert n_logged == len(sim.firings())
        kinds = dict(con.execute("select kind, count(*) from trace group by kind").fetchall())
        assert kinds["dispatched"] == len(sim.executions())
    finally:
        con.close()
    tr.to_parquet(tmp_path / "trace.parquet")
    back = pd.read_parquet(tmp_path / "trace.parquet")
    assert list(back["kind"]) == list(tr["kind"])
    # slicing keeps the export methods
    assert hasattr(tr[tr["kind"] == "dispatched"], "to_duckdb")


def test_trace_rows_have_time_actor_subscription_firing_execution_attempt():
    sim = fs.Simulation(faults=FaultPlan([CrashAtPoint("poll.after_fetch", downtime=1.0)]))
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(until=0.5)
    sim.fire("r", {"n": 1})
    sim.run(until=5)
    tr = sim.trace()
    assert list(tr.columns) == [
        "t",
        "time",
        "kind",
        "actor",
        "subscription",
        "firing",
        "execution",
        "attempt",
        "detail",
    ]
    assert {
        "fired",
        "logged",
        "polled",
        "fault",
        "crashed",
        "restarted",
        "dispatched",
        "watermark",
        "claimed",
        "finished",
        "pruned",
    } <= set(tr["kind"])
    assert set(tr.query("kind == 'dispatched'")["attempt"]) == {1}  # after the restart
    assert str(tr["time"].dt.tz) == "UTC"


def test_out_of_order_counts_firings_first_delivered_after_a_later_one():
    # (the first dispatch's place in the trace, fired_at) of firings 1, 2, 3
    assert out_of_order([[(1, 1), (2, 2), (3, 3)]]) == [0]
    assert out_of_order([[(3, 1), (1, 2), (2, 3)]]) == [1]
    assert out_of_order([[(3, 1), (2, 2), (1, 3)]]) == [2]
    assert out_of_order([[(2, 5), (1, 5)]]) == [0]  # a tie of stamps is in order either way
    # each subscription is ordered on its own: a later fired_at of another one does not count
    assert out_of_order([[(1, 9)], [(2, 1), (3, 2)], [], [(5, 3), (4, 4)]]) == [0, 0, 0, 1]


def test_the_checker_reads_firing_ids_past_look_alike_keys_in_the_payload():
    import json as _json

    from fanoutsim.designs.reactor.payload import context_firing

    def _firing_of(context):
        return context_firing(context)[:2]

    ctx = {
        "quote": {"reactor_name": "fake", "reactor_firing_id": "0" * 36},
        "reactor_name": 'we"ird',
        "reactor_firing_id": "12345678-1234-4234-8234-123456789abc",
        "reactor_fired_at": "x",
    }
    assert _firing_of(_json.dumps(ctx, separators=(",", ":"))) == ("12345678-1234-4234-8234-123456789abc", 'we"ird')
    ctx["reactor_name"] = "plain"
    assert _firing_of(_json.dumps(ctx, separators=(",", ":")))[1] == "plain"
    # a source named like the engine's key keeps its place in the object: json decides
    ctx = {"reactor_firing_id": "src", "quote": {"reactor_firing_id": "0" * 36}, "reactor_name": "r"}
    ctx["reactor_firing_id"], ctx["reactor_fired_at"] = "12345678-1234-4234-8234-123456789abc", "x"
    assert _firing_of(_json.dumps(ctx, separators=(",", ":"))) == ("12345678-1234-4234-8234-123456789abc", "r")


def test_a_prune_in_the_same_instant_as_a_watermark_move_is_ordered_by_the_trace():
    # the pause ends on a prune tick: what the trace did first decides the cause
    sim = fs.Simulation(
        config=fs.SchedulerConfig(reactor_firings_retention=20.0, reactor_firings_prune_interval=5.0),
        faults=FaultPlan([Stall("wf", window=(0.0, 30.0), mode="pause")]),
    )
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.add_workload("r", 1.0, payload="counter", stop=25.0)
    sim.run(until=60)
    report = fs.check(sim)
    assert "unknown" not in set(report.lost["cause"]) and report.valid


def test_conservative_prune_under_a_disabled_subscription_is_not_a_broken_promise():
    sim = fs.Simulation(
        config=fs.SchedulerConfig(
            prune_policy="conservative", reactor_firings_retention=10.0, reactor_firings_prune_interval=5.0
        )
    )
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.run(until=1)
    sim.runner.set_subscription_enabled("r", "wf", enabled=False)
    sim.fire("r", {"n": 1})
    sim.run(until=30)
    sim.runner.set_subscription_enabled("r", "wf", enabled=True)
    sim.run(until=32)
    report = fs.check(sim)
    assert list(report.lost["cause"]) == ["pruned"] and not report.lost["promised"].any()
    assert report.valid


class _FrameOnly:
    """A run seen through a host that has its trace as a frame only (traces
    merged from several processes): the checker then reads the frame."""

    def __init__(self, sim) -> None:
        self._sim = sim

    def __getattr__(self, name):
        if name == "trace_columns":
            raise AttributeError(name)
        return getattr(self._sim, name)


def _crashes_run():
    sim = fs.load_scenario("fanoutsim/examples/crashes.toml").build(seed=3)
    sim.run(1800.0)
    return sim


@pytest.mark.parametrize("run", ["ttl_prune", "crashes"])
def test_the_checker_reads_the_recorder_and_a_trace_frame_alike(run):
    sim = stalled_run("ttl")[0] if run == "ttl_prune" else _crashes_run()
    from_columns, from_frame = fs.check(sim), fs.check(_FrameOnly(sim))
    # the runs have something to explain: losses with a cause, or duplicates with one
    assert from_columns.total["lost"] > 0 or from_columns.total["extra_deliveries"] > 0
    assert from_columns.total == from_frame.total
    for part in ("per_subscription", "duplicates", "lost", "never_logged"):
        pd.testing.assert_frame_equal(getattr(from_columns, part), getattr(from_frame, part))


def test_trace_columns_hold_what_the_frame_holds_and_a_locked_trace_copies_them():
    from fanoutsim.designs.reactor.engine import TRACE
    from fanoutsim.kernel.trace import LockedTrace, Trace

    COLUMNS, HISTORY_COLUMNS = TRACE.columns, TRACE.history
    assert COLUMNS == ("t", "kind", "actor", "subscription", "firing", "execution", "attempt", "detail")
    for trace in (Trace(TRACE), LockedTrace(TRACE)):
        trace.attempted("f1", "r", "public", 10, b"x")
        trace.add(10, "fired", "reactor", what="f1", detail="r")
        trace.logged("f1", 12)
        trace.add(12, "watermark", "poller", who="s1", what="f1", detail="10")
        events, history = trace.columns()
        frame = trace.frame()
        assert list(events) == list(COLUMNS) and list(history) == list(HISTORY_COLUMNS)
        for name in COLUMNS:
            assert events[name] == [None if pd.isna(v) else v for v in frame[name]]
        for name in HISTORY_COLUMNS:
            assert history[name] == [None if v is None or v != v else v for v in frame.history[name]]
        # the recorder's own lists, not copies; a wall-clock trace goes on recording,
        # so its columns are a snapshot, all of one length
        assert (events["t"] is trace.cols[0]) == (not isinstance(trace, LockedTrace))
        trace.add(13, "crashed", "runtime")
        assert len(events["t"]) == 2 or not isinstance(trace, LockedTrace)


def test_a_design_names_its_trace_columns_and_the_kernel_records_them_alike():
    """The kernel records three ids, the incarnation and a history under no design's
    words; a design's schema names them (and may have no third id)."""
    from fanoutsim.kernel.trace import Trace, TraceSchema

    schema = TraceSchema(
        who="consumer", what="seq", where=None, incarnation="process", history=("seq", "logged_at", "body", "attempt")
    )
    trace = Trace(schema)
    trace.attempted(7, "hello")
    trace.add(10, "handled", "dispatcher", who="c1", what=7, where="dropped", detail="ok")
    trace.logged(7, 11)
    trace.attempt = 1
    trace.add(12, "crashed", "runtime")
    frame = trace.frame()
    assert list(frame.columns) == ["t", "time", "kind", "actor", "consumer", "seq", "process", "detail"]
    assert frame["consumer"].tolist() == ["c1", None] and frame["process"].tolist() == [0, 1]
    assert frame.history.to_dict("records") == [{"seq": 7, "logged_at": 11, "body": "hello", "attempt": 0}]
    events, history = trace.columns()
    assert "where" not in events and events["seq"] == [7, None] and history["body"] == ["hello"]
