"""The trace: every step the engine takes, as rows of one table.

Recording must be cheap enough to leave on, so the recorder appends to one
Python list per column instead of building a dict per event; ``frame()`` turns
the columns into a pandas DataFrame once, at the end. Columns:

``t``            virtual (or wall) time, epoch microseconds
``kind``         fired, graph_called, logged, polled, predicate, dispatched,
                 dispatch_failed, watermark, dead_letter, claimed, finished,
                 pruned, crashed, restarted, fault
``actor``        who did it: ``reactor``, ``poller``, ``pruner``, ``executor``
``subscription`` subscription id, or None
``firing``       firing id, or None
``execution``    execution id, or None
``attempt``      engine incarnation (0 until the first restart)
``detail``       free text: a predicate's result, an error, a count
"""
from __future__ import annotations

import pandas as pd

COLUMNS = ("t", "kind", "actor", "subscription", "firing", "execution", "attempt", "detail")


class Trace:
    __slots__ = ("cols", "attempt")

    def __init__(self) -> None:
        self.cols: tuple[list, ...] = tuple([] for _ in COLUMNS)
        self.attempt = 0

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

    def __len__(self) -> int:
        return len(self.cols[0])

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(dict(zip(COLUMNS, self.cols)))
        df.insert(1, "time", pd.to_datetime(df["t"], unit="us", utc=True))
        return df


class NullTrace(Trace):
    """A recorder that keeps nothing (for benchmarks of the bare engine)."""

    def add(self, *args, **kwargs) -> None:
        pass
