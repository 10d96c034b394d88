"""The types the checked modules declare, held to what runs.

``make lint`` runs mypy --strict over the modules pyproject's ``[tool.mypy]``
lists; mypy trusts the rows' TypedDicts, so these tests check that the
TypedDicts say what the tables hold: each names its table's columns, in order,
and every row a run leaves in each store has values of the declared types.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import typing
from pathlib import Path

import pytest

import fanoutsim as fs
from fanoutsim.designs.leases.tables import port as leases_port
from fanoutsim.designs.outbox.tables import port as outbox_port
from fanoutsim.designs.reactor.tables import port as reactor_port

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "fanoutsim" / "examples"
ROWS = {
    "reactor_firings": reactor_port.FiringRow,
    "reactor_subscriptions": reactor_port.SubscriptionRow,
    "workflow_executions": reactor_port.ExecutionRow,
    "pages": outbox_port.PageRow,
    "outbox": outbox_port.OutboxRow,
    "cursors": outbox_port.CursorRow,
    "parked": outbox_port.ParkedRow,
    "deferred": outbox_port.DeferredRow,
    "events": leases_port.EventRow,
    "lease_consumers": leases_port.LeaseConsumerRow,
    "checkpoints": leases_port.CheckpointRow,
    "resolutions": leases_port.ResolutionRow,
    "leases": leases_port.LeaseRow,
    "retries": leases_port.RetryRow,
    "dead_letters": leases_port.DeadLetterRow,
    "history": leases_port.HistoryRow,
}
TABLES = {**reactor_port.TABLES, **outbox_port.TABLES, **leases_port.TABLES}


@pytest.mark.parametrize("table", sorted(ROWS))
def test_a_row_typeddict_names_its_table_columns_in_order(table):
    assert tuple(typing.get_type_hints(ROWS[table])) == TABLES[table]


def test_every_table_of_the_ports_has_a_row_typeddict():
    assert set(ROWS) == set(TABLES)


def test_subscription_changes_are_the_updatable_columns():
    changes = reactor_port.SubscriptionChanges
    assert not changes.__required_keys__
    assert set(typing.get_type_hints(changes)) == (
        set(TABLES["reactor_subscriptions"]) - reactor_port.SUBSCRIPTION_IDENTITY
    )


def mistyped(table: str, rows: list[dict]) -> list[str]:
    """Each value of ``rows`` not of its column's declared type (bool is not taken for an int)."""
    hints = typing.get_type_hints(ROWS[table])
    out = []
    for row in rows:
        assert tuple(row) == TABLES[table]
        for column, hint in hints.items():
            value = row[column]
            allows_bool = hint is bool or bool in typing.get_args(hint)
            if not isinstance(value, hint) or (isinstance(value, bool) and not allows_bool):
                out.append(f"{table}.{column} = {value!r} is not {hint}")
    return out


@pytest.mark.parametrize("store", ["memory", "duckdb"])
def test_the_rows_a_run_leaves_have_the_declared_types(store):
    reactor = fs.load_scenario(EXAMPLES / "crashes.toml").run(until=60.0, store=store)
    outbox = fs.load_scenario(EXAMPLES / "outbox-crashes.toml").run(until=120.0, store=store)
    leases = fs.load_scenario(EXAMPLES / "leases-crashes.toml").run(until=120.0, store=store)
    try:
        problems = []
        runs = ((reactor, reactor_port.TABLES), (outbox, outbox_port.TABLES), (leases, leases_port.TABLES))
        for sim, tables in runs:
            for table in tables:
                rows = sim.store.rows(table)
                problems += mistyped(table, rows)
        assert problems == []
        # and the run left rows to check, NULLs among them
        assert reactor.store.row_count("workflow_executions") > 0
        assert outbox.store.row_count("outbox") > 0
        assert leases.store.row_count("events") > 0
    finally:
        reactor.close()
        outbox.close()
        leases.close()


def test_the_checked_modules_pass_mypy_strict():
    """What ``make lint`` runs: mypy over pyproject's files, strict."""
    mypy = Path(sys.executable).with_name("mypy")
    if not mypy.exists() and shutil.which("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    out = subprocess.run([str(mypy) if mypy.exists() else "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"in {len(config['files'])} source files" in out.stdout
