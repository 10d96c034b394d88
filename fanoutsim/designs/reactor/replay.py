"""Recorded workloads: replay a table of quotes as reactor firings.

A recording is a table with one row per quote: ``t`` (seconds since the
recording's start), ``symbol``, ``region`` and ``price`` (null allowed: a
halted book), and optionally a tenant column. ``fanoutsim/examples/quotes-day.parquet``
is one UTC day of them (made by ``data/make_quotes_day.py``).

:meth:`fanoutsim.Simulation.add_replay` fires a reactor once per row, with the
payload of the ``quote`` generator, ``{"quote": {"symbol", "region", "price"}}``.
The window ``start <= t < stop`` of the recording is replayed ``speed`` times
faster than recorded, beginning at the virtual time of the call: the row at
``t`` fires at ``now + (t - start) / speed``.

In a scenario file, a ``[[workload]]`` table with a ``replay`` key is a
recording (a path relative to the scenario file)::

    [[workload]]
    replay = "quotes-day.parquet"   # .parquet or .csv
    reactor = "pricing_reactor"
    tenant_column = "tenant"   # optional: each row's tenant; default: all in "public"
    speed = 60.0               # optional, default 1.0
    start = 50400.0            # optional: recording seconds, default 0
    stop = 54000.0             # optional
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fanoutsim.kernel.validate import is_real

__all__ = ["REPLAY_COLUMNS", "Replay", "ReplaySpec", "load_recording", "prepare_replay", "parse_replay"]

#: The columns a recording must have: ``t`` (seconds), ``symbol``, ``region``, ``price``.
REPLAY_COLUMNS = ("t", "symbol", "region", "price")
FORMATS = (".parquet", ".csv")


@dataclass(frozen=True)
class Replay:
    """A replay added to a run: its ``reactor``, how many ``rows`` fire, the
    ``tenant`` column (None: every row in ``"public"``), its ``speed``, the window
    of the recording replayed (``start`` to ``stop``, recording seconds) and when
    the first and last firings fall (``first_at``, ``last_at``: virtual seconds;
    None when no row is in the window)."""

    reactor: str
    rows: int
    tenant: str | None = None  # the tenant column, or None: every row in "public"
    speed: float = 1.0
    start: float = 0.0  # recording seconds
    stop: float | None = None  # recording seconds
    first_at: float | None = None  # virtual time of the first firing
    last_at: float | None = None  # ... and of the last


def load_recording(path: str | os.PathLike) -> pd.DataFrame:
    """Read a recording (``.parquet`` or ``.csv``) into a DataFrame."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path)
    raise ValueError(f"a recording must be a {' or '.join(FORMATS)} file, got {str(path)!r}")


def _number(value: Any, name: str, *, low: float | None = None, strict: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
    ):
        raise ValueError(f"replay {name} must be a finite number, got {value!r}")
    if low is not None and (value <= low if strict else value < low):
        raise ValueError(f"replay {name} must be {'>' if strict else '>='} {low:g}, got {value!r}")
    return float(value)


def prepare_replay(
    frame: pd.DataFrame,
    reactor: str,
    *,
    tenant: str | None = None,
    speed: float = 1.0,
    start: float = 0.0,
    stop: float | None = None,
    now: float = 0.0,
) -> tuple[Replay, list[float], list[str], list[dict]]:
    """Check a recording and turn its window into firing times (virtual
    seconds), tenants and payloads, in time order. Raises ValueError naming
    the argument or column at fault."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"a replay needs a pandas DataFrame, not {type(frame).__name__}")
    if not isinstance(reactor, str) or not reactor.strip():
        raise ValueError(f"replay reactor must be a non-empty string, got {reactor!r}")
    missing = [c for c in REPLAY_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"the recording has no column(s) {', '.join(map(repr, missing))}; a replay needs "
            f"{', '.join(REPLAY_COLUMNS)}; it has {', '.join(map(str, frame.columns))}"
        )
    if tenant is not None and tenant not in frame.columns:
        raise ValueError(
            f"replay tenant must be None (every row in 'public') or a column of the recording; "
            f"{tenant!r} is not one of {', '.join(map(str, frame.columns))}"
        )
    speed = _number(speed, "speed", low=0.0, strict=True)
    start = _number(start, "start")
    if stop is not None:
        stop = _number(stop, "stop")
        if stop <= start:
            raise ValueError(f"replay stop must be after start ({start:g}), got {stop!r}")
    t = pd.to_numeric(frame["t"], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(t).all():
        bad = int((~np.isfinite(t)).sum())
        raise ValueError(f"the recording's column 't' must hold finite seconds; {bad} row(s) do not")
    keep = t >= start if stop is None else (t >= start) & (t < stop)
    window = frame.loc[keep]
    t = t[keep]
    order = np.argsort(t, kind="stable")
    times = (now + (t[order] - start) / speed).tolist()
    window = window.iloc[order]
    if tenant is None:
        tenants = ["public"] * len(window)
    else:
        tenants = window[tenant].tolist()
        bad = [v for v in tenants if not isinstance(v, str) or not v.strip()]
        if bad:
            raise ValueError(
                f"replay tenant column {tenant!r} must hold non-empty strings; "
                f"{len(bad)} row(s) hold {bad[0]!r} or the like"
            )
    prices = window["price"].to_numpy(dtype=float, na_value=np.nan)
    payloads = [
        {"quote": {"symbol": _plain(s), "region": _plain(r), "price": None if math.isnan(p) else float(p)}}
        for s, r, p in zip(window["symbol"].tolist(), window["region"].tolist(), prices.tolist())
    ]
    replay = Replay(
        reactor, len(times), tenant, speed, start, stop, times[0] if times else None, times[-1] if times else None
    )
    return replay, times, tenants, payloads


def _plain(value: Any) -> Any:
    """A JSON-ready value: a missing one becomes null."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value.item() if isinstance(value, np.generic) else value


# -- scenario files ------------------------------------------------------------------
REPLAY_KEYS = ("replay", "reactor", "tenant_column", "speed", "start", "stop")


@dataclass(frozen=True)
class ReplaySpec:
    """A ``[[workload]] replay = ...`` table of a scenario, checked: the
    recording's ``path`` (resolved against the scenario file's folder), the
    ``reactor`` fired, the ``tenant_column`` (None: every row in ``"public"``),
    the ``speed`` and the window replayed, ``start`` to ``stop`` (recording
    seconds)."""

    path: str  # resolved against the scenario file's folder
    reactor: str
    tenant_column: str | None = None
    speed: float = 1.0
    start: float = 0.0
    stop: float | None = None

    def add_to(self, sim) -> Replay:
        """Load the recording and add its replay to ``sim`` (its ``add_replay``);
        the :class:`Replay`. A recording that cannot be read raises as
        :func:`load_recording` does; a bad window as ``add_replay`` does."""
        return sim.add_replay(
            load_recording(self.path),
            self.reactor,
            tenant=self.tenant_column,
            speed=self.speed,
            start=self.start,
            stop=self.stop,
        )


def _columns(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    return list(pd.read_csv(path, nrows=0).columns)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "an array"
    return repr(value)


Problems = list[tuple[str, str]]


def parse_replay(item: dict, where: str, base: Path) -> tuple[ReplaySpec | None, list[tuple[str, str]]]:
    """Check one replay table; ``(spec or None, [(key path, problem), ...])``."""
    problems = _unknown_keys(item, where)
    path, columns = _recording(item["replay"], where, base, problems)
    reactor = item.get("reactor")
    if "reactor" not in item:
        problems.append((f"{where}.reactor", "is required (a non-empty string)"))
    elif not isinstance(reactor, str) or not reactor.strip():
        problems.append((f"{where}.reactor", f"must be a non-empty string, got {_show(reactor)}"))
    tenant_column = item.get("tenant_column")
    _check_tenant_column(tenant_column, columns, where, problems)
    values = _timing(item, where, problems)
    if problems:
        return None, problems
    return ReplaySpec(str(path), reactor, tenant_column, values["speed"], values["start"], values["stop"]), []


def _unknown_keys(item: dict, where: str) -> Problems:
    """A problem for each key of ``item`` a replay does not take, with a hint
    for the keys of a generated workload that a replay reads from its recording."""
    problems: Problems = []
    for key in item:
        if key not in REPLAY_KEYS:
            hint = (
                " (a replay fires at the recorded times with the recorded quotes)"
                if key in ("rate", "payload")
                else " (a replay takes each row's tenant from tenant_column)"
                if key == "tenant"
                else ""
            )
            problems.append(
                (
                    f"{where}.{key}",
                    f"unknown key for a replay workload{hint}; allowed keys in "
                    f"{where} with replay: {', '.join(REPLAY_KEYS)}",
                )
            )
    return problems


def _recording(raw: object, where: str, base: Path, problems: Problems) -> tuple[Path | None, list[str] | None]:
    """Find and open the recording ``raw`` names (relative to ``base``, the
    scenario's folder): its path and columns, each None when a problem (added
    to ``problems``) stops it; the columns must include :data:`REPLAY_COLUMNS`."""
    if not isinstance(raw, str) or not raw.strip():
        problems.append(
            (
                f"{where}.replay",
                f"must be the path of a recording ({' or '.join(FORMATS)} file, "
                f"relative to the scenario file), got {_show(raw)}",
            )
        )
        return None, None
    path = (Path(raw) if Path(raw).is_absolute() else base / raw).resolve()
    if path.suffix not in FORMATS:
        problems.append((f"{where}.replay", f"must name a {' or '.join(FORMATS)} file, got {raw!r}"))
        return None, None
    if not path.is_file():
        problems.append(
            (
                f"{where}.replay",
                f"no such recording {raw!r} (looked for {str(path)!r}; "
                f"a relative path is relative to the scenario file)",
            )
        )
        return None, None
    try:
        columns = _columns(path)
    except Exception as exc:  # unreadable: say so with the reader's words
        problems.append((f"{where}.replay", f"cannot read {raw!r}: {exc}"))
        return None, None
    missing = [c for c in REPLAY_COLUMNS if c not in columns]
    if missing:
        problems.append(
            (
                f"{where}.replay",
                f"{raw!r} has no column(s) {', '.join(map(repr, missing))}; a replay needs {', '.join(REPLAY_COLUMNS)}",
            )
        )
    return path, columns


def _check_tenant_column(tenant_column: object, columns: list[str] | None, where: str, problems: Problems) -> None:
    """``tenant_column``, when given, must name a column of the recording (when
    the recording could be read)."""
    if tenant_column is None:
        return
    if not isinstance(tenant_column, str) or not tenant_column:
        problems.append(
            (f"{where}.tenant_column", f"must be a column name of the recording, got {_show(tenant_column)}")
        )
    elif columns is not None and tenant_column not in columns:
        problems.append(
            (
                f"{where}.tenant_column",
                f"{tenant_column!r} is not a column of the recording; its columns: {', '.join(columns)}",
            )
        )


def _timing(item: dict, where: str, problems: Problems) -> dict[str, float | None]:
    """The replay's ``speed`` (> 0, default 1), ``start`` (>= 0, default 0) and
    ``stop`` (after start, default None: the end); a bad one is a problem and
    reads as its neutral value."""
    values: dict[str, float | None] = {}
    for key, default, rule in (("speed", 1.0, "> 0"), ("start", 0.0, ">= 0"), ("stop", None, "")):
        value = item.get(key, default)
        if value is None:
            values[key] = None
            continue
        ok = is_real(value) and math.isfinite(value)
        if ok and key == "speed":
            ok = value > 0
        if ok and key == "start":
            ok = value >= 0
        if ok and key == "stop":
            start = values.get("start")
            ok = start is None or value > start
            rule = f"after start ({start:g})" if start is not None else ""
        if not ok:
            what = {"speed": "times faster than recorded", "start": "recording seconds", "stop": "recording seconds"}[
                key
            ]
            problems.append(
                (f"{where}.{key}", f"must be a finite number of {what}{' ' + rule if rule else ''}, got {_show(value)}")
            )
            values[key] = None if key != "speed" else 1.0
        else:
            values[key] = float(value)
    return values
