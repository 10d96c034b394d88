"""The outbox lessons' exercises (notebooks 8 and 9: Subspace's transactional outbox)."""

from __future__ import annotations

from fanoutsim.exercises import NotAnswered, a_number, call, close_to, exercise, first_miss, function, number

# -- 8 · lost hints and the safety poll ---------------------------------------------------------


def _half_the_poll(poll):
    return poll / 2  # the median wait when every hint is lost, not the worst


def _measured_worst_wait(poll: float) -> float:
    """The exercise's run, as its text describes it: the worst commit -> handled latency."""
    from fanoutsim.analysis import outbox as oa
    from fanoutsim.designs.outbox import OutboxConfig
    from fanoutsim.designs.outbox.simulation import OutboxSimulation
    from fanoutsim.faults import FaultPlan, Notifications

    sim = OutboxSimulation(OutboxConfig(safety_poll_interval=poll), seed=0, faults=FaultPlan([Notifications(drop=1.0)]))
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(0.2, stop=600)
    sim.run(until=600 + poll + 1)
    return float(oa.handled_latency(sim)["latency_s"].max())


@exercise(
    "8.1",
    "the worst wait",
    mistake=_half_the_poll,
    shape=function("worst_wait(poll)", a_number("of seconds")),
)
def _worst_wait(fn):
    for poll in (2.0, 10.0):
        got = number(call(fn, poll))
        want = _measured_worst_wait(poll)
        if not close_to(got, want, rel=0.002):
            if close_to(got, poll, rel=0.002) or close_to(got, poll + 0.01, rel=0.002):
                hint = (
                    "That is the bound, not the run: measure it. The worst row waits as long as it "
                    "committed before the next poll, which is at most the interval."
                )
            elif close_to(got, poll / 2, rel=0.2):
                hint = (
                    "Half the interval is the typical wait; the unlucky row commits just after a poll and "
                    "waits nearly the whole interval."
                )
            else:
                hint = (
                    "Drop every hint (`Notifications(drop=1.0)`) so that only the safety poll wakes the "
                    "dispatcher, and take the max of `latency_s`."
                )
            return (
                False,
                f"At a {poll:g} s safety poll you found a worst wait of {got:.3f} s; the run gives {want:.3f} s.",
                hint,
            )
    return (
        True,
        "The safety poll bounds the cost of a lost hint: at most one interval (plus the step), never a row.",
        "",
    )


def _one_more(budget):
    return budget + 1  # the first attempt counted apart from the budget


@exercise(
    "8.2",
    "a retry budget",
    mistake=_one_more,
    shape=function("attempts_before_parking(budget)", a_number("of attempts")),
)
def _retry_budget(fn):
    miss = first_miss(fn, (2, 4), lambda budget: budget, rel=0.0)
    if miss is None:
        return True, "After its retry budget the row is parked with its error, and the consumer moves on.", ""
    (budget,), got, _ = miss
    return (
        False,
        f"With a retry budget of {budget} you found {got:.0f} attempts in `parked`; there are {budget}.",
        "The budget counts every failed attempt, the first included; read `sim.parked()['attempts']`.",
    )


# -- 9 · derived state, the reserved connection ------------------------------------------------


def _count_changes(view, row):
    view[row["ref"]] = view.get(row["ref"], 0) + 1  # a counter: a re-delivery counts twice


@exercise(
    "9.1",
    "an idempotent view",
    mistake=_count_changes,
    shape=function("handle(view, row)", does="that writes what it keeps per page into the dict `view`"),
)
def _idempotent_view(fn):
    from fanoutsim.designs.outbox.simulation import OutboxSimulation
    from fanoutsim.faults import CrashAtPoint, FaultPlan

    probe: dict = {}
    fn(probe, {"seq": 1, "ref": "p1", "topic": "pages", "kind": "changed"})
    if not probe:
        raise NotAnswered("Your function writes nothing into `view` yet: write its body and run the cell again.")
    plan = FaultPlan(
        tuple(CrashAtPoint("dispatch.after_handle_before_cursor", nth=20 * (i + 1), downtime=1.0) for i in range(3))
    )
    sim = OutboxSimulation(seed=0, faults=plan)
    view: dict = {}
    sim.register_consumer("view", lambda row: fn(view, row))
    sim.add_workload(2.0, pages=5, stop=60.0)
    sim.run(until=90.0)
    out = sim.outbox()
    want = out.groupby("ref")["seq"].max().astype(int).to_dict()
    duplicates = int((sim.trace()["kind"] == "handled").sum()) - len(out)
    if {k: int(v) for k, v in view.items()} != want:
        return (
            False,
            f"After {duplicates} re-deliveries your view is off for "
            f"{sum(view.get(k) != v for k, v in want.items())} of {len(want)} pages.",
            "Keep the highest seq per page: `view[ref] = max(view.get(ref, 0), row['seq'])` — a second "
            "delivery then changes nothing.",
        )
    return True, f"{duplicates} re-deliveries changed nothing: a view computed from the row itself is idempotent.", ""


def _backfill_worst_ignoring(reserved):
    return 0.01  # the reserved listener's answer for both: the shared pool forgotten


@exercise(
    "9.2",
    "what the reserved connection buys",
    mistake=_backfill_worst_ignoring,
    shape=function("worst_during_backfill(reserved)", a_number("of seconds")),
)
def _reserved(fn):
    got = {r: number(call(fn, r)) for r in (True, False)}
    if got[True] > 0.5:
        return (
            False,
            f"With the listener reserved you found a worst of {got[True]:.2f} s during the backfill; "
            "every hint is heard, the row is handled within its step.",
            "Pass `reserve_listener=reserved` to `OutboxConfig` and measure rows committed inside the window.",
        )
    if not 1.0 < got[False] <= 5.0 + 0.1:
        return (
            False,
            f"With a shared pool you found a worst of {got[False]:.2f} s; hints wait for a connection, "
            "are lost, and the rows wait for the 5 s safety poll.",
            "Without the reservation the listener takes a pool connection the backfill holds: the hint is lost.",
        )
    return (
        True,
        "The reservation buys latency through a backfill (a safety poll's worth), not correctness: "
        "no row is lost either way.",
        "",
    )
