"""The leases design's Python API: a committed hand ack is the caller's delivery
whatever happens next, and bad arguments are refused when they are given —
naming the argument, as a scenario file would, with nothing half made."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
import tomllib

import pytest

import fanoutsim as fs
from fanoutsim.designs import leases
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.realtime import LeaseRealtime
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.faults import CrashAtPoint, FaultPlan
from fanoutsim.scenario import ScenarioError, parse_scenario


def crashing_at(point: str) -> LeaseSimulation:
    """A hand-driven consumer ``h`` with two events of one partition leased,
    and the node crashing (for 1 s) the first time it passes ``point``."""
    sim = LeaseSimulation(seed=0, faults=FaultPlan([CrashAtPoint(point, 1, downtime=1.0)]))
    sim.register_consumer("h", client=False, lease_seconds=5)
    sim.publish("p", "k", 1)
    sim.publish("p", "k", 2)
    return sim


def delivered_by_caller(sim) -> list[str]:
    t = sim.trace()
    return t.loc[(t["kind"] == "delivered") & (t["actor"] == "caller"), "event_id"].tolist()


# -- 1. a hand ack that committed is the caller's delivery ------------------------------


def test_a_hand_ack_that_committed_before_a_crash_is_still_the_callers_delivery():
    sim = crashing_at("ack.after_commit")
    first, second = sim.consume("h")
    assert sim.ack("h", first.event_id, first.token, first.incarnation) is None  # the node died after the commit
    sim.run(until=2)
    assert sim.status("h")["checkpoints"] == {"p": 1}  # the ack is in the table
    assert sim.ack("h", second.event_id, second.token, second.incarnation) == "acked"
    assert delivered_by_caller(sim) == ["1:0", "2:0"]
    report = fs.check_leases(sim)
    assert report.valid, report.total
    assert report.total["delivered"] == 2 and report.total["lost"] == 0 and report.total["duplicates"] == 0


def test_a_redelivery_after_a_crashed_hand_ack_is_a_duplicate_with_its_cause():
    sim = crashing_at("ack.after_commit")
    first, _ = sim.consume("h")
    sim.ack("h", first.event_id, first.token, first.incarnation)  # committed, then the crash
    sim.run(until=8)  # the second event's lease, held by nobody since the crash, expires
    assert sim.seek("h", 0) == "applied"  # back to the beginning: 1:0 comes again
    for lease in sim.consume("h"):
        assert sim.ack("h", lease.event_id, lease.token, lease.incarnation) == "acked"
    report = fs.check_leases(sim)
    assert report.valid, report.total
    assert report.duplicates[["event_id", "cause"]].values.tolist() == [["1:0", "seek"]]
    assert report.total["delivered"] == 2 and report.total["lost"] == 0


def test_an_ack_refused_or_rolled_back_is_no_delivery():
    sim = crashing_at("ack.before_commit")
    first, _ = sim.consume("h")
    assert sim.ack("h", first.event_id, first.token, first.incarnation) is None  # rolled back
    assert delivered_by_caller(sim) == []
    sim.run(until=2)
    assert sim.ack("h", first.event_id, "not-the-token", first.incarnation) == "wrong_token"
    assert delivered_by_caller(sim) == []


@pytest.mark.parametrize(
    "point",
    [
        "ack.before_commit",
        "ack.after_commit",
        "nack.before_commit",
        "nack.after_commit",
        "lease.before_commit",
        "lease.after_commit",
    ],
)
def test_every_hand_path_through_a_crash_checks_valid(point):
    """The caller nacks each first attempt (on a nack point) or acks; after the
    crash it pulls again until everything is done."""
    sim = crashing_at(point)
    for _ in range(30):
        for lease in (sim.consume("h") if sim.up else None) or ():
            if not sim.up:
                break
            if point.startswith("nack") and lease.attempt == 1:
                sim.nack("h", lease.event_id, lease.token, lease.incarnation)
            else:
                sim.ack("h", lease.event_id, lease.token, lease.incarnation)
        sim.run(until=sim.now + 1)
    assert any(sim.trace()["kind"] == "crashed")
    report = fs.check_leases(sim)
    assert report.valid, report.total
    assert report.total["delivered"] == 2 and report.total["lost"] == 0 and report.total["pending"] == 0


# -- 2. register_consumer refuses what a scenario file refuses, at once ----------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"nack_delay": 5000, "fail": 1.0},
            r"consumer 'c': nack_delay must be 0 through 3600 seconds \(leases.max_retry_delay\), got 5000",
        ),
        ({"nack_delay": -1}, "nack_delay must be 0 through 3600 seconds"),
        ({"nack_delay": math.nan}, "nack_delay must be 0 through 3600 seconds"),
        (
            {"poll_interval": math.nan},
            "poll_interval must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got nan",
        ),
        (
            {"poll_interval": math.inf},
            "poll_interval must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got inf",
        ),
        ({"poll_interval": 0}, "poll_interval must be a finite number of seconds >= 1e-06"),
        ({"duration": math.nan}, "duration must be a finite number of seconds >= 0, got nan"),
        ({"duration": math.inf}, "duration must be a finite number of seconds >= 0, got inf"),
        ({"batch_limit": 9}, "batch_limit must be an integer from 1 through 8"),
    ],
)
def test_register_consumer_refuses_bad_arguments_and_registers_nothing(kwargs, message):
    sim = LeaseSimulation(seed=0)
    with pytest.raises(ValueError, match=message):
        sim.register_consumer("c", **kwargs)
    assert sim.clients == {}
    assert sim.table_rows("lease_consumers") == []
    assert "consumer_start" not in sim.trace()["kind"].tolist()
    sim.publish("p", "k")
    sim.run(until=5)  # nothing left behind to fail later


def test_nack_delay_is_bounded_by_the_configs_max_retry_delay():
    sim = LeaseSimulation(LeaseConfig(max_retry_delay=10), seed=0)
    with pytest.raises(ValueError, match=r"nack_delay must be 0 through 10 seconds .*got 11"):
        sim.register_consumer("c", nack_delay=11)
    assert sim.register_consumer("c", nack_delay=10)["consumer"] == "c"


def test_the_api_and_a_scenario_file_refuse_a_nack_delay_in_the_same_words():
    data = tomllib.loads('design = "leases"\n[run]\nuntil = 10.0\n[[consumers]]\nname = "c"\nnack_delay = 5000\n')
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    with pytest.raises(ValueError) as api:
        LeaseSimulation(seed=0).register_consumer("c", nack_delay=5000)
    words = "must be 0 through 3600 seconds (leases.max_retry_delay), got 5000"
    assert f"consumers[0].nack_delay: {words}" in str(info.value)
    assert str(api.value) == f"consumer 'c': nack_delay {words}"


def test_the_wall_clock_runtime_refuses_them_too(tmp_path):
    rt = LeaseRealtime(store=str(tmp_path / "v.duckdb"))
    try:
        with pytest.raises(ValueError, match="nack_delay must be 0 through 3600 seconds"):
            rt.register_consumer("c", nack_delay=5000)
        with pytest.raises(ValueError, match="poll_interval must be a finite number"):
            rt.register_consumer("c", poll_interval=math.nan)
        with pytest.raises(ValueError, match="start must be a finite number of seconds"):
            rt.add_workload(1.0, start="5")
        assert rt.consumers().empty and rt.clients == {}
    finally:
        rt.close()


# -- 3. registering an existing consumer again ---------------------------------------------


@pytest.fixture(params=["virtual", "wall"])
def runtime(request):
    """A lease runtime of either clock over a memory store (the wall clock's not started)."""
    rt = LeaseSimulation(seed=0) if request.param == "virtual" else LeaseRealtime(store="memory")
    yield rt
    if request.param == "wall":
        rt.close()


def test_registering_an_existing_consumer_with_other_settings_is_refused_and_changes_nothing(runtime):
    sim = runtime
    row = sim.register_consumer("c")
    spec = sim.clients["c"]
    with pytest.raises(ValueError, match=r"consumer 'c' exists with other settings: batch_limit=2 \(it has 4\)"):
        sim.register_consumer("c", batch_limit=2)
    with pytest.raises(
        ValueError,
        match=r"lease_seconds=30.0 \(it has 60.0\); poll_interval=1.0 "
        r"\(its client has 0.5\)",
    ):
        sim.register_consumer("c", lease_seconds=30, poll_interval=1.0)
    with pytest.raises(ValueError, match=r"client=False \(it has a client\)"):
        sim.register_consumer("c", client=False)
    assert sim.table_rows("lease_consumers") == [row] and sim.clients["c"] is spec


def test_registering_an_existing_consumer_with_its_settings_is_a_no_op(runtime):
    sim = runtime
    row = sim.register_consumer("c", batch_limit=2, lease_seconds=30)
    assert sim.register_consumer("c", batch_limit=2, lease_seconds=30.0) == row
    assert sim.trace()["kind"].tolist().count("consumer_start") == 1


def test_a_consumer_identity_registers_on_either_clock(runtime):
    from fanoutsim.designs.leases.identity import ConsumerIdentity, module_hash

    ident = ConsumerIdentity(module_hash("v1"), "TicketEvents", "indexer")
    row = runtime.register_consumer(ident, client=False)
    assert row["consumer"] == ident.key and runtime.status(ident)["consumer"] == ident.key


def test_a_hand_ack_counts_as_a_delivery_in_the_metrics(runtime):
    runtime.register_consumer("h", client=False)
    runtime.publish("p")
    (x,) = runtime.consume("h")
    assert runtime.ack("h", x.event_id, x.token, x.incarnation) == "acked"
    m = runtime.metrics()
    assert m['fanoutsim_lease_delivered_total{consumer="h"}'] == 1 == m['fanoutsim_lease_acked_total{consumer="h"}']


def test_a_client_can_be_attached_to_a_consumer_driven_by_hand():
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False, batch_limit=8)
    sim.publish("p", "k")
    sim.register_consumer("c", batch_limit=8, duration=0.01)
    sim.run(until=2)
    assert sim.status("c")["checkpoints"] == {"p": 1}


def test_a_consumer_retired_and_registered_again_takes_the_new_settings():
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", duration=0.01)
    sim.run(until=1)
    assert sim.retire("c") == "applied"
    row = sim.register_consumer("c", batch_limit=2, duration=0.02, poll_interval=0.25)
    assert row["batch_limit"] == 2
    assert sim.clients["c"].duration == 0.02 and sim.clients["c"].poll_interval == 0.25
    sim.publish("p", "k")
    sim.run(until=3)
    assert sim.status("c")["checkpoints"] == {"p": 1}


# -- 4. publish refuses a payload no JSON reader takes back ----------------------------------


@pytest.mark.parametrize("payload", [math.nan, math.inf, -math.inf, {"x": [1, math.nan]}])
def test_publish_refuses_nan_and_infinity_in_a_payload(payload):
    sim = LeaseSimulation(seed=0)
    with pytest.raises(TypeError, match=r"events\[0\] payload: .*cannot be JSON-encoded"):
        sim.publish("p", "k", payload)
    with pytest.raises(TypeError, match=r"events\[1\] payload"):
        sim.publish_many([("p", "k", 1), ("p", "k", payload)])
    assert sim.table_rows("events") == []
    assert sim.publish("p", "k", {"x": 1.5}) == "1:0"  # no number was used up


# -- 5. administer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"every": 0}, "every must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got 0"),
        ({"every": -1}, "every must be a finite number of seconds >= 1e-06"),
        (
            {"every": math.nan},
            "every must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got nan",
        ),
        (
            {"every": math.inf},
            "every must be a finite number of seconds >= 1e-06 \\(1 µs, the clock's unit\\), got inf",
        ),
        ({"at": math.nan}, "at must be a finite number of seconds since the start >= 0, got nan"),
        ({"at": math.inf}, "at must be a finite number of seconds since the start >= 0, got inf"),
        ({"at": "5"}, "at must be a finite number of seconds since the start"),
    ],
)
def test_administer_refuses_a_bad_time_or_retry_interval(kwargs, message):
    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False)
    sim.publish("p", "k")
    assert len(sim.consume("c")) == 1  # an outstanding lease: retire would be retried
    with pytest.raises(ValueError, match=message):
        sim.administer("retire", "c", **kwargs)
    sim.run(until=1)
    assert sim.status("c") is not None  # nothing was started


# -- 6. the docstrings' references resolve ----------------------------------------------------

_ROLE = re.compile(r":(?:class|mod|func|meth|data|attr|exc):`~?([\w.]+)`")


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            if not hasattr(obj, p):
                return False
            obj = getattr(obj, p)
        return True
    return False


def test_the_leases_docstrings_point_at_modules_that_exist():
    broken = []
    modules = [leases] + [
        importlib.import_module(f"{leases.__name__}.{m.name}") for m in pkgutil.iter_modules(leases.__path__)
    ]
    for mod in modules:
        for target in _ROLE.findall(inspect.getsource(mod)):
            if target.startswith("."):  # relative: to the package or to the module
                tries = [leases.__name__ + target, mod.__name__ + target]
            elif target.startswith("fanoutsim."):
                tries = [target]
            else:
                continue
            if not any(_resolves(t) for t in tries):
                broken.append((mod.__name__, target))
    assert broken == []


# -- 7. add_workload -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"start": "5"}, "start must be a finite number of seconds >= 0, got '5'"),
        ({"start": math.nan}, "start must be a finite number of seconds >= 0, got nan"),
        ({"start": math.inf}, "start must be a finite number of seconds >= 0, got inf"),
        ({"stop": math.nan}, "stop must be a finite number of seconds >= 0, got nan"),
        ({"stop": "9"}, "stop must be a finite number of seconds"),
        ({"start": 5, "stop": 5}, r"stop must be after start \(5\), got 5"),
        ({"kind": ""}, "kind must be a non-empty string"),
    ],
)
def test_add_workload_refuses_a_bad_window_and_schedules_nothing(kwargs, message):
    sim = LeaseSimulation(seed=0)
    with pytest.raises(ValueError, match=message):
        sim.add_workload(5.0, **kwargs)
    sim.add_workload(5.0, start=1.0, stop=3.0)  # drawn as the first workload: the refused one left no trace
    sim.run(until=20)
    fresh = LeaseSimulation(seed=0)
    fresh.add_workload(5.0, start=1.0, stop=3.0)
    fresh.run(until=20)
    assert len(sim.table_rows("events")) > 0
    assert sim.table_rows("events") == fresh.table_rows("events")


def test_add_workload_still_refuses_an_infinite_rate():
    with pytest.raises(ValueError, match="rate must be events per second > 0, got inf"):
        LeaseSimulation(seed=0).add_workload(math.inf)
