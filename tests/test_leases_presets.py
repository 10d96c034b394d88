"""Issue 39's presets: ``LeaseConfig.preset("nats-jetstream-2.15")`` and
``("redis-streams-6.2")``, each value with its source, the measured costs
(``broker_costs.json``, written by the comparison harness) and the presets'
scenario files. The rules themselves: ``test_leases_brokers.py``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from presettools import generated_scenario

from fanoutsim.designs.leases import LeaseConfig
from fanoutsim.designs.leases import presets as mod
from fanoutsim.designs.leases.checker import check
from fanoutsim.designs.leases.config import OPEN_IN_FLIGHT_RANGE
from fanoutsim.designs.leases.presets import PRESETS, Measured, preset, scenario_toml
from fanoutsim.kernel.dist import Dist
from fanoutsim.scenario import json_schema

ROOT = Path(__file__).resolve().parents[1]
PRESET_SCENARIOS = ROOT / "fanoutsim" / "examples" / "presets"
COSTS = ("deliver_cost", "ack_cost")


@pytest.fixture
def no_costs(monkeypatch, tmp_path):
    """The presets as before any measurement: no broker_costs.json."""
    monkeypatch.setattr(mod, "BROKER_COSTS_FILE", tmp_path / "none.json")
    mod.broker_costs.cache_clear()
    yield
    mod.broker_costs.cache_clear()


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """A broker_costs.json in the harness's format."""
    path = tmp_path / "broker_costs.json"
    brokers = {
        b: {"version": v, "messages": 3, "publish_to_delivered_s": [0.001, 0.002, 0.003], "ack_round_trip_s": [0.0005]}
        for b, v in (("nats-jetstream", "2.15.1"), ("redis-streams", "6.2.14"))
    }
    path.write_text(json.dumps({"measured": "2026-01-01T00:00Z", "method": "test", "brokers": brokers}))
    monkeypatch.setattr(mod, "BROKER_COSTS_FILE", path)
    mod.broker_costs.cache_clear()
    yield
    mod.broker_costs.cache_clear()


@pytest.mark.parametrize("name", PRESETS)
def test_every_value_of_a_preset_says_where_it_comes_from(name):
    p = preset(name)
    said = dict(p.sources)
    assert set(dict(p.options)) | set(dict(p.client)) - {"batch_limit", "poll_interval"} | set(COSTS) <= set(said)
    for key, source in said.items():
        files = ("consumer.go", "t_stream.c", "nats.py", "redis", "broker_costs.json")
        assert any(f in source for f in files), (key, source)


def test_a_preset_sets_the_brokers_rules_and_takes_overrides(no_costs):
    js = LeaseConfig.preset("nats-jetstream-2.15")
    assert (js.lease_seconds, js.in_flight_limit, js.max_deliver, js.late_ack) == (30.0, 1000, -1, "honour")
    assert (js.max_deliver_rule, js.at_max_deliver, js.expiry_timer) == ("deliveries", "advisory", "deadline")
    assert js.deliver_cost is None and js.ack_cost is None  # not measured: no cost, no draw
    rd = LeaseConfig.preset("redis-streams-6.2", lease_seconds=1.0)
    assert rd.in_flight_limit == OPEN_IN_FLIGHT_RANGE[1]  # no bound on a PEL: the model's cap
    assert (rd.lease_expiry, rd.late_ack, rd.lease_seconds, rd.retention_policy) == ("claim", "honour", 1.0, "limits")
    with pytest.raises(ValueError, match="preset must be one of 'nats-jetstream-2.15', 'redis-streams-6.2'"):
        LeaseConfig.preset("kafka")
    with pytest.raises(ValueError, match="late_ack must be one of"):
        LeaseConfig.preset("redis-streams-6.2", late_ack="maybe")


def test_the_measured_costs_are_empirical_laws_of_the_files_samples(measured):
    for name in PRESETS:
        cfg = LeaseConfig.preset(name)
        assert cfg.deliver_cost == Dist.empirical([0.001, 0.002, 0.003])
        assert cfg.ack_cost == Dist.empirical([0.0005])
    mine = Measured.of([0.01], [0.02])
    assert preset("redis-streams-6.2").config_values(mine)["ack_cost"] == Dist.empirical([0.02])
    assert "costs measured 2026-01-01T00:00Z, 3 messages" in scenario_toml("nats-jetstream-2.15")


def test_without_a_measurement_the_scenario_says_which_command_writes_one(no_costs):
    assert preset("nats-jetstream-2.15").measured() is None
    assert f"costs not measured yet: {mod.MEASURE_COMMAND} writes them" in scenario_toml("nats-jetstream-2.15")


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_scenario_file_is_the_generated_one_and_sets_the_preset(name):
    sc = generated_scenario(PRESET_SCENARIOS / f"leases-{name}.toml", scenario_toml(name), "leases")
    assert sc.config == LeaseConfig.preset(name)
    (c,) = sc.consumers
    assert (c.lease_seconds, c.batch_limit, c.pull_mode) == (1.0, 50, "wait")
    assert c.in_flight_limit == sc.config.in_flight_limit  # the [leases] default
    sim = sc.run(until=60.0)
    r = check(sim)
    assert r.valid and r.total["delivered"] > 200 and r.total["duplicates"] > 0


def test_the_json_schema_takes_the_brokers_ranges_only_under_open_limits():
    doc = {
        "design": "leases",
        "run": {"until": 1.0},
        "consumers": [{"name": "c", "lease_seconds": 1.0, "in_flight_limit": 1000}],
    }
    validator = jsonschema.Draft7Validator(json_schema("leases"))
    assert list(validator.iter_errors(doc))  # RiffDB's ranges
    assert not list(validator.iter_errors({**doc, "leases": {"limits": "open"}}))
    assert list(validator.iter_errors({**doc, "leases": {"limits": "open", "in_flight_limit": 100_001}}))
