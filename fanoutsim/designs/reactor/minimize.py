"""Shrink a failing fault plan to the smallest story that still fails.

Given a scenario whose run fails a check (``failing(report) -> True``), the
shrinker removes faults one at a time while the run still fails (a greedy
delta-debugging pass, repeated until nothing more can go), then simplifies
each survivor's numbers (downtimes to zero, probabilities to one), and finally
halves the run's length while it still fails. Every candidate is a full,
seeded, deterministic run, so the result reproduces exactly.

    >>> from fanoutsim.designs.reactor.scenario import load_scenario
    >>> scenario = load_scenario("fanoutsim/examples/crashes.toml")
    >>> small = minimize(scenario, lambda report: report.total["extra_deliveries"] > 0)  # doctest: +SKIP
    >>> print(small)                                                                       # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from fanoutsim.designs.reactor.checker import CheckReport, check
from fanoutsim.kernel.dist import Dist
from fanoutsim.kernel.faults import FaultPlan
from fanoutsim.kernel.validate import is_whole


@dataclass
class Minimized:
    """What :func:`minimize` found: the smallest ``plan`` that still fails, the
    shortest run (``until``, virtual seconds) it fails in, the failing ``report``
    of that run, and how many ``runs`` the search made. ``str()`` lists the plan."""

    plan: FaultPlan
    until: float
    report: CheckReport
    runs: int

    def __str__(self) -> str:
        lines = [
            f"minimal failing plan ({len(self.plan.faults)} fault(s), until={self.until:g} s, "
            f"found in {self.runs} runs):"
        ]
        lines += [f"  - {f!r}" for f in self.plan.faults]
        return "\n".join(lines)


def minimize(
    scenario,
    failing: Callable[[CheckReport], bool],
    *,
    seed: int | None = None,
    until: float | None = None,
    max_runs: int = 200,
) -> Minimized:
    """Shrink ``scenario.faults`` (and its length) while ``failing(report)`` stays
    true of the checker's report: drop whole faults, simplify the numbers of those
    left, halve the run. Each candidate is a full seeded run of the scenario (its
    own seed, or ``seed``; its own length, or ``until`` seconds), at most
    ``max_runs`` of them. Returns a :class:`Minimized`. Refuses (ValueError) a
    scenario without a fault plan, one that does not fail as given, and a
    ``max_runs`` that is not an integer >= 1."""
    if scenario.faults is None:
        raise ValueError("the scenario has no fault plan to minimize")
    if not is_whole(max_runs) or max_runs < 1:
        raise ValueError(f"max_runs must be an integer >= 1 (runs of the scenario it may make), got {max_runs!r}")
    until = scenario.until if until is None else until
    runs = 0

    def fails(plan: FaultPlan, t: float) -> CheckReport | None:
        nonlocal runs
        if runs >= max_runs:
            return None
        runs += 1
        sim = dataclasses.replace(scenario, faults=plan).run(seed=seed, until=t)
        report = check(sim)
        return report if failing(report) else None

    plan = scenario.faults
    report = fails(plan, until)
    if report is None:
        raise ValueError("the scenario does not fail the check as given; nothing to minimize")

    # 1. drop whole faults
    shrunk = True
    while shrunk:
        shrunk = False
        for i in range(len(plan.faults)):
            candidate = FaultPlan(plan.faults[:i] + plan.faults[i + 1 :], plan.seed)
            r = fails(candidate, until)
            if r is not None:
                plan, report, shrunk = candidate, r, True
                break
    # 2. simpler numbers for what is left
    for i, fault in enumerate(plan.faults):
        for simpler in _simpler(fault):
            candidate = FaultPlan(plan.faults[:i] + (simpler,) + plan.faults[i + 1 :], plan.seed)
            r = fails(candidate, until)
            if r is not None:
                plan, report, fault = candidate, r, simpler
    # 3. a shorter run
    while until > 1.0:
        r = fails(plan, until / 2)
        if r is None:
            break
        until, report = until / 2, r
    return Minimized(plan, until, report, runs)


def _simpler(fault) -> list:
    """Candidate simplifications of one fault, most aggressive first."""
    out = []
    names = {f.name for f in dataclasses.fields(fault)}
    if "downtime" in names and fault.downtime != Dist("fixed", 0.0):
        out.append(dataclasses.replace(fault, downtime=0.0))
    if "probability" in names and fault.probability < 1.0:
        out.append(dataclasses.replace(fault, probability=1.0))
    if "window" in names and fault.window is not None and getattr(fault, "kind", "") != "stall":
        out.append(dataclasses.replace(fault, window=None))
    return out
