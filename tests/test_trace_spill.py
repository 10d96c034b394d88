"""A trace spilled to Parquet in chunks reads back as the trace kept in memory:
the same frame, the same columns, for every design's ids (str and int); the
incarnation, kept as runs, reads back as each event's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim import LeaseSimulation, OutboxSimulation
from fanoutsim.kernel.trace import SpilledTrace, Trace, TraceSchema

refs = st.one_of(st.none(), st.text(max_size=8), st.integers(min_value=-(2**62), max_value=2**62))
events = st.lists(
    st.tuples(st.integers(0, 2**62), st.sampled_from(["a", "b"]), refs, refs, refs, st.one_of(st.none(), st.text())),
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(events=events, chunk=st.integers(1, 7))
def test_the_columns_read_back_as_recorded(tmp_path_factory, events, chunk):
    kept, spilled = Trace(), SpilledTrace(path=tmp_path_factory.mktemp("spill"), chunk=chunk)
    for attempt, (t, kind, who, what, where, detail) in enumerate(events):
        for trace in (kept, spilled):
            trace.attempt = attempt % 3
            trace.add(t, kind, "actor", who, what, where, detail)
    assert spilled.columns() == kept.columns()
    assert kept.columns()[0]["attempt"] == [i % 3 for i in range(len(events))]  # each event's incarnation
    assert len(spilled) == len(kept)
    assert spilled._parts == len(events) // chunk  # the chunks went to disk


def _runs(tmp_path):
    def reactor(trace):
        sim = fs.Simulation(seed=3, trace=trace)
        sim.runner.register_workflow("w", duration=0.2)
        sim.runner.subscribe_workflow_to_reactor("r", "w", tenant="t", when="payload.quote.price > 100")
        sim.add_workload("r", 5.0, tenant="t")
        return sim

    def outbox(trace):
        sim = OutboxSimulation(seed=3, trace=trace)
        sim.register_consumer("c", duration=0.01)
        sim.add_workload(5.0)
        return sim

    def leases(trace):
        sim = LeaseSimulation(seed=3, trace=trace)
        sim.register_consumer("c", duration=lambda rng: rng.uniform(0, 8), lease_seconds=5)
        sim.add_workload(5.0, partitions=2)
        return sim

    return {"reactor": reactor, "outbox": outbox, "leases": leases}


@pytest.mark.parametrize("design", ["reactor", "outbox", "leases"])
def test_a_spilled_run_has_the_trace_of_one_kept_in_memory(tmp_path, design):
    build = _runs(tmp_path)[design]
    kept, spilled = build(True), build(tmp_path / "trace")
    spilled._trace.chunk = 97  # small chunks: many files
    for sim in (kept, spilled):
        sim.run(until=60.0)
    assert spilled._trace._parts > 3
    assert spilled.trace().to_csv() == kept.trace().to_csv()
    assert spilled._trace.columns() == kept._trace.columns()


def test_a_spill_folder_must_be_new_or_empty(tmp_path):
    (tmp_path / "old.parquet").write_text("x")
    with pytest.raises(ValueError, match="must be new or empty"):
        SpilledTrace(TraceSchema(), path=tmp_path)
    with pytest.raises(ValueError, match="chunk must be"):
        SpilledTrace(TraceSchema(), path=tmp_path / "new", chunk=0)


def test_trace_takes_a_bool_or_a_folder():
    with pytest.raises(TypeError, match="trace must be True, False or a folder"):
        fs.Simulation(trace=1)


def test_the_wall_clock_refuses_a_folder_as_its_trace(tmp_path):
    with pytest.raises(TypeError, match="trace must be True or False on the wall clock"):
        fs.Realtime(store=str(tmp_path / "run.duckdb"), trace=str(tmp_path / "trace"))
