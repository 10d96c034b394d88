"""Plain-text report pieces every design's report uses: number formats,
aligned tables, the header. The text depends only on the values given — no
wall-clock values, no environment — so the same seed prints the same report."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

MISSING = "-"


def ms(seconds: float | None) -> str:
    return MISSING if seconds is None else f"{seconds * 1000:.1f}"


def secs(seconds: float | None, digits: int = 1) -> str:
    return MISSING if seconds is None else f"{seconds:.{digits}f}"


def count(n: int | float | None) -> str:
    if n is None:
        return MISSING
    return f"{n:,}" if float(n).is_integer() else f"{n:,.2f}"


def clip(text: str | None, width: int) -> str:
    if text is None:
        return MISSING
    return text if len(text) <= width else text[: width - 3] + "..."


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str, indent: str = "  ") -> list[str]:
    """Aligned columns; ``align`` has one ``<`` or ``>`` per column."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(cells, widths, align)]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def header(title: str, report: dict[str, Any]) -> list[str]:
    """The title (with the scenario's name), underlined, and the run's span."""
    if report.get("scenario"):
        title += f": {report['scenario']}"
    described = textwrap.wrap(report["description"], 100) if report.get("description") else []
    return [
        title,
        "=" * len(title),
        *described,
        f"seed {report['seed']}, virtual time {secs(report['time_span_s'])} s ({report['start']} .. {report['end']})",
    ]


def cause_text(by_cause: dict[str, int]) -> str:
    return ", ".join(f"{c} {count(n)}" for c, n in sorted(by_cause.items()))


def with_causes(n: int, by_cause: dict[str, int]) -> str:
    return f"{count(n)} ({cause_text(by_cause)})" if n and by_cause else count(n)


def share(part: int, whole: int) -> str:
    return f" ({part / whole:.1%})" if whole else ""


def run_span(sim: Any, name: str | None, design: str) -> dict[str, Any]:
    """The keys every design's report starts with: the scenario, the design,
    the seed and the run's span (RFC 3339 start and end, virtual seconds)."""
    from fanoutsim.kernel.timeutil import rfc3339

    return {
        "scenario": name,
        "design": design,
        "seed": int(sim.seed),
        "start": rfc3339(sim.start_us),
        "end": rfc3339(sim.now_us()),
        "time_span_s": float(sim.now),
    }


def cause_lines(total: dict[str, Any]) -> list[str]:
    """A verdict's lines of duplicate and loss causes (none when there are none)."""
    lines = []
    if total["duplicates_by_cause"]:
        # counted in extra deliveries, as "duplicated N (+M extra deliveries)" above it says
        lines.append("  extra deliveries by cause: " + cause_text(total["duplicates_by_cause"]))
    if total["lost_by_cause"]:
        lines.append("  loss causes: " + cause_text(total["lost_by_cause"]))
    return lines


def short_secs(seconds: float | None) -> str:
    """Seconds to the millisecond, without trailing zeros: ``0.5``, ``2``."""
    return secs(seconds, 3).rstrip("0").rstrip(".")


def report_head(title: str, report: dict[str, Any], settings: Callable[[dict[str, Any]], str]) -> list[str]:
    """A report's first lines: the header, the run's settings in one line
    (``settings(config)``, when the report has a config) and a blank line."""
    out = header(title, report)
    config = report.get("config", {})
    if config:
        out.append(settings(config))
    out.append("")
    return out


def fault_rows(totals: dict[str, Any], duplicates: str = "duplicates") -> list[tuple[str, int, str]]:
    """The totals' duplicates (counted under ``duplicates``) and lost rows, each with its causes."""
    return [
        ("duplicates", totals[duplicates], cause_text(totals["duplicates_by_cause"])),
        ("lost", totals["lost"], cause_text(totals["lost_by_cause"])),
    ]


def totals_table(rows: Sequence[tuple[str, int | float | None, str]]) -> list[str]:
    """The run's totals: a label, its count and a detail per row."""
    return table(["totals", "count", "detail"], [[label, count(n), detail] for label, n, detail in rows], "<><")


# A column of a table of dicts: its header, its alignment (< or >) and its cell.
Column = tuple[str, str, Callable[[dict[str, Any]], str]]

# the delivery columns: what was delivered, duplicated and lost (each with its causes)
DELIVERY_COLUMNS: tuple[Column, ...] = (
    ("delivered", ">", lambda r: count(r["delivered"])),
    ("duplicates", ">", lambda r: with_causes(r["duplicates"], r["duplicates_by_cause"])),
    ("lost", ">", lambda r: with_causes(r["lost"], r["lost_by_cause"])),
)


# the latency columns: p50, p99 and max of ``latency_s``, in seconds
def _latency_cell(q: str) -> Callable[[dict[str, Any]], str]:
    return lambda r: secs(r["latency_s"][q], 3)


LATENCY_COLUMNS: tuple[Column, ...] = tuple((q, ">", _latency_cell(q)) for q in ("p50", "p99", "max"))


def columns_table(title: str, columns: Sequence[Column], items: Sequence[dict[str, Any]], note: str = "") -> list[str]:
    """A titled table, a row per item and a cell per column, and ``note`` under
    it; ``(none)`` when there are no items."""
    if not items:
        return [title, "  (none)"]
    rows = [[cell(item) for _, _, cell in columns] for item in items]
    out = [title, *table([h for h, _, _ in columns], rows, "".join(a for _, a, _ in columns))]
    return [*out, note] if note else out


def verdict_head(name: str, checked: Any, totals: Sequence[str | tuple[str, str]]) -> list[str]:
    """A verdict's first lines: ``name check: VALID`` (or INVALID), the totals
    of ``checked.total`` in one line — each a key, shown as itself, or a
    ``(label, key)`` — and the duplicate and loss causes."""
    t = checked.total
    labelled = [(total, total) if isinstance(total, str) else total for total in totals]
    line = "  ".join(f"{label} {t[key]}" for label, key in labelled)
    return [f"{name} check: {'VALID' if checked.valid else 'INVALID'}", f"  {line}", *cause_lines(t)]


def unexplained_lines(bad: Iterable[tuple[str, Any]], by: str, ids: Callable[[Any], list[str]], noun: str) -> list[str]:
    """Per group ``by`` of each ``(what, frame)`` of ``bad`` (rows with a
    ``cause``): a line naming the causes and the first ten ``ids(group)``."""
    lines = []
    for what, frame in bad:
        for owner, g in frame.groupby(by, sort=True):
            shown = ids(g)
            listed = ", ".join(shown[:10]) + (f", ... ({len(shown)} in all)" if len(shown) > 10 else "")
            causes = ", ".join(sorted(set(g["cause"])))
            lines.append(f"  {owner}: {what} ({causes}): {noun} {listed}")
    return lines


def cause_words(causes: Mapping[str, Mapping[str, str]], kind: str, cause: str) -> str:
    """A cause in a design's plain words (its ``causes``), for a verdict of
    ``kind`` ``"duplicate"`` or ``"lost"`` (:func:`fanoutsim.kernel.check.item_verdicts`'s kinds)."""
    return causes.get("duplicates" if kind == "duplicate" else "lost", {}).get(cause, "")


def verdict_text(row: Mapping[str, Any], causes: Mapping[str, Mapping[str, str]]) -> str:
    """One item's verdict as a story tells it: the cause's key and the plain
    words the report prints beside it."""
    head = f"a duplicate ({row['deliveries']} deliveries)" if row["kind"] == "duplicate" else "lost"
    words = cause_words(causes, row["kind"], row["cause"])
    return f"{head}, by {row['cause']}" + (f": {words}" if words else "")


def verdicts_below(
    verdicts: Sequence[Mapping[str, Any]] | None, listed: set[str], causes: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The lines a story adds below the readers it listed: the verdicts of
    readers it did not list (retired, gone since), or that the run's check
    found the item neither duplicated nor lost (none: no check kept verdicts)."""
    if verdicts is None:
        return []
    if not verdicts:
        return ["  the run's check found it neither duplicated nor lost"]
    return [f"  -> {v['reader']}: {verdict_text(v, causes)}" for v in verdicts if v["reader"] not in listed]
