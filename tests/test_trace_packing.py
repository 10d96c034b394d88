"""A long trace packs its settled events (pickled, compressed) and reads back
the same: the same columns, frame and length as events kept as lists, with the
incarnation where it was, for every design's ids (str and int)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.kernel import trace as trace_mod
from fanoutsim.kernel.trace import LockedTrace, SpilledTrace, Trace

refs = st.one_of(st.none(), st.text(max_size=8), st.integers(min_value=-(2**62), max_value=2**62))
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(0, 2**62),
            st.sampled_from(["fired", "polled"]),
            refs,
            refs,
            refs,
            st.one_of(st.none(), st.text(max_size=12)),
        ),
        st.tuples(st.just("attempt"), st.integers(0, 3)),
        st.tuples(st.just("read")),
    ),
    max_size=80,
)


@pytest.fixture
def small_packs(monkeypatch):
    """The columns pack at 5 events: a short list of steps crosses many packs."""
    monkeypatch.setattr(trace_mod, "_PACK", 5)


def _expected(steps) -> dict[str, list]:
    """What the columns must hold: each event as added, with the incarnation set before it."""
    cols: dict[str, list] = {c: [] for c in ("t", "kind", "actor", "who", "what", "where", "attempt", "detail")}
    attempt = 0
    for step in steps:
        if step[0] == "attempt":
            attempt = step[1]
        elif step[0] == "add":
            _, t, kind, who, what, where, detail = step
            for name, value in zip(cols, (t, kind, "actor", who, what, where, attempt, detail)):
                cols[name].append(value)
    return cols


# the fixture's settings are the same for every input: nothing to reset between them
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_packed_events_read_back_as_recorded(small_packs, steps):
    for trace in (Trace(), LockedTrace()):
        seen = []  # (columns a read returned, what they held then)
        for step in steps:
            if step[0] == "add":
                _, t, kind, *ids, detail = step
                trace.add(t, kind, "actor", *ids, detail)
            elif step[0] == "attempt":
                trace.attempt = step[1]
            else:
                events, _ = trace.columns()
                seen.append((events, {k: list(v) for k, v in events.items()}))
        events, _ = trace.columns()
        assert events == _expected(steps)
        assert len(trace) == len(events["t"])
        # a list a reader was given may grow (it may be the recorder's own), but
        # a later pack takes no event from it and changes none
        for got, then in seen:
            assert all(got[k][: len(then[k])] == then[k] for k in then)
        if len(events["t"]) >= 5:  # at least one pack
            assert trace.packed and len(trace.cols[0]) < 5
        frame = trace.frame()
        assert frame["t"].tolist() == events["t"] and frame["attempt"].tolist() == events["attempt"]


def test_a_long_run_keeps_its_events_packed_and_its_trace_the_same(monkeypatch):
    """The crashes example for a virtual hour, traced with packs and without:
    the same frame and the same checker totals (duplicates and losses with
    their causes); with packs, the lists hold less than one pack's events."""

    def run() -> fs.Simulation:
        sim = fs.load_scenario("fanoutsim/examples/crashes.toml").build(seed=3)
        sim.run(3600.0)
        return sim

    pack = 2000  # the history packs too: an hour attempts a few thousand firings
    monkeypatch.setattr(trace_mod, "_PACK", pack)
    packed = run()
    monkeypatch.setattr(trace_mod, "_PACK", 10**12)
    unpacked = run()
    assert len(packed._trace.packed) >= 2 and not unpacked._trace.packed
    assert packed._trace._hist_packs and not unpacked._trace._hist_packs
    assert len(packed._trace.cols[0]) < pack and len(packed._trace.hist[0]) < pack
    frame, expected = packed.trace(), unpacked.trace()
    assert frame.equals(expected) and frame.history.equals(expected.history)
    totals = fs.check(packed).total
    assert totals == fs.check(unpacked).total
    assert totals["extra_deliveries"] > 0 or totals["lost"] > 0  # something for the checker to explain


def test_events_pickle_cannot_take_stay_as_they_are(small_packs):
    """An id pickle cannot take (a lock) leaves its events unpacked, and readable."""
    trace = Trace()
    lock = threading.Lock()
    for t in range(18):
        trace.add(t, "fired", "actor", who=lock if t == 6 else None)
    events, _ = trace.columns()
    assert events["t"] == list(range(18)) and events["who"][6] is lock
    assert len(trace) == 18
    # events 0-5 pack, 6-11 (the lock's) are kept, tried once: the events after them pack
    assert [type(p).__name__ for p in trace.packed] == ["Packed", "Kept", "Packed"]


def test_a_spilled_trace_packs_nothing_its_chunks_go_to_disk(small_packs, tmp_path):
    trace = SpilledTrace(path=tmp_path / "t", chunk=20)
    for t in range(50):
        trace.add(t, "fired", "actor", what=str(t))
    assert not trace.packed and trace._parts == 2
    events, _ = trace.columns()
    assert events["t"] == list(range(50)) and events["what"] == [str(t) for t in range(50)]


def test_the_history_indexes_only_the_items_in_flight():
    """A logged item leaves the index that finds its history row (a long run
    would keep millions), its row keeps its time; one never logged stays."""
    from fanoutsim.designs.reactor.engine import TRACE

    trace = Trace(TRACE)
    for k in range(100):
        trace.attempted(f"f{k}", "r", "t", k, b"")
        if k != 42:  # its writer crashed before the commit
            trace.logged(f"f{k}", 1000 + k)
    assert list(trace._hist_index) == ["f42"]
    history = trace.history()
    assert history["logged_at"].tolist() == [None if k == 42 else 1000 + k for k in range(100)]


histories = st.lists(
    st.one_of(
        st.tuples(st.just("attempt"), st.integers(0, 40), st.integers(0, 2**40)),
        st.tuples(st.just("log"), st.integers(0, 40), st.integers(0, 2**40)),
        st.tuples(st.just("incarnation"), st.integers(0, 3)),
        st.tuples(st.just("read")),
    ),
    max_size=80,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=histories)
def test_a_packed_history_reads_back_as_recorded(small_packs, steps):
    """Items attempted and logged in any order, across packs of five rows: the
    history holds each row as attempted, logged_at set once its item is logged
    (a row packed while its item was in flight too), None for one never logged."""
    from fanoutsim.designs.reactor.engine import TRACE

    for trace in (Trace(TRACE), LockedTrace(TRACE)):
        model: list[list] = []  # firing, reactor, tenant, fired_at, logged_at, payload, attempt
        flight: dict[str, int] = {}
        n = 0
        for step in steps:
            if step[0] == "attempt" and f"f{step[1]}" not in flight:
                item = f"f{step[1]}-{n}"
                n += 1
                trace.attempted(item, "r", "t", step[2], b"p")
                flight[item] = len(model)
                model.append([item, "r", "t", step[2], None, b"p", trace.attempt])
            elif step[0] == "log" and flight:
                item = sorted(flight)[step[1] % len(flight)]
                trace.logged(item, step[2])
                model[flight.pop(item)][4] = step[2]
            elif step[0] == "incarnation":
                trace.attempt = step[1]
            elif step[0] == "read":
                _, history = trace.columns()
                assert [list(r) for r in zip(*history.values())] == model
        _, history = trace.columns()
        assert list(history) == list(TRACE.history)
        assert [list(r) for r in zip(*history.values())] == model
        assert trace.history().values.tolist() == model
        if len(model) >= 5:
            assert trace._hist_packs and len(trace.hist[0]) < 5
        assert set(trace._hist_index) == set(flight)
