"""The outbox lessons' exercises (notebooks 8 and 9: Subspace's transactional outbox)."""

from __future__ import annotations

from functools import lru_cache

from fanoutsim.exercises import NotAnswered, a_number, call, close_to, exercise, first_miss, function, number

# -- 8 · lost hints and the safety poll ---------------------------------------------------------


def _half_the_poll(poll):
    return poll / 2  # the median wait when every hint is lost, not the worst


@lru_cache(maxsize=8)  # a learner checks again and again; the reference run's answer does not change
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


_BACKOFF = 0.5  # 8.2's first backoff (seconds); it doubles after each failure


def _backoffs_without_jitter(budget):
    return _BACKOFF * (2 ** (budget - 1) - 1)  # 0.5 + 1 + 2 + ...: the ceiling, as if no jitter shortened a wait


@lru_cache(maxsize=8)  # a check runs it, and its answer quotes it again
def _measured_hold_up(budget: int) -> float:
    """The exercise's run, as its text describes it: how long the healthy row
    committed behind the poison one waited (its commit -> handled latency)."""
    from fanoutsim.analysis import outbox as oa
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    def triage(row):
        if row["ref"] == "poison":
            raise ValueError("cannot parse")

    sim = OutboxSimulation(seed=0)
    sim.register_consumer("triage", triage, retry_budget=budget, backoff=_BACKOFF)
    sim.commit("poison")
    behind = sim.commit("p1")
    sim.run(until=120)
    lat = oa.handled_latency(sim)
    return float(lat.loc[lat["seq"] == behind, "latency_s"].iloc[0])


def _hold_up_hint(budget: int, got: float) -> str:
    """The hint for a wait off the run's: what the number looks like it is."""
    ceiling = _backoffs_without_jitter(budget)

    def near(x: float) -> bool:
        return close_to(got, x, rel=0.002, abs_=1e-6)

    if near(budget):
        return (
            "That is the budget itself, a count of attempts, not a wait: run the simulation and read how long "
            "`p1` waited, its `latency_s` in `oa.handled_latency(sim)`."
        )
    if near(0.0):
        return (
            "`p1` did wait: triage handles its rows in order, so the row behind the poison one waits out "
            "every retry. Commit `poison` first, then `p1`, and read `p1`'s latency."
        )
    if near(ceiling):
        return (
            "That is the sum of the backoffs without jitter, the most they can add up to. Each backoff is "
            "shortened by a random factor between 0.5 and 1 (the consumer's `jitter=0.5`): run it and measure."
        )
    if near(_BACKOFF * (2**budget - 1)):
        return (
            "One backoff too many: the budget-th failure parks the row at once, with no wait after it. And "
            "each wait is shortened by a random jitter: run it and measure."
        )
    if near(_BACKOFF * (budget - 1)) or near(_BACKOFF * budget):
        return (
            "The backoff doubles after every failure (0.5 s, 1 s, 2 s, ...), each shortened by a random "
            "jitter: run it and measure rather than add up."
        )
    if ceiling / 2 <= got <= ceiling:
        return (
            "Within what the jitter allows, but not this run's wait: use `fs.OutboxSimulation(seed=0)`, "
            "`backoff=0.5`, and commit `poison` first, then `p1`, nothing else."
        )
    return (
        "Read the latency of the healthy row behind the poison one: the row whose seq `sim.commit('p1')` "
        "returned, in `oa.handled_latency(sim)`."
    )


@exercise(
    "8.2",
    "what a poison row costs the rows behind it",
    mistake=_backoffs_without_jitter,
    shape=function("held_up(budget)", a_number("of seconds")),
)
def _held_up(fn):
    miss = first_miss(fn, (4, 6), _measured_hold_up, rel=0.002)
    if miss is None:
        short, long = _measured_hold_up(4), _measured_hold_up(6)
        return (
            True,
            f"`p1` waited {short:.2f} s behind a budget of 4 and {long:.2f} s behind 6: each retry waits about "
            "twice the last, then the poison row is parked and the rows behind it flow. The budget bounds how "
            "long one bad row holds up its consumer's later rows, never another consumer's.",
            "",
        )
    (budget,), got, want = miss
    return (
        False,
        f"With a retry budget of {budget} you found `p1` waited {got:.3f} s; the run gives {want:.3f} s.",
        _hold_up_hint(budget, got),
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


@lru_cache(maxsize=4)  # a check runs it, and its verdict quotes it again
def _measured_backfill_worst(reserved: bool) -> float:
    """The exercise's run, as its text describes it: the worst commit -> handled
    latency of the rows committed inside the backfill's window."""
    from fanoutsim.analysis import outbox as oa
    from fanoutsim.designs.outbox import OutboxConfig
    from fanoutsim.designs.outbox.simulation import OutboxSimulation
    from fanoutsim.faults import Backfill, FaultPlan

    config = OutboxConfig(safety_poll_interval=5.0, reserve_listener=reserved)
    sim = OutboxSimulation(config, seed=0, faults=FaultPlan([Backfill(window=_WINDOW)]))
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(1.0, stop=180.0)
    sim.run(until=190.0)
    lat = oa.handled_latency(sim)
    inside = lat[(lat["committed_s"] >= _WINDOW[0]) & (lat["committed_s"] < _WINDOW[1])]
    return float(inside["latency_s"].max())


_WINDOW = (60.0, 120.0)  # 9.2's backfill: the bulk job holds the pool from 60 to 120 s


def _backfill_hint(reserved: bool, got: float, want: float) -> str:
    """The hint for a worst latency off the run's: what the number looks like it is."""
    if not reserved and close_to(got, 5.0, rel=0.0, abs_=1e-9):
        return (
            "That is the safety poll, the bound the wait stays under, not the run: measure it. The worst row "
            "committed just after a poll and waited for the next one, plus its step."
        )
    if not reserved and got <= 0.5:
        return "Without the reservation the listener takes a pool connection the backfill holds: the hint is lost."
    if got < want:
        return (
            "The exercise asks for the worst row, not a typical one: the max of `latency_s` over the rows "
            "committed inside the window (`committed_s` from 60 up to 120 s)."
        )
    return (
        "Use `seed=0`, one consumer of 0.01 s a row, `add_workload(1.0, stop=180.0)`, run to 190 s, and keep "
        "only the rows committed inside the window before you take the max."
    )


@exercise(
    "9.2",
    "what the reserved connection buys",
    mistake=_backfill_worst_ignoring,
    shape=function("worst_during_backfill(reserved)", a_number("of seconds")),
)
def _reserved(fn):
    miss = first_miss(fn, (True, False), _measured_backfill_worst, rel=1e-4)  # the poll itself (5.0) is off
    if miss is not None:
        (reserved,), got, want = miss
        pool = "the listener reserved" if reserved else "a shared pool"
        return (
            False,
            f"With {pool} you found a worst of {got:.3f} s during the backfill; the run gives {want:.3f} s.",
            _backfill_hint(reserved, got, want),
        )
    return (
        True,
        f"Worst {_measured_backfill_worst(True):.2f} s with the listener reserved, "
        f"{_measured_backfill_worst(False):.2f} s without: the reservation buys latency through a backfill "
        "(a safety poll's worth), not correctness: no row is lost either way.",
        "",
    )
