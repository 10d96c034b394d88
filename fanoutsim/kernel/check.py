"""The checker contract: what every design's checker returns.

Each design's checker reads a finished run's trace and tables and returns a
report with its own totals and frames (their names are the design's: a
reactor *subscription*, an outbox or leases *consumer*). Beside them every
report has the same members, so a tool that works across designs reads them
without asking which design it holds:

``valid``        True when every loss and duplicate has a cause the design
                 accepts (``total["valid"]``);
``total``        the design's JSON-ready totals, with at least ``valid`` and
                 ``lost`` (the golden results compare this dict);
``summary``      the totals every design shares, under one set of names:
                 :data:`SUMMARY_KEYS` — ``delivered`` (expected items
                 delivered at least once), ``duplicates`` (extra deliveries),
                 ``lost``, ``pending`` and the two ``*_by_cause`` counts;
``unit``         what one reader is: ``"subscription"`` or ``"consumer"``;
``per_unit``     one row per reader, keyed by a column named ``unit``, with a
                 ``lost`` column (``per_subscription`` / ``per_consumer``);
``duplicates``   one row per extra delivery, with a ``cause`` column;
``lost``         one row per loss, with a ``cause`` column.

Deliveries are counted where the reader's effect lands (an execution row, a
consumer's ``fn``, a worker's effect), never where the step that caused it
finished. :func:`problems` lists what a report gets wrong against this
contract (an empty list: it conforms).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable
from fanoutsim.kernel.validate import is_whole

if TYPE_CHECKING:
    import pandas as pd

SUMMARY_KEYS = ("valid", "delivered", "duplicates", "lost", "pending", "duplicates_by_cause", "lost_by_cause")
UNITS = ("subscription", "consumer")


@runtime_checkable
class CheckResult(Protocol):
    """What every design's checker returns (see the module's text)."""

    total: dict
    duplicates: "pd.DataFrame"
    lost: "pd.DataFrame"
    unit: str

    @property
    def valid(self) -> bool: ...

    @property
    def per_unit(self) -> "pd.DataFrame": ...

    @property
    def summary(self) -> dict: ...


class CheckedReport:
    """The contract's shared members, for a report dataclass that has
    ``total`` and a ``per_<unit>`` frame: ``valid`` and ``per_unit``. The
    report implements ``summary`` from its own totals."""

    unit = "consumer"

    @property
    def valid(self) -> bool:
        return bool(self.total.get("valid", True))

    @property
    def per_unit(self) -> "pd.DataFrame":
        return getattr(self, f"per_{self.unit}")


def refuse_unreadable(sim, design: str, checker: str) -> None:
    """Refuse, by name, a run a checker cannot read: one of another design (its
    ``design`` attribute names another; a reader without one, such as traces
    merged from several processes, is taken at its word), or one that
    recorded no trace (``traced`` False): a checker reads the trace, and
    without it would find nothing and call the run valid."""
    if not callable(getattr(sim, "trace", None)):
        raise TypeError(f"{checker} checks a {design} run (a simulation or real-time runtime, or what "
                        f"offers its trace() and tables); got {type(sim).__name__}")
    got = getattr(sim, "design", design)
    if got != design:
        raise TypeError(f"{checker} checks {design} runs; got {type(sim).__name__}, a run of the {got!r} "
                        f"design: check it with its own design's checker, "
                        f"fanoutsim.designs.design_of(run).check(run)")
    if getattr(sim, "traced", True) is False:
        raise ValueError(f"{checker} reads the run's trace, and this run recorded none (trace=False): "
                         f"run it again with trace=True to check it")


def causes(counts) -> dict:
    """``{cause: count}`` as plain ints, from a mapping of counts or a frame's
    ``cause`` column."""
    if hasattr(counts, "columns"):
        counts = counts["cause"].value_counts()
    return {str(c): int(n) for c, n in counts.items()}


def problems(report) -> list[str]:
    """What ``report`` gets wrong against the contract; empty when it conforms."""
    out = []
    missing = [m for m in ("total", "duplicates", "lost", "unit") if not hasattr(report, m)]
    if missing:
        return [f"{type(report).__name__} lacks {', '.join(missing)}"]
    total = report.total
    for k in ("valid", "lost"):
        if k not in total:
            out.append(f"total has no {k!r}")
    frames = (("duplicates", report.duplicates, "duplicates_by_cause"), ("lost", report.lost, "lost_by_cause"))
    for name, frame, _ in frames:
        if "cause" not in frame.columns:
            out.append(f"the {name} frame has no 'cause' column")
    if out:
        return out
    if not isinstance(report, CheckResult):
        missing = [m for m in ("valid", "per_unit", "summary") if not hasattr(report, m)]
        return [f"{type(report).__name__} lacks {', '.join(missing) or 'a member of CheckResult'}"]
    summary = report.summary
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        out.append(f"summary lacks {', '.join(missing)}")
        return out
    if report.unit not in UNITS:
        out.append(f"unit is {report.unit!r}; allowed: {', '.join(UNITS)}")
    if not isinstance(report.valid, bool) or summary["valid"] is not report.valid \
            or bool(total.get("valid")) is not report.valid:
        out.append(f"valid disagrees: .valid {report.valid!r}, summary {summary['valid']!r}, "
                   f"total {total.get('valid')!r}")
    for k in ("delivered", "duplicates", "lost", "pending"):
        v = summary[k]
        if not is_whole(v) or v < 0:
            out.append(f"summary[{k!r}] must be a count (int >= 0), got {v!r}")
    for name, frame, key in frames:
        if len(frame) != summary[name]:
            out.append(f"summary[{name!r}] is {summary[name]} but the {name} frame has {len(frame)} rows")
        if summary[key] != causes(frame):
            out.append(f"summary[{key!r}] is {summary[key]} but the {name} frame's causes are {causes(frame)}")
    if summary["lost"] != total.get("lost"):
        out.append(f"summary['lost'] {summary['lost']} != total['lost'] {total.get('lost')}")
    per = report.per_unit
    if report.unit not in per.columns or "lost" not in per.columns:
        out.append(f"per_unit needs columns {report.unit!r} and 'lost', has {list(per.columns)}")
    else:
        if not per[report.unit].is_unique:
            out.append(f"per_unit has more than one row for a {report.unit}")
        if int(per["lost"].sum()) != summary["lost"]:
            out.append(f"per_unit's lost sum to {int(per['lost'].sum())}, summary['lost'] is {summary['lost']}")
    return out
