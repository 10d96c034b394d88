"""The checker contract: what every design's checker returns.

Each design's checker reads a finished run's trace and tables and returns a
report with its own totals and frames (their names are the design's: a
reactor *subscription*, an outbox or leases *consumer*). Beside them every
report has the same members, so a tool that works across designs reads them
without asking which design it holds:

``valid``
    True when every loss and duplicate has a cause the design
    accepts (``total["valid"]``);
``total``
    the design's JSON-ready totals, with at least ``valid`` and
    ``lost`` (the golden results compare this dict);
``summary``
    the totals every design shares, under one set of names:
    :data:`SUMMARY_KEYS` — ``delivered`` (expected items
    delivered at least once), ``duplicates`` (extra deliveries),
    ``lost``, ``pending`` and the two ``*_by_cause`` counts;
``unit``
    what one reader is, in the design's word (the reactor's
    ``"subscription"``, the outbox's ``"consumer"``): an identifier;
``per_unit``
    one row per reader, keyed by a column named ``unit``, with a
    ``lost`` column (``per_subscription`` / ``per_consumer``);
``duplicates``
    one row per extra delivery, with a ``cause`` column;
``lost``
    one row per loss, with a ``cause`` column.

Deliveries are counted where the reader's effect lands (an execution row, a
consumer's ``fn``, a worker's effect), never where the step that caused it
finished. :func:`problems` lists what a report gets wrong against this
contract (an empty list: it conforms).

A checker is written as the same five phases, each a function that decides one
thing (the designs' checkers name theirs after these):

*owed*         who was owed what: per reader, the items it was due (and why
               the others were not due);
*delivered*    what reached it: the items delivered at least once
               (:func:`repeats` sorts a reader's deliveries by item and finds
               the ones after an item's first);
*duplicates*   each extra delivery and its cause, the first explanation in the
               design's order of precedence that holds
               (:func:`first_cause`, with :func:`any_between` for "did such an
               event happen between the two deliveries");
*losses*       each owed item never delivered and not still pending, and its
               cause;
*order*        items first delivered after an item that should come later
               (:func:`highest_before`).

The helpers here speak of items, readers and trace positions only; what an
item, a reader or a cause is belongs to the design.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol, TypedDict, runtime_checkable

import numpy as np
import pandas as pd

from fanoutsim.kernel.validate import is_whole

SUMMARY_KEYS = ("valid", "delivered", "duplicates", "lost", "pending", "duplicates_by_cause", "lost_by_cause")


class Summary(TypedDict):
    """The totals every design's report shares (:data:`SUMMARY_KEYS`): ``valid``
    (the checker's verdict), ``delivered`` (expected items delivered at least once),
    ``duplicates`` (extra deliveries), ``lost``, ``pending`` (not delivered yet, not
    lost), and ``duplicates_by_cause`` and ``lost_by_cause`` (cause -> count)."""

    valid: bool
    delivered: int
    duplicates: int
    lost: int
    pending: int
    duplicates_by_cause: dict[str, int]
    lost_by_cause: dict[str, int]


@runtime_checkable
class CheckResult(Protocol):
    """What every design's checker returns (see the module's text)."""

    #: The design's own totals, by name (JSON-ready), with at least ``valid`` and ``lost``.
    total: dict[str, Any]
    #: One row per extra delivery, with a ``cause`` column.
    duplicates: pd.DataFrame
    #: One row per loss, with a ``cause`` column.
    lost: pd.DataFrame
    #: What one reader is, in the design's word: ``"subscription"`` or ``"consumer"``.
    unit: str

    @property
    def valid(self) -> bool:
        """True when every loss and duplicate has a cause the design accepts."""

    @property
    def per_unit(self) -> pd.DataFrame:
        """One row per reader, keyed by a column named :attr:`unit`, with a ``lost`` column."""

    @property
    def summary(self) -> Summary:
        """The totals every design shares, under one set of names (:class:`Summary`)."""


class CheckedReport:
    """The contract's shared members, for a report dataclass that has
    ``total`` and a ``per_<unit>`` frame: ``valid``, ``per_unit`` and
    ``summary``. A report whose totals name a shared count otherwise says so
    in ``summary_names`` (summary key -> its total's key, or a tuple of keys
    whose counts add up to it)."""

    #: The design's word for one reader (a class attribute of each report).
    unit: ClassVar[str]
    #: Summary key -> the report's own total of it (or a tuple of totals that add up to
    #: it), for each shared count the report names otherwise; empty: the same names.
    summary_names: Mapping[str, str | tuple[str, ...]] = {}
    #: The report's totals (a field of each report dataclass; declared here for its type).
    total: dict[str, Any]

    @property
    def valid(self) -> bool:
        """The checker's verdict, ``total["valid"]``: True when every loss and
        duplicate has a cause the design accepts."""
        return bool(self.total.get("valid", True))

    @property
    def per_unit(self) -> pd.DataFrame:
        """The report's ``per_<unit>`` frame (``per_subscription``, ``per_consumer``):
        one row per reader."""
        frame: pd.DataFrame = getattr(self, f"per_{self.unit}")
        return frame

    @property
    def summary(self) -> Summary:
        """The totals every design shares (:data:`SUMMARY_KEYS`), read from
        the report's own totals through ``summary_names``."""
        # keyed by a name or (for a count) a tuple of names; a tuple in the
        # causes' place is a report's own error, a KeyError here
        total: Mapping[Any, Any] = self.total
        names = self.summary_names

        def count(key: str) -> int:
            name = names.get(key, key)
            return int(sum(total[n] for n in name)) if isinstance(name, tuple) else int(total[name])

        return {
            "valid": self.valid,
            "delivered": count("delivered"),
            "duplicates": count("duplicates"),
            "lost": count("lost"),
            "pending": count("pending"),
            "duplicates_by_cause": causes(total[names.get("duplicates_by_cause", "duplicates_by_cause")]),
            "lost_by_cause": causes(total[names.get("lost_by_cause", "lost_by_cause")]),
        }


def refuse_unreadable(sim: object, design: str, checker: str) -> None:
    """Refuse, by name, a run a checker cannot read: one of another design (its
    ``design`` attribute names another; a reader without one, such as traces
    merged from several processes, is taken at its word), or one that
    recorded no trace (``traced`` False): a checker reads the trace, and
    without it would find nothing and call the run valid."""
    if not callable(getattr(sim, "trace", None)):
        raise TypeError(
            f"{checker} checks a {design} run (a simulation or real-time runtime, or what "
            f"offers its trace() and tables); got {type(sim).__name__}"
        )
    got = getattr(sim, "design", design)
    if got != design:
        raise TypeError(
            f"{checker} checks {design} runs; got {type(sim).__name__}, a run of the {got!r} "
            f"design: check it with its own design's checker, "
            f"fanoutsim.designs.design_of(run).check(run)"
        )
    if getattr(sim, "traced", True) is False:
        raise ValueError(
            f"{checker} reads the run's trace, and this run recorded none (trace=False): "
            f"run it again with trace=True to check it"
        )


# -- the phases' design-free parts ------------------------------------------------------
def any_between(marks: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Elementwise: some position of the sorted ``marks`` (trace positions of
    one kind of event: crashes, resets, ...) lies strictly between ``lo`` and
    ``hi``. Whether such an event happened between two deliveries is what most
    causes of a duplicate ask."""
    return np.searchsorted(marks, hi, side="left") > np.searchsorted(marks, lo, side="right")


def happened_between(marks: Sequence[int], lo: int, hi: int) -> bool:
    """:func:`any_between` for one pair, ``marks`` a sorted list: some mark
    lies strictly between ``lo`` and ``hi``."""
    return bisect_right(marks, lo) < bisect_left(marks, hi)


def first_cause(
    count: int, explanations: Sequence[tuple[str | np.ndarray, np.ndarray]], default: str = "unknown"
) -> np.ndarray:
    """Each of ``count`` rows' cause: the first of ``explanations`` that holds
    for it, else ``default``. ``explanations`` are ``(cause, holds)`` pairs in
    the design's order of precedence, ``holds`` a boolean array; ``cause`` is
    a name, or an array naming each row's own (for an explanation that carries
    its own reason)."""
    out = np.full(count, default, dtype=object)
    for cause, holds in reversed(explanations):  # the first listed is written last, so it wins
        out[holds] = cause if isinstance(cause, str) else np.asarray(cause, dtype=object)[holds]
    return out


class Repeats(NamedTuple):
    """A reader's deliveries sorted by item, then by trace position
    (:func:`repeats`): each one's ``item`` and trace position (``at``). ``order``
    maps the sorted rows back to the given ones; ``again`` indexes the sorted rows
    that repeat an earlier delivery of the same item, each with the position of the
    delivery just before it (``previous``)."""

    item: np.ndarray
    at: np.ndarray
    order: np.ndarray
    again: np.ndarray
    previous: np.ndarray

    @property
    def delivered(self) -> int:
        """How many items were delivered at least once."""
        return len(self.item) - len(self.again)


def repeats(item: np.ndarray, at: np.ndarray) -> Repeats:
    """What was delivered, and which deliveries were extra: ``item`` is each
    delivery's item (an integer rank: the order the items are reported in),
    ``at`` its trace position. Every delivery of an item after its first is a
    duplicate, to be explained by what happened between it and the one before."""
    order = np.lexsort((at, item))
    item, at = item[order], at[order]
    again = np.flatnonzero(item[1:] == item[:-1]) + 1
    return Repeats(item, at, order, again, at[again - 1])


def highest_before(values: np.ndarray, *groups: np.ndarray) -> np.ndarray:
    """For each row, in the order given, the highest of ``values`` among the
    earlier rows of its group (the rows equal in every one of ``groups``;
    one group without them), as floats; ``-inf`` for a group's first row. A
    row whose value is below it came after a higher one: out of order."""
    series = pd.Series(values)
    by = [pd.Series(g) for g in groups] if groups else [pd.Series(np.zeros(len(series), dtype=np.int64))]
    high = series.groupby(by, sort=False, dropna=False).cummax()
    before = high.groupby(by, sort=False, dropna=False).shift().to_numpy(dtype=float)
    return np.where(np.isnan(before), -np.inf, before)


def causes(counts: Mapping[Any, Any] | pd.DataFrame) -> dict[str, int]:
    """``{cause: count}`` as plain ints, from a mapping of counts or a frame's
    ``cause`` column."""
    items = counts["cause"].value_counts() if hasattr(counts, "columns") else counts
    return {str(c): int(n) for c, n in items.items()}


def problems(report: Any) -> list[str]:
    """What ``report`` gets wrong against the contract; empty when it conforms.
    (``report``: any object, which this asks what members it has.)"""
    out = _member_problems(report)
    if out:
        return out
    if not isinstance(report, CheckResult):
        missing = [m for m in ("valid", "per_unit", "summary") if not hasattr(report, m)]
        return [f"{type(report).__name__} lacks {', '.join(missing) or 'a member of CheckResult'}"]
    summary: Mapping[str, Any] = report.summary  # what this checks: not yet known to be a Summary
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        return [f"summary lacks {', '.join(missing)}"]
    return _verdict_problems(report, summary) + _count_problems(report, summary) + _per_unit_problems(report, summary)


def _frames(report: Any) -> tuple[tuple[str, Any, str], ...]:
    """The report's fault frames: (summary key, frame, summary key of its causes)."""
    return (("duplicates", report.duplicates, "duplicates_by_cause"), ("lost", report.lost, "lost_by_cause"))


def _member_problems(report: Any) -> list[str]:
    """The members every check report has: ``total`` (with ``valid`` and
    ``lost``), ``duplicates`` and ``lost`` frames (with a ``cause`` column), ``unit``."""
    missing = [m for m in ("total", "duplicates", "lost", "unit") if not hasattr(report, m)]
    if missing:
        return [f"{type(report).__name__} lacks {', '.join(missing)}"]
    out = [f"total has no {k!r}" for k in ("valid", "lost") if k not in report.total]
    for name, frame, _ in _frames(report):
        if "cause" not in frame.columns:
            out.append(f"the {name} frame has no 'cause' column")
    return out


def _verdict_problems(report: CheckResult, summary: Mapping[str, Any]) -> list[str]:
    """``unit`` names a column; ``.valid``, the summary's and the total's agree."""
    out: list[str] = []
    total = report.total
    if not isinstance(report.unit, str) or not report.unit.isidentifier():
        out.append(
            f"unit is {report.unit!r}; it must be an identifier: the design's word for one reader, "
            f"which names the per_unit frame's column"
        )
    if (
        not isinstance(report.valid, bool)
        or summary["valid"] is not report.valid
        or bool(total.get("valid")) is not report.valid
    ):
        out.append(
            f"valid disagrees: .valid {report.valid!r}, summary {summary['valid']!r}, total {total.get('valid')!r}"
        )
    return out


def _count_problems(report: CheckResult, summary: Mapping[str, Any]) -> list[str]:
    """The summary's counts are counts, and agree with the frames (rows and
    causes) and with the total's ``lost``."""
    out: list[str] = []
    for k in ("delivered", "duplicates", "lost", "pending"):
        v = summary[k]
        if not is_whole(v) or v < 0:
            out.append(f"summary[{k!r}] must be a count (int >= 0), got {v!r}")
    for name, frame, key in _frames(report):
        if len(frame) != summary[name]:
            out.append(f"summary[{name!r}] is {summary[name]} but the {name} frame has {len(frame)} rows")
        if summary[key] != causes(frame):
            out.append(f"summary[{key!r}] is {summary[key]} but the {name} frame's causes are {causes(frame)}")
    if summary["lost"] != report.total.get("lost"):
        out.append(f"summary['lost'] {summary['lost']} != total['lost'] {report.total.get('lost')}")
    return out


def _per_unit_problems(report: CheckResult, summary: Mapping[str, Any]) -> list[str]:
    """``per_unit`` has one row per unit, and its ``lost`` sum to the summary's."""
    per = report.per_unit
    if report.unit not in per.columns or "lost" not in per.columns:
        return [f"per_unit needs columns {report.unit!r} and 'lost', has {list(per.columns)}"]
    out: list[str] = []
    if not per[report.unit].is_unique:
        out.append(f"per_unit has more than one row for a {report.unit}")
    if int(per["lost"].sum()) != summary["lost"]:
        out.append(f"per_unit's lost sum to {int(per['lost'].sum())}, summary['lost'] is {summary['lost']}")
    return out


# -- the verdicts item by item: what ``fanoutsim explain --duplicates / --lost`` lists ---
VERDICT_KEYS = ("kind", "reader", "item", "deliveries", "cause")


def item_verdicts(duplicates: pd.DataFrame, lost: pd.DataFrame, *, reader: str, item: str) -> list[dict[str, Any]]:
    """A check's verdicts one item at a time, JSON-ready, in the frames' order
    (the checker's: by reader, then as the run went). ``reader`` and ``item``
    name the frames' columns (a design's words: a subscription's label and a
    firing, a consumer and a seq). Each row has :data:`VERDICT_KEYS`:

    * per (reader, item, cause) of ``duplicates`` (one row per extra
      delivery): kind ``"duplicate"``, ``deliveries`` the times the item
      reached that reader (1 + its extra deliveries, whatever their causes);
    * per row of ``lost``: kind ``"lost"``, ``deliveries`` 0.

    Items are named as text (a seq too), as a command line names them."""
    rows: list[dict[str, Any]] = []
    extra = list(zip(duplicates[reader].astype(str), duplicates[item].astype(str), duplicates["cause"].astype(str)))
    per_item = Counter((who, what) for who, what, _ in extra)
    for who, what, cause in dict.fromkeys(extra):  # each (reader, item, cause) once, as first met
        rows.append(
            {"kind": "duplicate", "reader": who, "item": what, "deliveries": 1 + per_item[(who, what)], "cause": cause}
        )
    for who, what, cause in zip(lost[reader].astype(str), lost[item].astype(str), lost["cause"]):
        rows.append({"kind": "lost", "reader": who, "item": what, "deliveries": 0, "cause": str(cause)})
    return rows
