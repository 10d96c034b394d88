"""Scenario files name only what they declare, and every duration is at least
the clock's unit: a fault's reactor must be one the file's subscriptions or
workloads name, a clock_skew host has only an offset and a drift, and a
duration below 1 µs (which would hang the clock: an interval of 1e-300 s never
moves it) is refused naming the unit — in a file and through the API alike."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fanoutsim as fs
from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases.simulation import LeaseSimulation
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.kernel.validate import Invalid, Seconds, SecondsRange
from fanoutsim.scenario import ScenarioError, load_scenario

REACTOR = """
[run]
until = 10.0

[[workflows]]
name = "wf"

[[subscriptions]]
reactor = "pricing"
workflow = "wf"

[[workload]]
reactor = "quotes"
rate = 1.0
"""

STRICT = "must be a finite number of seconds >= 1e-06 (1 µs, the clock's unit)"
ZERO_OR = "must be 0 or at least 1e-06 seconds (1 µs, the clock's unit)"


def problems(tmp_path, text: str) -> list[tuple[str, str]]:
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value.problems


def test_a_late_commit_must_name_a_reactor_the_file_names(tmp_path):
    found = problems(
        tmp_path, REACTOR + '[[faults]]\nkind = "late_commit"\nprobability = 0.5\ndelay = 1.0\nreactor = "nope"\n'
    )
    assert found == [
        (
            "faults[0].reactor",
            "'nope' is not a reactor of this scenario; the reactors its "
            "[[subscriptions]] and [[workload]] name: pricing, quotes",
        )
    ]
    ok = tmp_path / "ok.toml"
    ok.write_text(REACTOR + '[[faults]]\nkind = "late_commit"\nprobability = 0.5\ndelay = 1.0\nreactor = "quotes"\n')
    assert load_scenario(ok).faults is not None


def test_a_clock_skew_host_has_only_an_offset_and_a_drift(tmp_path):
    found = problems(
        tmp_path, REACTOR + '[[faults]]\nkind = "clock_skew"\nhosts = [{offset = 1.0, drift = 0.001}, {offest = 2.0}]\n'
    )
    assert found == [("faults[0].hosts[1].offest", "unknown key; allowed: offset, drift")]


@pytest.mark.parametrize("section, key", [("config", "reactor_poll_interval"), ("config", "executor_poll_interval")])
def test_a_reactor_interval_below_the_clock_unit_is_refused(tmp_path, section, key):
    found = problems(tmp_path, f"[{section}]\n{key} = 1e-300\n" + REACTOR)
    assert found == [(f"{section}.{key}", f"{STRICT}, got 1e-300")]


def test_an_outbox_and_a_leases_interval_below_the_clock_unit_are_refused(tmp_path):
    found = problems(
        tmp_path,
        'design = "outbox"\n[run]\nuntil = 5.0\n[outbox]\nsafety_poll_interval = 1e-300\n'
        '[[consumers]]\nname = "c"\n[[workload]]\nrate = 1.0\n',
    )
    assert found == [("outbox.safety_poll_interval", f"{STRICT}, got 1e-300")]
    found = problems(
        tmp_path,
        'design = "leases"\n[run]\nuntil = 5.0\n[leases]\nrecovery_interval = 1e-300\n'
        '[[consumers]]\nname = "c"\npoll_interval = 1e-9\nnack_delay = 1e-9\n'
        "[[workload]]\nrate = 1.0\n",
    )
    assert sorted(found) == [
        ("consumers[0].nack_delay", f"{ZERO_OR}, got 1e-09"),
        ("consumers[0].poll_interval", f"{STRICT}, got 1e-09"),
        ("leases.recovery_interval", f"{STRICT}, got 1e-300"),
    ]


@settings(max_examples=100, deadline=None)
@given(tiny=st.floats(min_value=5e-324, max_value=9.99e-7))
def test_every_duration_below_the_unit_is_refused_and_the_unit_itself_taken(tiny):
    for positive in (Seconds(strict=True), Seconds(), SecondsRange(0, 3600)):
        with pytest.raises(Invalid, match=r"1e-06.*\(1 µs, the clock's unit\)"):
            positive.check(tiny)
        assert positive.check(1e-6) == 1e-6
    assert Seconds().check(0) == 0.0 and SecondsRange(0, 3600).check(0) == 0.0  # none at all: allowed
    assert Seconds(strict=True, unit="times").check(tiny) == tiny  # a speed is no duration
    for make in (
        lambda: fs.SchedulerConfig(reactor_poll_interval=tiny),
        lambda: fs.SchedulerConfig(watermark_settle=tiny),
        lambda: OutboxConfig(retention_interval=tiny),
        lambda: LeaseConfig(recovery_interval=tiny),
    ):
        with pytest.raises(ValueError, match=r"1 µs, the clock's unit"):
            make()


def test_the_api_refuses_an_interval_below_the_unit_before_anything_runs():
    sim = LeaseSimulation(seed=0)
    with pytest.raises(ValueError, match=r"poll_interval must be a finite number of seconds >= 1e-06"):
        sim.register_consumer("c", poll_interval=1e-300)
    assert sim.consumers().empty
