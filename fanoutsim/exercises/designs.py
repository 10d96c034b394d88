"""The exercises of lessons 12 (one workload through the three designs) and 13 (the model
against a real PostgreSQL)."""

from __future__ import annotations

from functools import lru_cache

from fanoutsim.exercises import NotAnswered, a_dict, a_number, close_to, exercise, first_miss, function

_DESIGNS = ("reactor", "outbox", "leases")
_NEEDS = {
    "a": (
        "outbox",
        "milliseconds from the same database: a change and its outbox row commit together, and a "
        "hint wakes the dispatcher at once.",
    ),
    "b": (
        "leases",
        "slow work that fails: leases give each event a worker, retries with a delay, and a dead "
        "letter after ten attempts.",
    ),
    "c": (
        "reactor",
        "a few firings a minute and a second's delay: a poll loop over a log is the simplest thing that works.",
    ),
}


@exercise(
    "12.1",
    "which design?",
    mistake={"a": "reactor", "b": "leases", "c": "reactor"},
    shape=a_dict(_NEEDS, _DESIGNS),
)
def _which(answer):
    if any(answer.get(k, ...) is ... for k in _NEEDS):
        raise NotAnswered("Answer every need: replace each `...` with a design's name.")
    for key, (want, why) in _NEEDS.items():
        got = answer[key].strip().lower()  # its shape made it one of _DESIGNS
        if got != want:
            return False, f"({key}): you chose the {got}.", f"Think of what ({key}) needs most — {why}"
    return (
        True,
        "The outbox for fast derived state, leases for slow failing work, the reactor for simple durable starts.",
        "",
    )


def _the_step(poll):
    return 0.01  # the hinted latency: as if the hints still came


@lru_cache(maxsize=4)  # a check runs it, and its verdict quotes it again
def _measured_median(poll: float) -> float:
    """The exercise's run, as its text describes it: the median commit -> handled
    latency of an outbox whose every hint is lost."""
    from fanoutsim.analysis import outbox as oa
    from fanoutsim.designs.outbox import OutboxConfig
    from fanoutsim.designs.outbox.simulation import OutboxSimulation
    from fanoutsim.faults import FaultPlan, Notifications

    config = OutboxConfig(safety_poll_interval=poll)
    sim = OutboxSimulation(config, seed=0, faults=FaultPlan([Notifications(drop=1.0)]))
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(2.0, stop=300.0)
    sim.run(until=300.0 + poll + 1)
    return float(oa.handled_latency(sim)["latency_s"].median())


def _without_hints_hint(poll: float, got: float) -> str:
    """The hint for a median off the run's: what the number looks like it is."""
    if got < 0.1:
        return (
            "Drop every hint: `faults=FaultPlan([Notifications(drop=1.0)])`; then only the safety poll "
            "wakes the dispatcher."
        )
    if close_to(got, poll / 2, rel=0.2):
        return (
            "About P/2, as a poll loop's wait should be, but not this run's: measure it (`seed=0`, one consumer "
            "of 0.01 s a row, 2 commits/s for 300 s, and run on past 300 s until every row is handled)."
        )
    return "Take the median of `latency_s` over every row of the run."


@exercise(
    "12.2",
    "an outbox without its hints",
    mistake=_the_step,
    shape=function("without_hints(poll)", a_number("of seconds")),
)
def _without_hints(fn):
    miss = first_miss(fn, (1.0, 4.0), _measured_median, rel=0.002)
    if miss is None:
        return (
            True,
            f"Medians of {_measured_median(1.0):.3f} s at a 1 s poll and {_measured_median(4.0):.3f} s at 4 s: "
            "without its hints the outbox is a poll loop like the reactor, the wait uniform under the "
            "interval, P/2 on average.",
            "",
        )
    (poll,), got, want = miss
    return (
        False,
        f"At a {poll:g} s safety poll you found a median of {got:.3f} s; the run gives {want:.3f} s.",
        _without_hints_hint(poll, got),
    )


# -- 13 · the model against a real PostgreSQL ------------------------------------------------------


@lru_cache(maxsize=2)  # a check runs it, and a verdict quotes it again
def _reference_lost_late(read_mode: str) -> int:
    """The rows lost in the run 13.1 describes (seed 0)."""
    from fanoutsim.designs.outbox import OutboxConfig
    from fanoutsim.designs.outbox.checker import check_outbox
    from fanoutsim.designs.outbox.simulation import OutboxSimulation
    from fanoutsim.faults import FaultPlan, LateCommit

    config = OutboxConfig(safety_poll_interval=0.5, read_mode=read_mode, gap_timeout=5.0)
    sim = OutboxSimulation(config, seed=0, faults=FaultPlan([LateCommit(probability=0.1, delay=0.8)]))
    sim.register_consumer("indexer", duration=0.001)
    sim.add_workload(5.0, stop=120.0)
    sim.run(until=130.0)
    return int(check_outbox(sim).total["lost"])


def _mode_ignored(read_mode):
    return _reference_lost_late("all")  # read_mode never passed to the config


@exercise(
    "13.1",
    "the late-commit hole, simulated",
    mistake=_mode_ignored,
    shape=function("lost_late(read_mode)", a_number("of rows")),
)
def _late(fn):
    miss = first_miss(fn, ("all", "gap"), _reference_lost_late, rel=0.0)
    if miss is None:
        return (
            True,
            "A seq taken at insert and visible at commit slips under a cursor that reads past gaps; waiting "
            "at the gap closes the hole, as on PostgreSQL.",
            "",
        )
    (mode,), got, want = miss
    if mode == "gap":
        return (
            False,
            f'Under `read_mode="gap"` you found {got:.0f} lost; it waits at the gap and loses none.',
            "Pass `read_mode=read_mode` to `OutboxConfig`: the dispatcher then waits for the missing seq.",
        )
    if got == 0:
        return (
            False,
            'Under `read_mode="all"` you found nothing lost; the late commits slip under the cursor.',
            "Hold 10% of commits open 0.8 s with `LateCommit(probability=0.1, delay=0.8)` in the fault plan.",
        )
    return (
        False,
        f'Under `read_mode="all"` you found {got:.0f} lost; the run described loses {want}.',
        "Run exactly the run described, with the default seed (0): `LateCommit(probability=0.1, delay=0.8)`, "
        "5 commits/s to 120 s (`add_workload(5.0, stop=120.0)`), `sim.run(until=130.0)`, then count "
        "`fs.check_outbox(sim).total['lost']`.",
    )


@lru_cache(maxsize=4)
def _reference_extra(pollers: int) -> int:
    """The checker's extra deliveries in the run 13.2 describes (seed 0)."""
    import fanoutsim as fs
    from fanoutsim.faults import FaultPlan, Pollers

    sim = fs.Simulation(seed=0, faults=FaultPlan([Pollers(pollers)]) if pollers > 1 else None)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", 5.0)
    sim.run(until=60)
    return int(fs.check(sim).total["extra_deliveries"])


def _pollers_times_nothing(pollers):
    return 0  # as if replicas shared the work


def _pollers_hint(pollers: int, got: float, want: int) -> str:
    """The hint for a count off the run's: what the number looks like it is."""
    if pollers == 1:
        if close_to(got, _reference_extra(2), rel=0.2):
            return (
                "`Pollers(n)` counts every poller, the runner included: one poller is no fault plan at all, "
                "the runner alone."
            )
        return "No fault plan for one poller: the runner alone polls."
    if got < 100:
        return "Add `Pollers(pollers)` to the fault plan, and read `fs.check(sim).total['extra_deliveries']`."
    if close_to(got, (pollers - 1) * 5.0 * 60, rel=0.002):
        return (
            "That is the expectation, (pollers - 1) × 5 × 60, not the run: measure it. Poisson firings come "
            "a little faster or slower than 5 a second, and the last ones are not yet polled at 60 s."
        )
    if pollers > 2 and close_to(got, _reference_extra(2), rel=0.002):
        return (
            "Each poller beyond the first delivers every batch once more: pass `Pollers(pollers)`, the "
            "number you are given, and run it."
        )
    if got > want:
        return "Run 60 s of 5 firings a second (`sim.run(until=60)`), no longer, with the default seed (0)."
    return "Fire 5 a second (`sim.add_workload('r', 5.0)`) and run the clock to t = 60 s, with the default seed (0)."


@exercise(
    "13.2",
    "several pollers, simulated",
    mistake=_pollers_times_nothing,
    shape=function("extra_deliveries(pollers)", a_number("of deliveries")),
)
def _pollers(fn):
    miss = first_miss(fn, (1, 2, 3), _reference_extra, rel=0.0)
    if miss is None:
        return (
            True,
            f"Two pollers (the runner and one replica) delivered {_reference_extra(2):.0f} firings twice: no "
            "cursor fixes that, one poller per subscription does.",
            "",
        )
    (pollers,), got, want = miss
    if pollers == 1:
        said = f"With one poller you found {got:.0f} extra deliveries; it makes none."
    else:
        said = f"With {pollers} pollers you found {got:.0f} extra deliveries; the run described makes {want}."
    return False, said, _pollers_hint(pollers, got, want)
