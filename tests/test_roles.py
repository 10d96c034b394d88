"""Roles, the mechanism: a design names its groups of loops and its roles; a
process runs its role's groups (``_start_loops`` asks ``_runs``), and only a
role with the workloads' group takes a workload. Over a DuckDB file here (one
process): what each role runs is the same over PostgreSQL, where
``tests/test_postgres_*roles*.py`` run them as separate processes."""

from __future__ import annotations

import time

import pytest

from fanoutsim.designs.reactor.config import SchedulerConfig
from fanoutsim.designs.reactor.realtime import Realtime
from fanoutsim.designs.reactor.roles import ROLES
from fanoutsim.kernel.runtime.roles import WORKLOADS, Roles, check_role

CONFIG = SchedulerConfig(reactor_poll_interval=0.02, executor_poll_interval=0.02)


def test_a_role_is_one_part_or_several_joined_by_commas():
    roles = Roles("toy", "everything", reader=(("read",), "reads"), writer=(("write", WORKLOADS), "writes"))
    assert list(roles) == ["all", "reader", "writer"]
    assert roles["all"].groups == {"read", "write", WORKLOADS}
    both = roles.check("reader,writer")
    assert both.name == "reader,writer" and both.groups == {"read", "write", WORKLOADS}
    assert roles.help == {"all": "everything", "reader": "reads", "writer": "writes"}
    with pytest.raises(ValueError, match=r"the toy design has no role 'nope'; its roles: all, reader, writer"):
        roles.check("reader,nope")
    for bad in ("all,reader", "reader,reader"):
        with pytest.raises(ValueError, match="name 'all' alone, and each part once"):
            roles.check(bad)
    with pytest.raises(TypeError, match="role must be a string"):
        check_role(roles.help, "toy", 3)


def _wait(until, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        time.sleep(0.02)
    return until()


def _runtime(path, role: str) -> Realtime:
    rt = Realtime(CONFIG, store=str(path), role=role)
    rt.runner.register_workflow("wf", duration=0.0)
    rt.runner.subscribe_workflow_to_reactor("r", "wf")
    return rt


def test_the_reactor_roles_run_their_groups_of_loops_and_only_all_and_writers_take_a_workload(tmp_path):
    db = tmp_path / "run.duckdb"
    rt = _runtime(db, "poller")
    try:
        assert rt.role == "poller" and rt.engine.poller.startswith("poller@")
        with pytest.raises(ValueError, match=r"role 'poller' runs no workload .*; 'all' or 'writers' do"):
            rt.add_workload("r", 10.0)
        rt.start()
        rt.fire("r", {})
        assert _wait(lambda: len(rt.executions()) == 1)  # dispatched by its poll loop ...
        time.sleep(0.2)
        assert set(rt.executions()["status"]) == {"pending"}  # ... and claimed by no executor here
    finally:
        rt.close()
    rt = _runtime(db, "executor,prune")  # the same file, another part of the runner
    try:
        assert rt.role == "executor,prune" and rt.engine.poller == "poller"
        rt.start()
        assert _wait(lambda: set(rt.executions()["status"]) == {"completed"})
        rt.fire("r", {})
        time.sleep(0.3)
        assert len(rt.executions()) == 1  # nobody polls here: the new firing is not dispatched
    finally:
        rt.close()
    with pytest.raises(
        ValueError, match="the reactor design has no role 'pollers'; its roles: all, poller, executor, prune, writers$"
    ):
        Realtime(CONFIG, store=str(tmp_path / "never.duckdb"), role="pollers")
    assert not (tmp_path / "never.duckdb").exists()  # refused before the store was opened
    assert set(ROLES.help) == {"all", "poller", "executor", "prune", "writers"}


def test_the_leases_roles_run_their_groups_of_loops_and_only_publishers_take_a_workload(tmp_path):
    from fanoutsim.designs.leases.realtime import LeaseRealtime
    from fanoutsim.designs.leases.roles import ROLES as LEASE_ROLES

    db = tmp_path / "leases.duckdb"
    rt = LeaseRealtime(store=str(db), role="recovery,retention")
    try:
        with pytest.raises(ValueError, match=r"role 'recovery,retention' runs no workload .*'all' or 'publishers' do"):
            rt.add_workload(10.0)
        rt.register_consumer("c", poll_interval=0.02)
        rt.start()
        rt.publish("p0", "event", {"n": 1})
        time.sleep(0.3)
        assert rt.status("c")["first_required"] is not None  # no client here: the event waits
        assert not rt._loop_running(("client", "c"))
    finally:
        rt.close()
    rt = LeaseRealtime(store=str(db), role="clients")  # the same file, another part of the node
    try:
        rt.register_consumer("c", poll_interval=0.02)
        rt.start()
        assert _wait(lambda: rt.status("c")["first_required"] is None)  # its client delivered it
    finally:
        rt.close()
    with pytest.raises(
        ValueError,
        match="the leases design has no role 'client'; its roles: all, clients, recovery, retention, publishers",
    ):
        LeaseRealtime(store=str(tmp_path / "never.duckdb"), role="client")
    assert not (tmp_path / "never.duckdb").exists()  # refused before the store was opened
    assert set(LEASE_ROLES.help) == {"all", "clients", "recovery", "retention", "publishers"}


def test_the_outbox_roles_run_their_groups_of_loops_and_only_writers_take_a_workload(tmp_path):
    from fanoutsim.designs.outbox.config import OutboxConfig
    from fanoutsim.designs.outbox.realtime import OutboxRealtime
    from fanoutsim.designs.outbox.roles import ROLES as OUTBOX_ROLES

    db, config = tmp_path / "outbox.duckdb", OutboxConfig(safety_poll_interval=0.05)
    rt = OutboxRealtime(config, store=str(db), role="dispatcher,retention")
    try:
        with pytest.raises(ValueError, match=r"role 'dispatcher,retention' runs no workload .*'all' or 'writers' do"):
            rt.add_workload(10.0)
        rt.register_consumer("c", duration=0.0)
        received = []
        rt.subscribe("page:p1", received.append)
        rt.start()
        seq = rt.commit("p1", "hello")
        assert _wait(lambda: [r["seq"] for r in received] == [seq])  # the bus published it ...
        time.sleep(0.2)
        assert rt.cursors().set_index("consumer")["seq"]["c"] == 0  # ... and no consumer loop ran here
        assert not rt._loop_running(("consumer", "c"))
    finally:
        rt.close()
    rt = OutboxRealtime(config, store=str(db), role="consumers")  # the same file, another part
    try:
        rt.register_consumer("c", duration=0.0)
        received = []
        rt.subscribe("page:p1", received.append)
        rt.start()
        assert _wait(lambda: rt.cursors().set_index("consumer")["seq"]["c"] == seq)  # its loop handled it
        rt.commit("p1", "again")
        time.sleep(0.2)
        assert received == []  # no bus here
    finally:
        rt.close()
    with pytest.raises(
        ValueError,
        match="the outbox design has no role 'consumer'; its roles: all, dispatcher, consumers, retention, writers",
    ):
        OutboxRealtime(store=str(tmp_path / "never.duckdb"), role="consumer")
    assert not (tmp_path / "never.duckdb").exists()  # refused before the store was opened
    assert set(OUTBOX_ROLES.help) == {"all", "dispatcher", "consumers", "retention", "writers"}
