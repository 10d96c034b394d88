"""A runtime's table views, declared once each: ``events = table_view("events")``.

A design's runtime shows each of its tables as a DataFrame (``rt.events()``);
every such view is the same method over another table, read through the
runtime's own ``_frame(table)`` (which knows the store, a named database, the
timestamp columns). :func:`table_view` writes that method once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pandas as pd


class Framed(Protocol):
    """What a view reads: the runtime's frame of a table."""

    def _frame(self, table: str) -> pd.DataFrame: ...


def table_view(table: str, doc: str | None = None) -> Callable[[Any], pd.DataFrame]:
    """A method that returns ``table``'s committed rows as a DataFrame (``doc``:
    its docstring; by default it names the table)."""

    def view(self: Framed) -> pd.DataFrame:
        return self._frame(table)

    view.__name__ = view.__qualname__ = table
    view.__doc__ = doc or f"The committed rows of ``{table}``, a DataFrame."
    return view
