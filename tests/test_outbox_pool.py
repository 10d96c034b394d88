"""The reserved LISTEN connection (seed 002): "The postgres.js pool sets aside
this connection so a Gmail backfill or a burst of keystrokes can never starve
the propagation path." A backfill holding the pool leaves a reserved listener
alone; a listener on the shared pool waits for a free connection or loses the
hint, and the consumers fall back on the safety poll — late, never lost."""

from __future__ import annotations

import textwrap

import pytest

from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox import analysis as oa
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.notify import ListenerPool
from fanoutsim.designs.outbox.simulation import OutboxSimulation
from fanoutsim.faults import Backfill, FaultPlan
from fanoutsim.scenario import ScenarioError, load_scenario


def _run(reserve: bool, backfill: Backfill | None, wait: float = 1.0, seconds: float = 120.0):
    sim = OutboxSimulation(
        OutboxConfig(reserve_listener=reserve, listener_wait=wait),
        seed=3,
        faults=FaultPlan([backfill]) if backfill else None,
    )
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(1.0, stop=seconds)
    sim.run(until=seconds + 10.0)
    return sim


def _kinds(sim, kind):
    return sim.trace()[sim.trace()["kind"] == kind]


def test_a_reserved_listener_is_untouched_by_a_backfill():
    quiet = _run(True, None)
    busy = _run(True, Backfill(window=(30.0, 90.0)))
    assert busy.trace().equals(quiet.trace())  # same wake-ups, same handling, to the microsecond


def test_a_shared_listener_loses_hints_while_the_backfill_holds_the_pool():
    sim = _run(False, Backfill(window=(30.0, 90.0)), wait=1.0)
    t = sim.trace()
    rel = (t["t"] - sim.start_us) / 1e6
    missed = _kinds(sim, "hint_missed")
    assert len(missed) > 0 and set(missed["detail"]) == {"no free connection"}
    assert ((rel[missed.index] >= 30.0) & (rel[missed.index] < 90.0)).all()
    # the hints of the backfill's last second wait for its end, then wake the dispatcher
    waiting = _kinds(sim, "hint_waiting")
    assert len(waiting) > 0 and (rel[waiting.index] >= 89.0).all()
    heard = set(_kinds(sim, "hint")["seq"])
    assert set(waiting["seq"].astype(int)) <= heard
    committed_during = set(t.loc[(t["kind"] == "committed") & (rel >= 30.0) & (rel < 90.0), "seq"])
    assert committed_during == set(missed["seq"].astype(int)) | set(waiting["seq"].astype(int))
    # nothing is lost: the safety poll reads past the cursor; it costs up to one poll interval
    r = check_outbox(sim)
    assert r.total["lost"] == 0 and r.valid
    lat = oa.handled_latency(sim)
    during = lat[(lat["committed_s"] >= 30.0) & (lat["committed_s"] < 90.0)]["latency_s"]
    outside = lat[(lat["committed_s"] < 30.0)]["latency_s"]
    assert during.max() > 1.0 >= outside.max()
    assert during.max() <= sim.config.safety_poll_interval + 0.1


def test_without_waiting_every_hint_in_the_window_is_lost():
    sim = _run(False, Backfill(window=(30.0, 90.0)), wait=0.0)
    assert _kinds(sim, "hint_waiting").empty
    t = sim.trace()
    rel = (t["t"] - sim.start_us) / 1e6
    during = ((t["kind"] == "committed") & (rel >= 30.0) & (rel < 90.0)).sum()
    assert len(_kinds(sim, "hint_missed")) == during


def test_a_backfill_that_leaves_a_connection_free_does_not_starve_a_shared_listener():
    quiet = _run(False, None)
    partial = _run(False, Backfill(window=(30.0, 90.0), connections=9))  # 1 of 10 left
    assert partial.trace().equals(quiet.trace())
    full = _run(False, Backfill(window=(30.0, 90.0), connections=10))
    assert not _kinds(full, "hint_missed").empty


def test_pool_arithmetic():
    b = Backfill(window=(10.0, 20.0))
    assert ListenerPool(10, True, [b]).free_in(15.0) == 0.0
    assert ListenerPool(10, False, [b]).free_in(15.0) == 5.0
    assert ListenerPool(10, False, [b]).free_in(20.0) == 0.0
    assert (
        ListenerPool(
            10, False, [Backfill(window=(10.0, 20.0), connections=4), Backfill(window=(12.0, 30.0), connections=6)]
        ).free_in(15.0)
        == 15.0
    )


def test_bad_pool_settings_name_the_field():
    with pytest.raises(ValueError, match="pool_size must be >= 2 with reserve_listener=True"):
        OutboxConfig(pool_size=1)
    with pytest.raises(ValueError, match="reserve_listener must be True or False"):
        OutboxConfig(reserve_listener="no")
    with pytest.raises(ValueError, match="listener_wait must be a finite number of seconds >= 0"):
        OutboxConfig(listener_wait=-1)
    with pytest.raises(ValueError, match="backfill.window is required"):
        Backfill(window=None)
    with pytest.raises(ValueError, match="backfill.connections must be >= 1"):
        Backfill(window=(0, 1), connections=0)


def test_backfill_in_scenario_files(tmp_path):
    text = textwrap.dedent("""
        design = "outbox"
        [run]
        until = 60.0
        [outbox]
        reserve_listener = false
        [[consumers]]
        name = "indexer"
        [[workload]]
        rate = 1.0
        [[faults]]
        kind = "backfill"
        window = [10.0, 40.0]
    """)
    path = tmp_path / "pool.toml"
    path.write_text(text)
    sim = load_scenario(path).run()
    assert not _kinds(sim, "hint_missed").empty
    leases = tmp_path / "leases.toml"
    leases.write_text(
        'design = "leases"\n[[consumers]]\nname = "c"\n[[faults]]\nkind = "backfill"\nwindow = [1.0, 2.0]\n'
    )
    with pytest.raises(ScenarioError, match="'backfill' is a fault of the outbox design"):
        load_scenario(leases)


@pytest.mark.parametrize("reserve", [True, False], ids=["reserved", "shared"])
def test_the_wall_clock_listener_obeys_the_same_pool(tmp_path, reserve):
    import time

    from fanoutsim.designs.outbox.realtime import OutboxRealtime

    cfg = OutboxConfig(safety_poll_interval=0.5, reserve_listener=reserve, listener_wait=0.0)
    rt = OutboxRealtime(cfg, store=str(tmp_path / "pool.duckdb"), faults=FaultPlan([Backfill(window=(0.0, 60.0))]))
    try:
        rt.register_consumer("indexer")
        rt.start()
        for k in range(5):
            rt.commit(f"p{k}", "x")
        end = time.monotonic() + 10.0
        while time.monotonic() < end and len(rt.cursors()) and rt.cursors()["seq"].iloc[0] < 5:
            time.sleep(0.05)
        time.sleep(0.1)
        t = rt.trace()
        heard, missed = (t["kind"] == "hint").sum(), (t["kind"] == "hint_missed").sum()
        assert (heard, missed) == ((5, 0) if reserve else (0, 5))
        assert rt.cursors()["seq"].tolist() == [5]  # handled either way: the poll reads the table
    finally:
        rt.stop()
        rt.close()


POOL_OF_ONE = """
    design = "outbox"
    [run]
    until = 10.0
    [outbox]
    {settings}
    [[consumers]]
    name = "indexer"
    [[workload]]
    rate = 1.0
"""


def test_a_scenario_file_may_set_a_pool_of_one_without_a_reserved_listener(tmp_path):
    path = tmp_path / "one.toml"
    path.write_text(textwrap.dedent(POOL_OF_ONE).format(settings="reserve_listener = false\npool_size = 1"))
    sc = load_scenario(path)
    assert sc.config == OutboxConfig(pool_size=1, reserve_listener=False)
    report = check_outbox(sc.run())
    assert report.valid and report.total["delivered"] > 0
    # the key order in the table does not matter
    path.write_text(textwrap.dedent(POOL_OF_ONE).format(settings="pool_size = 1\nreserve_listener = false"))
    assert load_scenario(path).config == OutboxConfig(pool_size=1, reserve_listener=False)


@pytest.mark.parametrize(
    "settings",
    ["pool_size = 1", "reserve_listener = true\npool_size = 1", "pool_size = 1\nreserve_listener = true"],
    ids=["default-reserve", "reserve-first", "reserve-last"],
)
def test_a_pool_of_one_with_a_reserved_listener_is_refused_naming_the_key(tmp_path, settings):
    path = tmp_path / "one.toml"
    path.write_text(textwrap.dedent(POOL_OF_ONE).format(settings=settings))
    with pytest.raises(ScenarioError, match=r"outbox\.pool_size: must be >= 2 with reserve_listener=True") as err:
        load_scenario(path)
    assert "reserve_listener:" not in str(err.value)


def test_a_bad_key_beside_a_pool_of_one_is_named_and_the_pool_too(tmp_path):
    path = tmp_path / "one.toml"
    path.write_text(textwrap.dedent(POOL_OF_ONE).format(settings='reserve_listener = "no"\npool_size = 1'))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "outbox.reserve_listener: must be True or False" in str(err.value)
    assert "outbox.pool_size: must be >= 2 with reserve_listener=True" in str(err.value)


def test_a_sweep_over_the_pool_size_without_a_reserved_listener_runs(tmp_path):
    import fanoutsim as fs

    path = tmp_path / "one.toml"
    path.write_text(textwrap.dedent(POOL_OF_ONE).format(settings="reserve_listener = false"))
    df = fs.sweep(path, grid={"pool_size": [1, 2]}, until=10.0, cache=None, progress=False)
    assert df["pool_size"].tolist() == [1, 2] and df["valid"].all()
