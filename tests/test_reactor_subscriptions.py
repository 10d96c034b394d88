"""Subscribe, unsubscribe, list: the runner API of seed 001."""

from __future__ import annotations

import pytest

import fanoutsim as fs


def test_subscribe_upserts_on_the_triple_and_returns_the_same_id(make_sim):
    sim = make_sim()
    r = sim.runner
    a = r.subscribe_workflow_to_reactor("pricing_reactor", "incident_response", tenant="acme")
    b = r.subscribe_workflow_to_reactor(
        "pricing_reactor", "incident_response", tenant="acme", when="payload.quote.price > 100"
    )
    assert a == b
    subs = r.list_reactor_subscriptions(tenant="acme")
    assert len(subs) == 1 and subs[0]["predicate"] == "payload.quote.price > 100"
    r.subscribe_workflow_to_reactor("pricing_reactor", "incident_response", tenant="acme", when=None)
    assert r.list_reactor_subscriptions(tenant="acme")[0]["predicate"] is None
    # another tenant is another subscription
    c = r.subscribe_workflow_to_reactor("pricing_reactor", "incident_response", tenant="globex")
    assert c != a
    assert len(r.list_reactor_subscriptions(tenant=None)) == 2


def test_tenant_defaults_to_public_and_listing_has_every_column(make_sim):
    sim = make_sim()
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    (sub,) = sim.runner.list_reactor_subscriptions()
    assert sub["tenant_id"] == "public"
    assert set(sub) == {
        "id",
        "reactor_name",
        "workflow_name",
        "tenant_id",
        "enabled",
        "predicate",
        "last_seen_fired_at",
        "predicate_error_count",
        "predicate_error_firing_id",
        "last_predicate_error",
        "predicate_degraded",
        "created_at",
        "updated_at",
    }
    assert sub["last_seen_fired_at"] is None and sub["enabled"] is True


def test_when_is_keyword_only(make_sim):
    with pytest.raises(TypeError):
        make_sim().runner.subscribe_workflow_to_reactor("r", "wf", "public", "payload.x > 1")


def test_unsubscribe_returns_whether_a_row_was_deleted(make_sim):
    r = make_sim().runner
    r.subscribe_workflow_to_reactor("r", "wf", tenant="acme")
    assert r.unsubscribe_workflow_from_reactor("r", "wf", tenant="acme") is True
    assert r.unsubscribe_workflow_from_reactor("r", "wf", tenant="acme") is False
    assert r.list_reactor_subscriptions(tenant="acme") == []


@pytest.mark.parametrize(
    "expr, needle",
    [
        ("payload.quote.price >", "not valid CEL"),
        ("price > 100", "'price'"),
        ("payload.items.exists(x, x > limit)", "'limit'"),
        ("", "non-empty"),
    ],
)
def test_bad_predicates_are_rejected_and_write_nothing(make_sim, expr, needle):
    sim = make_sim()
    with pytest.raises(fs.InvalidPredicate) as info:
        sim.runner.subscribe_workflow_to_reactor("r", "wf", when=expr)
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)
    assert sim.subscriptions().empty


def test_unknown_variable_error_lists_the_allowed_ones(make_sim):
    with pytest.raises(fs.InvalidPredicate, match="allowed variables: payload, reactor, tenant"):
        make_sim().runner.subscribe_workflow_to_reactor("r", "wf", when="tenantt == 'acme'")


def test_bad_predicate_on_existing_subscription_keeps_the_old_one(make_sim):
    r = make_sim().runner
    r.subscribe_workflow_to_reactor("r", "wf", when="payload.n > 1")
    with pytest.raises(fs.InvalidPredicate):
        r.subscribe_workflow_to_reactor("r", "wf", when="payload.n >")
    assert r.list_reactor_subscriptions()[0]["predicate"] == "payload.n > 1"


def test_comprehension_variables_are_bound_only_in_their_macro(make_sim):
    r = make_sim().runner
    r.subscribe_workflow_to_reactor("r", "a", when="payload.items.exists(x, x > 2)")
    r.subscribe_workflow_to_reactor("r", "b", when="payload.items.all(x, payload.tags.exists(y, y == x))")
    with pytest.raises(fs.InvalidPredicate, match="'x'"):
        r.subscribe_workflow_to_reactor("r", "c", when="payload.items.exists(x, x > 2) && x > 1")


@pytest.mark.parametrize(
    "reactor, workflow, tenant",
    [
        ("", "wf", "public"),
        ("r", "", "public"),
        ("r", "wf", ""),
        (None, "wf", "public"),
        ("r", 3, "public"),
    ],
)
def test_empty_or_non_string_names_are_rejected(make_sim, reactor, workflow, tenant):
    sim = make_sim()
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        sim.runner.subscribe_workflow_to_reactor(reactor, workflow, tenant=tenant)
    assert sim.subscriptions().empty


def test_a_disabled_subscription_is_not_polled(make_sim):
    sim = make_sim()
    sim.runner.subscribe_workflow_to_reactor("r", "wf")
    assert sim.runner.set_subscription_enabled("r", "wf", enabled=False)
    sim.fire("r", {"n": 1})
    sim.run(until=3)
    assert sim.executions().empty
    sim.runner.set_subscription_enabled("r", "wf", enabled=True)
    sim.run(until=5)
    assert len(sim.executions()) == 1


def test_one_rule_for_undeclared_workflows_in_code_and_in_scenario_files():
    """Once any workflow is declared, a subscription must name one, in the API as
    in a scenario file, with the same message; with none declared, any name is an
    instant no-op."""
    import tomllib

    import pytest

    import fanoutsim as fs
    from fanoutsim.designs.reactor.scenario import ScenarioError, parse_scenario

    sim = fs.Simulation()
    sim.runner.subscribe_workflow_to_reactor("r", "anything")  # nothing declared: allowed
    sim.runner.register_workflow("audit")
    with pytest.raises(ValueError) as api:
        sim.runner.subscribe_workflow_to_reactor("r", "audt")
    assert len(sim.subscriptions()) == 1  # nothing written
    text = '[[workflows]]\nname = "audit"\n[[subscriptions]]\nreactor = "r"\nworkflow = "audt"\n'
    with pytest.raises(ScenarioError) as scenario:
        parse_scenario(tomllib.loads(text), source="s.toml")
    rule = "a subscription must name a declared workflow once any are"
    for message in (str(api.value), str(scenario.value)):
        assert "workflow 'audt' is not declared" in message and rule in message and "declared: audit" in message
    assert "register_workflow" in str(api.value) and "[[workflows]]" in str(scenario.value)
