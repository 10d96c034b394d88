"""Each design owns its tables: the kernel's store composes the parts it is
given (``MemoryStore(parts=...)``, ``DuckDBStore(path, parts=...)``) and knows
none of them; :mod:`fanoutsim.designs.stores` gives it every registered
design's. A new design's part — here a one-table "notes" part defined in this
file — works in both adapters, rolls back with the rest, and joins every
store once its design is registered."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod

import pytest

from fanoutsim import designs
from fanoutsim.designs import stores
from fanoutsim.designs.leases.tables import PART as LEASES
from fanoutsim.designs.outbox.tables import PART as OUTBOX
from fanoutsim.designs.reactor.tables import PART as REACTOR
from fanoutsim.kernel.store import MemoryStore, StorePart, open_store
from fanoutsim.kernel.store.duckdb import DuckDBStore, StoreError
from fanoutsim.kernel.store.sql import TS


# -- a part of a design that is not fanoutsim's -------------------------------------------
class NotesTx(ABC):
    __slots__ = ()

    @abstractmethod
    def add_note(self, row: dict) -> None:
        """A note; the same id again raises KeyError."""

    @abstractmethod
    def note(self, note_id: str) -> dict | None: ...


def _init(s) -> None:
    s.notes = {}


class NotesMemoryTx(NotesTx):
    __slots__ = ()

    def add_note(self, row):
        if row["id"] in self.s.notes:
            raise self._duplicate(f"notes.id {row['id']}")
        self._put(self.s.notes, row["id"], dict(row))

    def note(self, note_id):
        row = self.s.notes.get(note_id)
        return None if row is None else dict(row)


class NotesDuckDBTx(NotesTx):
    __slots__ = ()

    def add_note(self, row):
        self._run(f"INSERT INTO notes VALUES (?, ?, {TS})", [row["id"], row["body"], row["noted_at"]])

    def note(self, note_id):
        r = self._run("SELECT id, body, epoch_us(noted_at) FROM notes WHERE id = ?", [note_id]).fetchone()
        return None if r is None else dict(zip(COLUMNS, r))


COLUMNS = ("id", "body", "noted_at")
NOTES = StorePart(
    name="notes",
    tables={"notes": COLUMNS},
    timestamp_columns=frozenset({"noted_at"}),
    tx=NotesTx,
    memory_tx=NotesMemoryTx,
    memory_init=_init,
    memory_rows={"notes": lambda s: [dict(s.notes[k]) for k in sorted(s.notes)]},
    duckdb_tx=NotesDuckDBTx,
    duckdb_schema="CREATE TABLE IF NOT EXISTS notes (id VARCHAR PRIMARY KEY, body VARCHAR, noted_at TIMESTAMPTZ);\n",
    duckdb_rows={"notes": "SELECT id, body, epoch_us(noted_at) FROM notes ORDER BY id"},
)


@pytest.fixture(params=["memory", "duckdb"])
def make(request, tmp_path):
    made = []

    def make(parts, name="s.duckdb"):
        store = MemoryStore(parts) if request.param == "memory" else DuckDBStore(str(tmp_path / name), parts)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def test_a_store_holds_the_kernel_tables_and_the_parts_it_is_given(make):
    store = make([REACTOR, NOTES])
    assert set(store.tables) == {"runner_log", "notes", *REACTOR.tables}
    assert store.timestamp_columns >= {"happened_at", "noted_at", "fired_at"}
    with pytest.raises(KeyError, match="outbox"):
        store.rows("outbox")
    with store.transaction() as tx:
        assert not hasattr(tx, "reserve_outbox_seq")  # the outbox's part is not there
        tx.add_note({"id": "a", "body": "hello", "noted_at": 7})
        tx.log_runner(8, "start")
        assert tx.note("a") == {"id": "a", "body": "hello", "noted_at": 7}
    assert store.rows("notes") == [{"id": "a", "body": "hello", "noted_at": 7}]
    assert [r["event"] for r in store.rows("runner_log")] == ["start"]


def test_a_part_rolls_back_and_fails_with_the_kernel_tables(make):
    store = make([NOTES])
    with pytest.raises(ZeroDivisionError):
        with store.transaction() as tx:
            tx.add_note({"id": "a", "body": None, "noted_at": 1})
            tx.log_runner(1, "start")
            raise ZeroDivisionError  # a failure inside the transaction
    assert store.rows("notes") == [] and store.rows("runner_log") == []
    with pytest.raises(RuntimeError, match="rolled back"):
        with store.transaction() as tx:
            tx.add_note({"id": "b", "body": None, "noted_at": 1})
            try:
                tx.add_note({"id": "b", "body": None, "noted_at": 2})
            except KeyError:
                pass  # swallowed: the transaction still cannot commit
    assert store.rows("notes") == []


def test_parts_that_name_one_table_twice_are_refused():
    clash = dataclasses.replace(NOTES, name="clash", tables={"outbox": ("seq",)})
    with pytest.raises(ValueError, match="table 'outbox' of part 'clash' is already a table of part 'outbox'"):
        MemoryStore([OUTBOX, clash])
    with pytest.raises(ValueError, match="'runner_log' of part 'notes' is already a table of the kernel"):
        MemoryStore([dataclasses.replace(NOTES, tables={"runner_log": ("seq",)})])
    with pytest.raises(TypeError, match="StorePart"):
        MemoryStore(["notes"])


def test_a_part_adds_methods_and_replaces_none():
    class Twice(NotesMemoryTx):
        __slots__ = ()

        def log_runner(self, at, event, detail=None):  # the kernel's
            return 0

    with pytest.raises(ValueError, match="Twice.log_runner is MemoryTx's already"):
        MemoryStore([dataclasses.replace(NOTES, memory_tx=Twice)])
    with pytest.raises(ValueError, match="NotesMemoryTx.add_note is NotesMemoryTx's already"):
        MemoryStore([NOTES, dataclasses.replace(NOTES, name="again", tables={"again": ("id",)})])


def test_a_file_reopens_with_a_part_added(tmp_path):
    path = str(tmp_path / "grow.duckdb")
    store = DuckDBStore(path, [REACTOR])
    with store.transaction() as tx:
        tx.log_runner(1, "start")
    store.close()
    store = DuckDBStore(path, [REACTOR, NOTES])  # the new part's table is made at open
    try:
        assert store.rows("notes") == [] and len(store.rows("runner_log")) == 1
    finally:
        store.close()


def test_the_schema_version_is_the_newest_migration_of_the_parts(tmp_path):
    path = str(tmp_path / "v.duckdb")
    newer = dataclasses.replace(NOTES, duckdb_migrations={9: ["SELECT 1"]})
    DuckDBStore(path, [newer]).close()
    with pytest.raises(StoreError, match="schema version 9, newer than this fanoutsim understands \\(5\\)"):
        DuckDBStore(path, [NOTES])


def test_the_kernel_store_alone_has_the_kernel_tables():
    store = open_store("memory")
    assert set(store.tables) == {"runner_log"}


def test_the_registry_gives_every_store_every_registered_designs_tables(tmp_path):
    assert stores.store_parts() == (REACTOR, OUTBOX, LEASES)
    assert set(stores.TABLES) == {"runner_log", *REACTOR.tables, *OUTBOX.tables, *LEASES.tables}
    record = dataclasses.replace(designs.get("outbox"), name="notes", store_part=NOTES)
    designs.register(record)
    try:
        assert stores.store_parts()[-1] is NOTES and "notes" in stores.TABLES
        for store in (stores.open_store("memory"), stores.open_store(str(tmp_path / "all.duckdb"))):
            try:
                assert set(store.tables) == set(stores.TABLES)
                assert isinstance(store, (stores.MemoryStore, stores.DuckDBStore))
            finally:
                store.close()
    finally:
        designs.unregister("notes")
    assert "notes" not in stores.TABLES
