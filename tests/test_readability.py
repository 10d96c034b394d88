"""What a reader sees: whole names in the checker's table, decoded payloads,
figures whose bars sit on their ticks and whose legends cover nothing."""
from __future__ import annotations

import json

import pandas as pd

import fanoutsim as fs
from fanoutsim.checker import format_check
from fanoutsim.cli import write_outputs


def long_names_sim():
    sim = fs.Simulation(seed=0)
    sim.runner.register_workflow("incident_response")
    sim.runner.register_workflow("audit")
    for tenant in ("acme_corporation_europe", "acme_corporation_americas"):
        sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "incident_response", tenant=tenant)
        sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "audit", tenant=tenant)
        sim.add_workload("pricing_reactor", 1.0, tenant=tenant)
    sim.run(60)
    return sim


def test_the_checker_table_keeps_whole_subscription_names():
    text = format_check(fs.check(long_names_sim()))
    for tenant in ("acme_corporation_europe", "acme_corporation_americas"):
        assert f"pricing_reactor->incident_response@{tenant} " in text
        assert f"pricing_reactor->audit@{tenant} " in text
    rows = [line for line in text.splitlines() if "pricing_reactor->" in line]
    header = next(line for line in text.splitlines() if line.strip().startswith("subscription"))
    # the columns still line up under the header
    valid_at = {line.rindex("yes") for line in rows}
    assert valid_at == {header.index("valid")}


def test_short_names_keep_the_old_layout():
    sim = fs.Simulation(seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    sim.fire("r", {"n": 1})
    sim.run(5)
    line = next(x for x in format_check(fs.check(sim)).splitlines() if x.strip().startswith("subscription"))
    assert line.index("expected") == 2 + 36 + 1  # a 36-wide name column, as before


def test_firings_have_a_decoded_sources_column(tmp_path):
    sim = fs.Simulation(seed=0)
    sim.fire("r", {"quote": {"price": 150, "region": "us-east"}, "raw": b"\x00\xff"})
    f = sim.firings()
    assert list(f.columns[:5]) == ["id", "reactor_name", "tenant_id", "payload", "sources"]
    assert isinstance(f["payload"].iloc[0], bytes)  # the stored bytes stay
    assert f["sources"].iloc[0] == {"quote": {"price": 150, "region": "us-east"}, "raw": "00ff"}
    duck = fs.Simulation(seed=0, store="duckdb")
    duck.fire("r", {"quote": {"price": 150}})
    assert duck.firings()["sources"].iloc[0] == {"quote": {"price": 150}}
    # in the Parquet file the decoded column is JSON text
    sim.run(2)
    write_outputs(sim, {"scenario": "t"}, tmp_path)
    table = pd.read_parquet(tmp_path / "firings.parquet")
    assert json.loads(table["sources"].iloc[0])["quote"]["price"] == 150
