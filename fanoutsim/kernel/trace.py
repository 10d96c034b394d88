"""The trace: every step the engine takes, as rows of one table.

Recording must be cheap enough to leave on, so the recorder appends to one
Python list per column instead of building a dict per event; ``frame()`` turns
the columns into a pandas DataFrame once, at the end. Every event has:

``t``            virtual (or wall) time, epoch microseconds (``time``: the same as a timestamp)
``kind``         what happened (the design's words: ``fired``, ``dispatched``, ``leased``, ...)
``actor``        who did it (``poller``, ``dispatcher``, ``broker``, ``runtime``, ``faults``)
three ids        *who* it was for (a reader), *what* it was about (an item) and
                 *where* (a place the design has one for), each None when it
                 does not apply
the incarnation  of the process: 0 until the first restart
``detail``       free text: a predicate's result, an error, a position

The kernel knows no design's words: each design names the ids, the
incarnation and its history in its :class:`TraceSchema`, and its trace frame
shows those names (the reactor's ``subscription``, ``firing``, ``execution``;
the outbox's ``consumer``, ``seq``; leases' ``consumer``, ``event_id``,
``partition``, ``process``).

Beside the events the trace may keep a *history* of the items writers
attempted — every item, its values and whether (and when) it was durably
logged — because a log forgets: pruned rows are gone, and an item whose writer
crashed was never there. A checker reads both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fanoutsim.kernel.packing import Kept, Packed, joined, pack

LOGGED, INCARNATION = "logged_at", "attempt"  # history columns the trace fills itself


@dataclass(frozen=True)
class TraceSchema:
    """A design's names for the trace's columns: the three ids (``where`` None:
    the design has no such column, and its frame leaves it out), the
    incarnation, and the history's columns (the first is the item's id;
    ``logged_at`` is set by :meth:`Trace.logged`, ``attempt`` with the
    incarnation; :meth:`Trace.attempted` gives the others, in order)."""

    who: str = "who"
    what: str = "what"
    where: str | None = "where"
    incarnation: str = "attempt"
    history: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """The event columns a frame shows, in order."""
        ids = (self.who, self.what) + (() if self.where is None else (self.where,))
        return ("t", "kind", "actor", *ids, self.incarnation, "detail")

    def given(self) -> tuple[int, ...]:
        """The history columns :meth:`Trace.attempted` fills, by position."""
        return tuple(i for i, c in enumerate(self.history) if c not in (LOGGED, INCARNATION))


# what a frame of each recorded column is called: t, kind, actor, who, what, where, incarnation, detail
_SLOTS = 8
_WHERE = 5
# what an event's who, what and where name: an id (str), or a number (an outbox seq)
Ref = str | int | None


class TraceFrame(pd.DataFrame):
    """A trace as a DataFrame, with exports for big runs."""

    _metadata = ["history"]
    history: pd.DataFrame  # the firing history (Trace.frame sets it; pandas keeps it, as _metadata says)

    @property
    def _constructor(self) -> type[TraceFrame]:
        return TraceFrame

    def to_duckdb(self, path: str, table: str = "trace") -> str:
        """Write the events (and the firing history as ``<table>_firings``) to a DuckDB file."""
        import duckdb

        con = duckdb.connect(path)
        try:
            events = pd.DataFrame(self)
            con.register("events_df", events)
            con.execute(f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM events_df')
            history = getattr(self, "history", None)
            if history is not None:
                con.register("history_df", history)
                con.execute(f'CREATE OR REPLACE TABLE "{table}_firings" AS SELECT * FROM history_df')
        finally:
            con.close()
        return path


# events the columns hold before they are packed (see Trace._pack)
_PACK = 1 << 14


class Trace:
    """The recorder: a list per event column, each event appended to each
    (seven appends cost less than a tuple per event moved into the columns
    later, and leave no container for the collector to count: a tuple each made
    it run five times as often). Every
    :data:`_PACK` events the columns are packed (:class:`~fanoutsim.kernel.packing.Packed`), so that a
    long run's trace takes a seventh of the memory; a reader gets them back as
    lists. The incarnation changes only at a restart, so it is kept as its
    runs — the event at which each incarnation began — rather than as a value
    per event; :meth:`columns` spells it out."""

    __slots__ = (
        "schema",
        "cols",
        "_t",
        "_kind",
        "_actor",
        "_who",
        "_what",
        "_where",
        "_detail",
        "packed",
        "_packed_rows",
        "_attempt",
        "_runs",
        "hist",
        "_hist_packs",
        "_hist_packed",
        "_hist_index",
        "_late",
        "_sources",
        "_logged",
    )

    def __init__(self, schema: TraceSchema = TraceSchema()) -> None:
        self.schema = schema
        self._new_columns()
        self.packed: list[Packed | Kept] = []  # the events before those in cols, in order
        self._packed_rows = 0
        self._attempt = 0
        self._runs: list[tuple[int, int]] = [(0, 0)]  # (first event, incarnation), in order
        self.hist: tuple[list[Any], ...] = tuple([] for _ in schema.history)
        self._hist_packs: list[Packed | Kept] = []  # the history's rows before those in hist, in order
        self._hist_packed = 0
        self._hist_index: dict[Ref, int] = {}  # an item not yet logged -> its row in the history
        self._late: dict[int, int] = {}  # a row packed before its item was logged -> logged_at
        self._logged = schema.history.index(LOGGED) if LOGGED in schema.history else None
        # where each history column's value is in attempted()'s (item, *values, attempt, None)
        given = schema.given()
        self._sources = tuple(
            len(given) if c == INCARNATION else len(given) + 1 if c == LOGGED else given.index(i)
            for i, c in enumerate(schema.history)
        )

    def add(
        self,
        t: int,
        kind: str,
        actor: str,
        who: Ref = None,
        what: Ref = None,
        where: Ref = None,
        detail: str | None = None,
    ) -> None:
        ts = self._t
        ts.append(t)
        self._kind.append(kind)
        self._actor.append(actor)
        self._who.append(who)
        self._what.append(what)
        self._where.append(where)
        self._detail.append(detail)
        if len(ts) >= _PACK:
            self._pack()

    def _new_columns(self) -> None:
        """New, empty columns for the next events: t, kind, actor, who, what,
        where, detail (the incarnation is in ``_runs``)."""
        cols: tuple[list[Any], ...] = tuple([] for _ in range(_SLOTS - 1))
        self.cols = cols
        self._t, self._kind, self._actor, self._who, self._what, self._where, self._detail = cols

    def _pack(self) -> None:
        """The columns packed; new, empty ones take the next events (a reader
        given the old lists keeps them as they were)."""
        packed = pack(self.cols)  # kept as lists where pickle refuses a value: the next pack starts afresh
        self.packed.append(packed)
        self._packed_rows += packed.rows
        self._new_columns()

    def _recorded(self) -> int:
        """The events recorded: packed, or in the columns."""
        return self._packed_rows + len(self.cols[0])

    def _unpacked(self) -> tuple[list[Any], ...]:
        """The events' columns: the recorder's own lists when nothing
        is packed, else new lists, the packs' events first."""
        return joined(self.packed, self.cols)

    @property
    def attempt(self) -> int:
        """The incarnation the events recorded from now on belong to."""
        return self._attempt

    @attempt.setter
    def attempt(self, value: int) -> None:
        self._begin_run(value)

    def _begin_run(self, value: int) -> None:
        """The events from now on belong to incarnation ``value``."""
        self._attempt = value
        at = self._recorded()
        if self._runs[-1][0] == at:  # no event of the last run: it is replaced
            self._runs[-1] = (at, value)
        elif self._runs[-1][1] != value:
            self._runs.append((at, value))

    def _attempts(self) -> list[int]:
        """The incarnation of each event, spelled out."""
        out: list[int] = []
        ends = [start for start, _ in self._runs[1:]] + [self._recorded()]
        for (start, value), end in zip(self._runs, ends):
            out += [value] * (end - start)
        return out

    def _all_columns(self) -> tuple[list[Any], ...]:
        """The eight event columns (t, kind, actor, who, what, where, incarnation, detail)."""
        attempts = self._attempts()
        c = self._unpacked()
        return (*c[:6], attempts, c[6])

    def attempted(self, item: Ref, *values: object) -> None:
        """A writer is about to log ``item``; ``values``: the history's other columns, in order."""
        h = self.hist
        self._hist_index[item] = self._hist_packed + len(h[0])
        row = (item, *values, self.attempt, None)  # logged_at: None until logged()
        for col, k in zip(h, self._sources):
            col.append(row[k])
        if len(h[0]) >= _PACK:
            self._pack_history()

    def _pack_history(self) -> None:
        """The history's rows packed, as the events are (an item still in flight
        is logged into :attr:`_late`)."""
        self._hist_packs.append(pack(self.hist))
        self._hist_packed += len(self.hist[0])
        self.hist = tuple([] for _ in self.hist)

    def logged(self, item: Ref, at: int) -> None:
        """The item's row committed at ``at`` (once: a writer logs each item it attempted at most once)."""
        # a schema without logged_at (self._logged None) has no writer that calls this; a logged
        # item leaves the index, which then holds only the items in flight (a run's would be millions)
        row = self._hist_index.pop(item)
        if row >= self._hist_packed:
            self.hist[self._logged][row - self._hist_packed] = at  # type: ignore[index]
        else:
            self._late[row] = at

    def _history(self) -> tuple[list[Any], ...]:
        """The history's columns: the recorder's own lists when nothing is
        packed, else new lists, the packs' rows first (and the late-logged times)."""
        out = joined(self._hist_packs, self.hist)
        if self._late:
            logged = out[self._logged]  # type: ignore[index]
            for row, at in self._late.items():
                logged[row] = at
        return out

    def __len__(self) -> int:
        return self._recorded()

    def _event_columns(self) -> list[tuple[str, list[Any]]]:
        cols = list(self._all_columns())
        if self.schema.where is None:
            del cols[_WHERE]
        return list(zip(self.schema.columns, cols))

    def columns(self) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        """The events and the history as columns (name -> list of values,
        missing ones None): what :meth:`frame` holds, for a reader of a whole
        run that loops over it in Python (a checker) and has no use for a
        DataFrame. The recorder's own lists, not copies, while nothing is
        packed (the incarnation's is built; a long run's packed events are
        unpacked into new lists): read them before the run goes on (its events
        are appended to them), never change them, and call again for events
        added since."""
        return dict(self._event_columns()), dict(zip(self.schema.history, self._history()))

    def history(self) -> pd.DataFrame:
        cols = self._history()
        return pd.DataFrame({name: pd.Series(col, dtype=object) for name, col in zip(self.schema.history, cols)})

    def frame(self) -> TraceFrame:
        df = TraceFrame({name: pd.Series(col, dtype=object) for name, col in self._event_columns()})
        df["t"] = df["t"].astype("int64")
        df[self.schema.incarnation] = df[self.schema.incarnation].astype("int64")
        df.insert(1, "time", pd.to_datetime(df["t"], unit="us", utc=True))
        df.history = self.history()
        return df


# the Parquet columns of a spilled chunk: an id (``Ref``) or a detail is a str or
# an int, so each such column is two, one per type, and reads back as it was
_TYPED = (3, 4, 5, 7)  # who, what, where, detail
_NAMES = ("t", "kind", "actor", "who", "what", "where", "attempt", "detail")


def _chunk_table(cols: tuple[list[Any], ...]) -> Any:
    """One chunk of the recorder's columns as an Arrow table (str and int halves for
    the ids and the detail); an error naming the column if a value is neither."""
    import pyarrow as pa

    arrays: dict[str, Any] = {}
    for k, (name, col) in enumerate(zip(_NAMES, cols)):
        if k not in _TYPED:
            arrays[name] = pa.array(col, type=pa.int64() if k in (0, 6) else pa.string())
            continue
        for v in col:
            if v is not None and type(v) is not str and type(v) is not int:
                raise TypeError(f"a spilled trace holds str or int in column {name!r}, not {v!r}")
        arrays[f"{name}_str"] = pa.array([v if type(v) is str else None for v in col], type=pa.string())
        arrays[f"{name}_int"] = pa.array([v if type(v) is int else None for v in col], type=pa.int64())
    return pa.table(arrays)


def _chunk_columns(table: Any) -> list[list[Any]]:
    """The recorder's columns again from a chunk's table: the same Python values."""
    out = []
    for k, name in enumerate(_NAMES):
        if k not in _TYPED:
            out.append(table.column(name).to_pylist())
            continue
        strs, ints = table.column(f"{name}_str").to_pylist(), table.column(f"{name}_int").to_pylist()
        out.append([a if a is not None else b for a, b in zip(strs, ints)])
    return out


class SpilledTrace(Trace):
    """A trace whose events go to disk: every ``chunk`` events are written as one
    Parquet file into the folder ``path`` (``part-000000.parquet``, ...) and leave
    memory, so that a long run's length is bounded by disk rather than memory.
    Reading it (:meth:`frame`, :meth:`columns`) reads the files back, then the
    events not yet written: the same values as a trace kept in memory. The
    history stays in memory (a writer's item is marked logged after the fact).
    The folder must be empty or new; the files stay after the run."""

    __slots__ = ("path", "chunk", "_parts")

    def __init__(
        self, schema: TraceSchema = TraceSchema(), *, path: str | os.PathLike[str], chunk: int = 1 << 14
    ) -> None:
        super().__init__(schema)
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a whole number of events >= 1, got {chunk!r}")
        self.path = Path(path)
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise ValueError(f"the trace's spill folder {str(self.path)!r} must be new or empty")
        self.path.mkdir(parents=True, exist_ok=True)
        self.chunk = chunk
        self._parts = 0  # files written

    def add(self, *args: Any, **kwargs: Any) -> None:
        """:meth:`Trace.add`, then the chunk to disk once it is full."""
        Trace.add(self, *args, **kwargs)
        if len(self._t) >= self.chunk:
            self.spill()

    def _pack(self) -> None:
        """Nothing: the events go to disk a chunk at a time (:meth:`spill`)."""

    def spill(self) -> None:
        """Write the events in memory as the next file, and let them go."""
        import pyarrow.parquet as pq

        if not self._t:
            return
        pq.write_table(_chunk_table(Trace._all_columns(self)), self.path / f"part-{self._parts:06d}.parquet")
        self._parts += 1
        for col in self.cols:
            col.clear()
        self._runs = [(0, self._attempt)]

    def __len__(self) -> int:
        import pyarrow.parquet as pq

        on_disk: int = sum(pq.ParquetFile(f).metadata.num_rows for f in self._files())
        return on_disk + Trace.__len__(self)

    def _files(self) -> list[Path]:
        return [self.path / f"part-{i:06d}.parquet" for i in range(self._parts)]

    def _all_columns(self) -> tuple[list[Any], ...]:
        import pyarrow.parquet as pq

        cols: tuple[list[Any], ...] = tuple([] for _ in range(_SLOTS))
        for f in self._files():
            for col, back in zip(cols, _chunk_columns(pq.read_table(f))):
                col.extend(back)
        for col, tail in zip(cols, Trace._all_columns(self)):
            col.extend(tail)
        return cols


class NullTrace(Trace):
    """A recorder that keeps nothing (for benchmarks of the bare engine)."""

    def add(self, *args: Any, **kwargs: Any) -> None:
        pass

    def attempted(self, *args: Any, **kwargs: Any) -> None:
        pass

    def logged(self, *args: Any, **kwargs: Any) -> None:
        pass


class LockedTrace(Trace):
    """A trace that several threads write (the wall-clock runtime): one lock
    keeps each event's columns in step."""

    __slots__ = ("_lock",)

    def __init__(self, schema: TraceSchema = TraceSchema()) -> None:
        import threading

        super().__init__(schema)
        self._lock = threading.Lock()

    def add(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().add(*args, **kwargs)

    def _begin_run(self, value: int) -> None:
        with self._lock:  # the run begins at the event count other threads see
            super()._begin_run(value)

    def attempted(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().attempted(*args, **kwargs)

    def logged(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().logged(*args, **kwargs)

    def frame(self) -> TraceFrame:
        with self._lock:
            return super().frame()

    def __len__(self) -> int:
        with self._lock:  # the columns grow under it: counted between, events are missed
            return super().__len__()

    def columns(self) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        with self._lock:  # copies, all of one length: other threads go on recording
            events, history = super().columns()
            # unpacked columns are in new lists already; the recorder's own are copied
            own, own_history = not self.packed, not self._hist_packs
            return (
                {k: list(v) if own else v for k, v in events.items()},
                {k: list(v) if own_history else v for k, v in history.items()},
            )
