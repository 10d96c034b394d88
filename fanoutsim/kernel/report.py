"""Plain-text report pieces every design's report uses: number formats,
aligned tables, the header. The text depends only on the values given — no
wall-clock values, no environment — so the same seed prints the same report."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
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
        lines.append("  duplicate causes: " + cause_text(total["duplicates_by_cause"]))
    if total["lost_by_cause"]:
        lines.append("  loss causes: " + cause_text(total["lost_by_cause"]))
    return lines
