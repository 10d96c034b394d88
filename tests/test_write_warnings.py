"""A write that nothing reads succeeds, and says so: a firing of a tenant or a
reactor no subscription has, a commit to an outbox with no consumer, a
publish to a log with no durable consumer. The answer carries a ``warning``
(the HTTP ``/write`` too: tests/test_serve_observe.py); ``fire`` and ``write``
print it on stderr, naming what does subscribe, and exit 0 with stdout the
bare answer."""

from __future__ import annotations

import json

import pytest
from clitools import cli

from fanoutsim import designs
from fanoutsim.cli import main

PUBLIC_ONLY = """
name = "public-only"
[run]
until = 2.0
[[workflows]]
name = "audit"
duration = 0.01
[[subscriptions]]
reactor = "pricing_reactor"
workflow = "audit"
tenant = "public"
"""


@pytest.fixture(scope="module")
def public_only(tmp_path_factory):
    """A reactor file whose one subscription is in tenant public."""
    folder = tmp_path_factory.mktemp("warn")
    (folder / "s.toml").write_text(PUBLIC_ONLY)
    db = folder / "run.duckdb"
    assert main(["run", str(folder / "s.toml"), "--store", str(db), "--out", str(folder / "out")]) == 0
    return db


def test_fire_into_a_tenant_without_subscriptions_warns_and_names_the_tenants_that_have_them(public_only):
    done = cli("fire", "--store", str(public_only), "--reactor", "pricing_reactor", "--tenant", "acme")
    assert done.returncode == 0 and len(done.stdout.strip()) == 36  # fired all the same; stdout the bare id
    assert (
        "fanoutsim: warning: no subscription of reactor 'pricing_reactor' in tenant 'acme'; "
        "subscriptions exist in tenant(s): public" in done.stderr
    )


def test_fire_of_a_reactor_nobody_subscribes_names_the_reactors_that_are(public_only):
    done = cli("fire", "--store", str(public_only), "--reactor", "pricing", "--tenant", "public")
    assert done.returncode == 0
    assert "no subscription of reactor 'pricing' in any tenant; subscribed reactor(s): pricing_reactor" in done.stderr


def test_fire_that_a_subscription_reads_says_nothing_of_it(public_only):
    done = cli("fire", "--store", str(public_only), "--reactor", "pricing_reactor")  # tenant public, the default
    assert done.returncode == 0 and "warning" not in done.stderr


def test_write_keeps_stdout_the_answer_and_warns_on_stderr(public_only):
    done = cli("write", "--store", str(public_only), "reactor=pricing_reactor", "tenant=globex")
    assert done.returncode == 0
    assert set(json.loads(done.stdout)) == {"firing"}
    assert "warning: no subscription of reactor 'pricing_reactor' in tenant 'globex'" in done.stderr


@pytest.mark.parametrize(
    "name, request_, reader",
    [("outbox", {"page": "p1"}, "no consumer has a cursor"), ("leases", {"partition": "p0"}, "no durable consumer")],
)
def test_a_log_nobody_reads_warns_until_a_consumer_registers(tmp_path, name, request_, reader):
    design = designs.get(name)
    rt = design.realtime(None, str(tmp_path / f"{name}.duckdb"))
    try:
        first = design.write(rt, request_)
        assert reader in first["warning"] and str(first.get("seq", first.get("event"))) in first["warning"]
        rt.register_consumer("c")
        assert "warning" not in design.write(rt, request_)
    finally:
        rt.close()
