"""The leases memory adapter hands a transaction's reads of events, leases,
retries, checkpoints, resolutions and the history out as the tables' own rows,
not copies (a copy per row read was 3.5 % of an ack's instructions). That is
safe only while nothing changes a row in place: the store replaces a row on a
write, and no step changes a row a read gave it. Here every stored row refuses
to be changed, and whole runs must come out as they always have."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fanoutsim.designs.leases.tables import memory

sys.path.insert(0, str(Path(__file__).parent))
from golden.check import check_case  # noqa: E402
from golden.compute import ROOT, result  # noqa: E402

EXAMPLES = ROOT / "fanoutsim" / "examples"
GOLDEN = ("leases.toml", "leases-crashes.toml", "lease-length.toml")  # the leases scenarios with golden results
PRESETS = sorted(p.name for p in (EXAMPLES / "presets").glob("leases-*.toml"))  # claims (Redis), max deliveries


class ReadOnlyRow(dict):
    """A stored row that raises on any change in place (a copy of it is a plain dict)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a stored leases row was changed in place")

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = __ior__ = _refuse


def refuse_changes(m: pytest.MonkeyPatch) -> None:
    """From now on every row the leases memory tables store refuses changes in place."""
    columns = memory._columns
    m.setattr(memory, "_columns", lambda row, table: ReadOnlyRow(columns(row, table)))
    m.setattr(memory, "CheckpointRow", lambda **row: ReadOnlyRow(row))


@pytest.fixture
def read_only_rows(monkeypatch):
    refuse_changes(monkeypatch)


def test_a_read_only_row_refuses_every_change_and_copies_to_a_plain_dict():
    row = ReadOnlyRow(seq=1)
    for change in (lambda: row.__setitem__("seq", 2), lambda: row.update(seq=2), lambda: row.pop("seq")):
        with pytest.raises(TypeError):
            change()
    assert row == {"seq": 1} and type(row.copy()) is dict and type({**row}) is dict


def test_the_fixture_reaches_the_rows_the_store_keeps(read_only_rows):
    from fanoutsim.designs.leases.simulation import LeaseSimulation

    sim = LeaseSimulation(seed=0)
    sim.register_consumer("c", duration=0.01)
    sim.publish("p", "k", {"n": 1})
    sim.run(until=5.0)
    tables = sim.store.lease_dbs["default"]
    stored = [*tables.events.values(), *tables.lease_consumers.values()]
    stored += [cp for by in tables.cp_index.values() for cp in by.values()]
    assert stored and all(type(r) is ReadOnlyRow for r in stored)


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_leases_runs_hold_with_rows_that_refuse_changes(read_only_rows, name):
    check_case(EXAMPLES / name, 0, "memory")


@pytest.mark.parametrize("name", PRESETS)
def test_broker_presets_run_the_same_with_rows_that_refuse_changes(monkeypatch, name):
    path = EXAMPLES / "presets" / name
    plain = result(path, 1, "memory")
    with monkeypatch.context() as m:
        refuse_changes(m)
        assert result(path, 1, "memory") == plain
