"""The trace: every step the engine takes, as rows of one table.

Recording must be cheap enough to leave on, so the recorder appends to one
Python list per column instead of building a dict per event; ``frame()`` turns
the columns into a pandas DataFrame once, at the end. Columns:

``t``            virtual (or wall) time, epoch microseconds (``time``: the same as a timestamp)
``kind``         fired, graph_called, logged, polled, predicate, dispatched,
                 dispatch_failed, watermark, dead_letter, claimed, finished, requeued,
                 pruned, crashed, restarted, fault, subscription (enabled/disabled)
``actor``        who did it: ``reactor``, ``poller`` (``poller#2`` for a
                 replica), ``pruner``, ``executor``, ``runtime``, ``faults``
``subscription`` subscription id, or None
``firing``       firing id, or None
``execution``    execution id, or None
``attempt``      runner incarnation: 0 until the first restart
``detail``       free text: a predicate's result, an error, a watermark value

Beside the events the trace keeps the *history* of firings — every firing a
writer attempted, its payload and whether (and when) it was durably logged —
because the log itself forgets: pruned rows are gone, and a firing whose writer
crashed was never there. The checker reads both.
"""
from __future__ import annotations

import pandas as pd

COLUMNS = ("t", "kind", "actor", "subscription", "firing", "execution", "attempt", "detail")
HISTORY_COLUMNS = ("firing", "reactor_name", "tenant_id", "fired_at", "logged_at", "payload", "attempt")


class TraceFrame(pd.DataFrame):
    """A trace as a DataFrame, with exports for big runs."""

    _metadata = ["history"]

    @property
    def _constructor(self):
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


class Trace:
    __slots__ = ("cols", "attempt", "hist", "_hist_index")

    def __init__(self) -> None:
        self.cols: tuple[list, ...] = tuple([] for _ in COLUMNS)
        self.attempt = 0
        self.hist: tuple[list, ...] = tuple([] for _ in HISTORY_COLUMNS)
        self._hist_index: dict[str, int] = {}

    def add(self, t, kind, actor, subscription=None, firing=None, execution=None, detail=None) -> None:
        c = self.cols
        c[0].append(t)
        c[1].append(kind)
        c[2].append(actor)
        c[3].append(subscription)
        c[4].append(firing)
        c[5].append(execution)
        c[6].append(self.attempt)
        c[7].append(detail)

    def attempted(self, firing: str, reactor: str, tenant: str, fired_at: int, payload: bytes) -> None:
        """A writer is about to log this firing."""
        h = self.hist
        self._hist_index[firing] = len(h[0])
        for col, value in zip(h, (firing, reactor, tenant, fired_at, None, payload, self.attempt)):
            col.append(value)

    def logged(self, firing: str, at: int) -> None:
        """The firing's row committed at ``at``."""
        self.hist[4][self._hist_index[firing]] = at

    def __len__(self) -> int:
        return len(self.cols[0])

    def columns(self) -> tuple[dict[str, list], dict[str, list]]:
        """The events and the firing history as columns (name -> list of
        values, missing ones None): what :meth:`frame` holds, for a reader of
        a whole run that loops over it in Python (the checker) and has no use
        for a DataFrame. The recorder's own lists, not copies (a day's trace
        is a million rows): read them, never change them."""
        return dict(zip(COLUMNS, self.cols)), dict(zip(HISTORY_COLUMNS, self.hist))

    def history(self) -> pd.DataFrame:
        return pd.DataFrame({name: pd.Series(col, dtype=object) for name, col in zip(HISTORY_COLUMNS, self.hist)})

    def frame(self) -> TraceFrame:
        df = TraceFrame({name: pd.Series(col, dtype=object) for name, col in zip(COLUMNS, self.cols)})
        df["t"] = df["t"].astype("int64")
        df["attempt"] = df["attempt"].astype("int64")
        df.insert(1, "time", pd.to_datetime(df["t"], unit="us", utc=True))
        df.history = self.history()
        return df


class NullTrace(Trace):
    """A recorder that keeps nothing (for benchmarks of the bare engine)."""

    def add(self, *args, **kwargs) -> None:
        pass

    def attempted(self, *args, **kwargs) -> None:
        pass

    def logged(self, *args, **kwargs) -> None:
        pass


class LockedTrace(Trace):
    """A trace that several threads write (the wall-clock runtime): one lock
    keeps each event's columns in step."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        import threading

        super().__init__()
        self._lock = threading.Lock()

    def add(self, *args, **kwargs) -> None:
        with self._lock:
            super().add(*args, **kwargs)

    def attempted(self, *args, **kwargs) -> None:
        with self._lock:
            super().attempted(*args, **kwargs)

    def logged(self, *args, **kwargs) -> None:
        with self._lock:
            super().logged(*args, **kwargs)

    def frame(self):
        with self._lock:
            return super().frame()

    def columns(self):
        with self._lock:  # copies, all of one length: other threads go on recording
            events, history = super().columns()
            return ({k: list(v) for k, v in events.items()}, {k: list(v) for k, v in history.items()})
