"""The reactor lessons' exercises (notebooks 0 to 7: Cloacina's reactor subscriptions).

Each judge calls the learner's function on inputs of its own, or compares a
number with what the model (or its theory) gives, computed here with the
public API; a typical mistake gets a hint that points at the lesson's idea.
"""

from __future__ import annotations

import math
from functools import lru_cache

from fanoutsim.exercises import (
    TRUE_OR_FALSE,
    NotAnswered,
    a_number,
    a_string,
    call,
    close_to,
    exercise,
    first_miss,
    function,
    number,
)

# -- 0 · the tour ------------------------------------------------------------------------------


def _count_all(prices, threshold):
    return len(prices)  # the typical mistake: every firing counted, the filter forgotten


@exercise(
    "0.1",
    "what a filter dispatches",
    mistake=_count_all,
    shape=function("dispatched(prices, threshold)", a_number("of executions")),
)
def _dispatched(fn):
    cases = [([90, 140, 210, 50], 100), ([5, 6, 7], 6), ([300, 301], 0), ([1, 2, 3], 10)]
    for prices, threshold in cases:
        got, want = call(fn, list(prices), threshold), sum(p > threshold for p in prices)
        if got != want:
            if got == len(prices):
                return (
                    False,
                    (
                        f"For prices {prices} and threshold {threshold} you counted {got}, "
                        f"every firing; the filter passes {want}."
                    ),
                    "Count executions (`sim.executions()`), not firings: a filter decides dispatch.",
                )
            return (
                False,
                f"For prices {prices} and threshold {threshold} you said {got}, the run makes {want}.",
                'Subscribe with `when=f"payload.quote.price > {threshold}"` and run past the next poll.',
            )
    return True, "A filter decides which firings are dispatched, and nothing else.", ""


def _half_interval(fire_at, poll_interval):
    return poll_interval / 2  # the average wait, not this firing's


@exercise(
    "0.2",
    "how long a firing waits",
    mistake=_half_interval,
    shape=function("wait(fire_at, poll_interval)", a_number("of seconds")),
)
def _wait(fn):
    cases = ((0.25, 1.0), (2.6, 1.0), (1.1, 0.5), (7.3, 5.0))
    # polls run at 0, P, 2P, ...: a firing waits for the next one
    miss = first_miss(fn, cases, lambda fire_at, p: math.ceil(fire_at / p) * p - fire_at, rel=0.01, abs_=1e-3)
    if miss is None:
        return True, "A firing waits for the next poll: between 0 and one poll interval, P/2 on average.", ""
    (fire_at, p), got, want = miss
    if close_to(got, p / 2):
        hint = "P/2 is the average over many firings; one firing waits until the next poll."
    elif close_to(got, 1000 * want, rel=0.01):
        hint = "That is the wait in milliseconds: return seconds, as `fire_to_dispatch` of `latency_frame` gives them."
    else:
        hint = "Polls run at t = 0, P, 2P, ...: a firing waits for the next one."
    return False, f"Fired at t = {fire_at:g} s with P = {p:g} s you said {got:.3f} s; it waits {want:.3f} s.", hint


# -- 1 · the latency budget --------------------------------------------------------------------


def _whole_interval(poll_interval):
    return poll_interval  # the longest wait, not the mean


@lru_cache(maxsize=4)  # a check runs it, and a verdict quotes it again
def _measured_mean_wait(poll_interval: float) -> float:
    """The exercise's run, as its text describes it (seed 0): the mean fire -> dispatch."""
    from fanoutsim.designs.reactor.analysis.delivery import latency_frame
    from fanoutsim.designs.reactor.config import SchedulerConfig
    from fanoutsim.designs.reactor.simulation import Simulation

    sim = Simulation(SchedulerConfig(reactor_poll_interval=poll_interval), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", 2.0)
    sim.run(until=600)
    return float(latency_frame(sim)["fire_to_dispatch"].mean())


@exercise(
    "1.1",
    "the mean wait",
    mistake=_whole_interval,
    shape=function("mean_wait(poll_interval)", a_number("of seconds")),
)
def _mean_wait(fn):
    miss = first_miss(fn, (0.5, 2.0), _measured_mean_wait, rel=0.002)
    if miss is None:
        return True, "The wait is uniform on [0, P): P/2 on average, whatever P.", ""
    (p,), got, want = miss
    if close_to(got, p / 2, rel=0.002):
        hint = (
            "That is the expectation, P/2, not the run: measure it (P = poll_interval, 2 firings/s "
            "for 600 s, `seed=0`) and take the mean of `fire_to_dispatch`."
        )
    elif close_to(got, p, rel=0.1):
        hint = "P is the longest a firing waits; a firing at a random instant waits half of it on average."
    else:
        hint = "Read `fire_to_dispatch` of `analysis.latency_frame(sim)` and take its mean."
    return False, f"At P = {p:g} s you measured {got:.3f} s; the run gives {want:.3f} s.", hint


def _backlog_ignoring_the_limit(batch_limit):
    import fanoutsim as fs

    sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=1.0), seed=0)  # the limit forgotten
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", 5.0)
    sim.run(until=300)
    return len(sim.firings()) - len(sim.executions())


@lru_cache(maxsize=4)
def _measured_backlog(batch_limit: int) -> int:
    """The exercise's run (seed 0): firings not yet dispatched after 300 s of 5 a second."""
    from fanoutsim.designs.reactor.config import SchedulerConfig
    from fanoutsim.designs.reactor.simulation import Simulation

    config = SchedulerConfig(reactor_poll_interval=1.0, reactor_poll_batch_limit=batch_limit)
    sim = Simulation(config, seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", 5.0)
    sim.run(until=300)
    return len(sim.firings()) - len(sim.executions())


def _backlog_hint(batch_limit: int, got: float, want: int) -> str:
    """The hint for a backlog off the run's: what the number looks like it is."""
    if close_to(got, max(5 - batch_limit, 0) * 300, rel=0.002):
        return (
            "That is the expectation, (rate - B/P) × 300, not the run: Poisson firings come a little "
            "faster or slower than 5 a second. Measure it: run the simulation and count."
        )
    if batch_limit < 5 and got < want / 2:
        return (
            "Pass `reactor_poll_batch_limit=batch_limit` to `fs.SchedulerConfig`, and count firings minus executions."
        )
    if batch_limit >= 5:
        return "Only the firings since the last poll should be left: check you count executions of one subscription."
    return (
        "Run the run described: P = 1 s, 5 firings/s with the default seed (0), `sim.run(until=300)`, "
        "no longer; then count firings minus executions."
    )


@exercise(
    "1.2",
    "a batch limit too small",
    mistake=_backlog_ignoring_the_limit,
    shape=function("backlog(batch_limit)", a_number("of firings")),
)
def _backlog(fn):
    miss = first_miss(fn, (2, 4, 10), _measured_backlog, rel=0.0)
    if miss is None:
        low, high = _measured_backlog(2), _measured_backlog(10)
        return (
            True,
            f"Below the rate the backlog grows by (rate - B/P) every second ({low:.0f} here); above it, it stays "
            f"a poll's worth ({high:.0f}).",
            "",
        )
    (b,), got, want = miss
    return (
        False,
        f"With a batch limit of {b} you found {got:.0f} firings behind; the run leaves {want}.",
        _backlog_hint(b, got, want),
    )


# -- 2 · duplicate deliveries ---------------------------------------------------------------------


def _one_per_crash(mode, batch_limit):
    return 1.0  # per_firing's answer, for every mode


@lru_cache(maxsize=8)
def _measured_per_crash(mode: str, batch_limit: int) -> float:
    """The exercise's run (seed 0): duplicates per crash of one crash run."""
    from fanoutsim.designs.reactor.analysis.faults import crash_run, duplicates_per_crash

    return float(duplicates_per_crash(crash_run(batch_limit, mode))["duplicates_per_crash"])


def _per_crash_hint(mode: str, batch_limit: int, got: float) -> str:
    """The hint for a count off the run's: what the mode does, or what the number looks like."""
    if mode == "atomic":
        return "Under `atomic` the insert and the watermark commit in one transaction: a crash leaves neither or both."
    if mode == "per_firing":
        return "Pass the mode as `crash_run(batch_limit, mode)` and read `duplicates_per_crash` of the run."
    if close_to(got, (batch_limit + 1) / 2, rel=0.002):
        return (
            "That is the expectation, (L + 1) / 2 for a crash at a random point of the batch, not the run: "
            "measure it (eight crashes are few, so the run's mean is not the expectation)."
        )
    return (
        "Under `per_batch` a crash re-delivers the batch dispatched so far: pass the batch limit too, "
        "`crash_run(batch_limit, mode)`, and read `duplicates_per_crash` of the run."
    )


_CRASH_CASES = (("atomic", 20), ("per_firing", 20), ("per_batch", 20), ("per_firing", 8), ("per_batch", 30))


@exercise(
    "2.1",
    "duplicates per crash, by mode",
    mistake=_one_per_crash,
    shape=function("per_crash(mode, batch_limit)", a_number("of duplicates per crash")),
)
def _per_crash(fn):
    miss = first_miss(fn, _CRASH_CASES, _measured_per_crash, rel=0.002, abs_=0.01)
    if miss is None:
        return (
            True,
            "`atomic` closes the crash window; `per_firing` leaves one firing in it; `per_batch` the batch "
            "dispatched so far, more the larger the batch limit.",
            "",
        )
    (mode, limit), got, want = miss
    return (
        False,
        f"Under `{mode}` at a batch limit of {limit} you found {got:.2f} duplicates per crash; "
        f"the run gives {want:.2f}.",
        _per_crash_hint(mode, limit, got),
    )


def _append(table, context):
    table[len(table)] = dict(context)  # a new record for every run: the naive body
    return table


@lru_cache(maxsize=1)
def _a_real_context() -> tuple:
    """The items of an execution's context as a workflow body gets it: the payload
    (a counter's ``n``) with ``reactor_name``, ``reactor_firing_id`` and ``reactor_fired_at``."""
    from fanoutsim.designs.reactor.simulation import Simulation

    seen: list = []
    sim = Simulation(seed=0)
    sim.runner.register_workflow("w", seen.append)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.fire("r", {"n": 1})
    sim.run(until=3)
    return tuple(seen[0].items())


@exercise(
    "2.2",
    "an idempotent effect",
    mistake=_append,
    shape=function("write(table, context)", does="that writes a record per firing into the dict `table`"),
)
def _idempotent(fn):
    from fanoutsim.designs.reactor.analysis.faults import crash_run

    probe: dict = {}
    fn(probe, dict(_a_real_context()))
    if not probe:
        raise NotAnswered("Your function writes nothing into `table` yet: write its body and run the cell again.")
    table: dict = {}
    sim = crash_run(
        20, "per_batch", backlog_s=60.0, after_s=20.0, drain_s=30.0, body=lambda context: fn(table, context)
    )
    ex = sim.executions()
    ran = ex[ex["status"] == "completed"]
    firings, runs = ran["reactor_firing_id"].nunique(), len(ran)
    if len(table) != firings:
        hint = (
            "Key the record on `context['reactor_firing_id']`: a re-delivery then overwrites it."
            if len(table) == runs
            else "Write one record per firing into `table` (a dict), nothing else."
        )
        return False, f"{runs} body runs of {firings} firings left {len(table)} records; one per firing is right.", hint
    return True, f"{runs} body runs of {firings} firings left {firings} records: every re-delivery overwrote.", ""


# -- 3 · prune and TTL -----------------------------------------------------------------------------


def _rate_times_retention(retention):
    return 2.0 * retention  # the bottom of the sawtooth, not its mean


@lru_cache(maxsize=4)
def _measured_mean_rows(retention: float) -> float:
    """The exercise's run (seed 0): the table's mean size once warm."""
    from fanoutsim.designs.reactor.analysis.faults import retention_run, table_size_summary

    return float(table_size_summary(retention_run("ttl", retention=retention, pause=0), after=retention + 20)["mean"])


@exercise(
    "3.1",
    "the size of the table",
    mistake=_rate_times_retention,
    shape=function("mean_rows(retention)", a_number("of rows")),
)
def _mean_rows(fn):
    miss = first_miss(fn, (60.0, 120.0), _measured_mean_rows, rel=0.002)
    if miss is None:
        return True, "The table holds a retention window plus, on average, half a prune interval of firings.", ""
    (r,), got, want = miss
    if close_to(got, 2.0 * (r + 10.0 / 2), rel=0.002):
        hint = (
            "That is the expectation, rate × (R + I/2), not the run: Poisson firings come a little faster "
            "or slower than 2 a second. Measure it: `table_size_summary(sim, after=retention + 20)`."
        )
    elif close_to(got, 2.0 * r, rel=0.03):
        hint = (
            "rate × R is what is left right after a prune; between prunes (every 10 s) the table "
            "grows by rate × 10 more, so on average by half of that."
        )
    elif close_to(got, 2.0 * (r + 10.0), rel=0.05):
        hint = "That is the sawtooth's top, rate × (R + I), just before a prune: the task asks for its mean."
    else:
        hint = "Measure after the warm-up: `table_size_summary(sim, after=retention + 20)`."
    return (
        False,
        f"At a retention of {r:g} s you found a mean of {got:.1f} rows; the run's sawtooth averages {want:.1f}.",
        hint,
    )


def _lost_ignoring_the_policy(policy, pause):
    from fanoutsim.designs.reactor.analysis.faults import retention_cost, retention_run

    return retention_cost(retention_run("ttl", retention=60.0, pause=pause))["lost_paused"]


@exercise(
    "3.2",
    "who loses under a TTL",
    mistake=_lost_ignoring_the_policy,
    shape=function("lost(policy, pause)", a_number("of firings")),
)
def _lost(fn):
    from fanoutsim.designs.reactor.analysis.faults import retention_cost, retention_run

    def lost(policy: str, pause: float) -> int:
        return retention_cost(retention_run(policy, retention=60.0, pause=pause))["lost_paused"]

    miss = first_miss(fn, (("ttl", 30.0), ("ttl", 150.0), ("conservative", 150.0)), lost, rel=0.0)
    if miss is None:
        return True, "Only a pause longer than the retention loses firings, and only under a plain TTL.", ""
    (policy, pause), got, want = miss
    if policy == "conservative":
        hint = "Under `conservative` the prune waits for every enabled subscription's watermark: pass `policy`."
    elif pause < 60:
        hint = "A pause shorter than the retention: the prune reaches nothing the subscriber still needs."
    else:
        hint = "Count the paused subscription's losses: `retention_cost(sim)['lost_paused']`."
    return False, f"With `{policy}` and a {pause:g} s pause you found {got:.0f} lost; the run loses {want}.", hint


# -- 4 · CEL filters -------------------------------------------------------------------------------

_QUOTES = [
    ("us-east", 150),
    ("us-east", 90),
    ("eu-central", 150),
    ("eu-central", 50),
    ("us-east", 100),
    ("us-east", 101),
    ("ap-south", 300),
    ("us-west", 150),  # another `us` region: the region compared exactly, not by its prefix
    ("us-east", 100.5),  # just above 100: not a whole price
]


def _filter_hint(passed: list, want: list) -> str:
    """The hint for a filter that passes other quotes than the task's: what its test gets wrong."""
    extra = [q for q in passed if q not in want]
    missed = [q for q in want if q not in passed]
    wrong_region = any(r != "us-east" for r, _ in extra)
    if wrong_region and any(p <= 100 for _, p in extra):
        return "Both conditions must hold: join them with `&&`, not `||`."
    if wrong_region:
        return "Only `us-east`: compare the region exactly, `payload.quote.region == 'us-east'` (`us-west` is not it)."
    if extra:
        return "Above 100 means `> 100`: a price of exactly 100 is not above it."
    if any(p != int(p) for _, p in missed):
        return "Above 100 means `> 100`, whatever the price: 100.5 is above 100 too."
    return "Above 100 means `> 100`; the region is compared as a string, in quotes."


@exercise(
    "4.1",
    "write a filter",
    mistake="payload.quote.region == 'us-east' || payload.quote.price > 100",
    shape=a_string("of CEL"),
)
def _filter(when):
    from fanoutsim.designs.reactor.predicate import InvalidPredicate
    from fanoutsim.designs.reactor.simulation import Simulation

    sim = Simulation(seed=0)
    try:
        sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "w", when=when)
    except InvalidPredicate as exc:
        return (
            False,
            f"It is refused at subscribe time: {exc}",
            "Fields live under `payload`: `payload.quote.region`, `payload.quote.price`; `&&` joins two tests.",
        )
    for region, price in _QUOTES:
        sim.fire("pricing_reactor", {"quote": {"region": region, "price": price}})
    sim.run(until=5)
    passed = sorted((c["quote"]["region"], c["quote"]["price"]) for c in sim.executions()["context"])
    want = sorted((r, p) for r, p in _QUOTES if r == "us-east" and p > 100)
    if passed != want:
        return False, f"Of the test quotes it passed {passed}; it should pass {want}.", _filter_hint(passed, want)
    return True, "A filter is a boolean over `payload`, `reactor` and `tenant`.", ""


def _one_error(limit):
    return 1  # the skip policy's count: one error, then move on


@lru_cache(maxsize=4)
def _measured_errors(limit: int) -> int:
    """The exercise's run: predicate errors counted in 20 s of `hold` on a misspelt filter."""
    from fanoutsim.designs.reactor.config import SchedulerConfig
    from fanoutsim.designs.reactor.simulation import Simulation

    sim = Simulation(SchedulerConfig(predicate_error_policy="hold", predicate_error_limit=limit), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w", when="payload.quote.prcie > 100")
    sim.fire("r", {"quote": {"price": 150}})
    sim.run(until=20)
    return int(sum(v for k, v in sim.metrics().items() if k.startswith("fanoutsim_reactor_predicate_errors_total")))


@exercise(
    "4.2",
    "how long `hold` holds",
    mistake=_one_error,
    shape=function("errors_before_dead_letter(limit)", a_number("of errors")),
)
def _hold(fn):
    # a limit the run's 20 s reach (3, 5) and one they do not (25: one error a poll, a poll a second)
    miss = first_miss(fn, (3, 5, 25), _measured_errors, rel=0.0)
    if miss is None:
        return (
            True,
            "`hold` retries the firing once per poll and dead-letters it at the limit: a stall of limit x P.",
            "",
        )
    (limit,), got, want = miss
    if got == 1:
        hint = (
            "Under `hold` the watermark stays on the failing firing and retries it each poll, until "
            "the limit-th error dead-letters it."
        )
    elif got == limit:
        hint = (
            "That is the limit, where `hold` gives up, not the run: measure it. It counts one error a "
            "poll, a poll a second, and a run of 20 s ends before a limit of 25 is reached."
        )
    else:
        hint = "Sum the metric `fanoutsim_reactor_predicate_errors_total` after a run of 20 s."
    return False, f"With a limit of {limit} you counted {got:.0f} errors; the run counts {want}.", hint


# -- 5 · watermark holes ------------------------------------------------------------------------------


def _twins_lost_anyway(watermark, pairs):
    return pairs  # the hole under every watermark: the compound cursor forgotten


@exercise(
    "5.1",
    "make a tie yourself",
    mistake=_twins_lost_anyway,
    shape=function("twins_lost(watermark, pairs)", a_number("of firings")),
)
def _twins(fn):
    # each pair loses its twin under `fired_at`, none under the compound cursor (the checker's runs)
    cases = (("fired_at", 3), ("fired_at_id", 3), ("fired_at", 2), ("fired_at_id", 4), ("fired_at", 4))
    miss = first_miss(fn, cases, lambda watermark, pairs: pairs if watermark == "fired_at" else 0, rel=0.0)
    if miss is None:
        return (
            True,
            "A batch boundary between two firings of one microsecond loses the second under `>`; (fired_at, id) "
            "keeps it.",
            "",
        )
    (watermark, pairs), got, want = miss
    if watermark == "fired_at_id":
        said = f"Under `fired_at_id` with {pairs} pairs you found {got:.0f} lost; it loses none."
        hint = "Pass `watermark=watermark` to `fs.SchedulerConfig`: the compound cursor orders twins by id."
        return False, said, hint
    said = f"Under `fired_at` with {pairs} pairs you found {got:.0f} lost; each pair loses its twin, {want} in all."
    hint = (
        "Fire `pairs` pairs, at t = 0.5, 1.5, 2.5, ... s, each two firings with no `sim.run` between them "
        "(one instant), with `reactor_poll_batch_limit=1`, and count `fs.check(sim).total['lost']`."
    )
    return False, said, hint


@lru_cache(maxsize=1)
def _smallest_settle() -> int:
    from fanoutsim.designs.reactor.analysis.faults import hole_run, hole_summary

    return next(
        s for s in range(1, 10) if hole_summary(hole_run("late commit", "settled", settle=float(s)))["lost"] == 0
    )


@exercise(
    "5.2",
    "the smallest settle time",
    mistake=5,
    shape=a_number("of seconds"),
)
def _settle(answer):
    got, want = number(answer), _smallest_settle()
    if got == want:
        return (
            True,
            f"{want} s: the horizon must reach the longest commit delay (3 s), and each second costs latency.",
            "",
        )
    if got > want:
        return (
            False,
            f"{got:g} s loses nothing, but so does a smaller horizon, and every second of it is latency.",
            "Try settle = 1, 2, 3, ... s and take the first that loses nothing.",
        )
    return (
        False,
        f"With {got:g} s the late commits still leak.",
        "The horizon must be at least the longest time between a firing's stamp and its commit.",
    )


# -- 6 · the poll-interval sweep -------------------------------------------------------------------------


def _knee_of_the_total(batch_limit, poll_interval):
    return batch_limit / poll_interval  # one stream's knee, as if it had all the traffic


@exercise(
    "6.1",
    "the knee",
    mistake=_knee_of_the_total,
    shape=function("knee(batch_limit, poll_interval)", a_number("of firings a second")),
)
def _knee(fn):
    miss = first_miss(fn, ((5, 1.0), (10, 1.0), (100, 0.5)), lambda b, p: b / p / 0.75, rel=0.01)
    if miss is None:
        return True, "The knee is where the busiest stream's rate reaches B / P.", ""
    (b, p), got, want = miss
    hint = (
        "B / P is what one subscription drains; its stream is acme's 75% of the total, so the total "
        "can reach (B / P) / 0.75 first."
        if close_to(got, b / p, rel=0.01)
        else "A subscription drains at most B firings per poll, every P seconds."
    )
    return False, f"For B = {b}, P = {p:g} s you said {got:.2f} firings/s; the knee is {want:.2f}.", hint


def _queries_times_p(subscriptions, poll_interval):
    return subscriptions * poll_interval  # upside down: queries per pass times the interval


@lru_cache(maxsize=8)
def _measured_queries(subscriptions: int, poll_interval: float) -> float:
    """The exercise's run: poll queries a second over 60 s of `subscriptions` subscriptions."""
    from fanoutsim.designs.reactor.config import SchedulerConfig
    from fanoutsim.designs.reactor.simulation import Simulation

    sim = Simulation(SchedulerConfig(reactor_poll_interval=poll_interval), seed=0)
    for i in range(subscriptions):
        sim.runner.subscribe_workflow_to_reactor("r", f"w{i}")
    sim.add_workload("r", 2.0)
    sim.run(until=60)
    return sum(v for k, v in sim.metrics().items() if k.startswith("fanoutsim_reactor_poll_queries_total")) / 60


@exercise(
    "6.2",
    "the database load, measured",
    mistake=_queries_times_p,
    shape=function("queries_per_second(subscriptions, poll_interval)", a_number("of queries a second")),
)
def _queries(fn):
    # a pass at t = 0, then one every P up to the run's end (a pass at t = 60 is not in a run to 60):
    # a query each per subscription, whatever the traffic; n / P when P divides 60, more when not
    # (at P = 7 s, 9 passes in 60 s, not 60 / 7)
    miss = first_miss(fn, ((4, 1.0), (10, 0.5), (3, 2.0), (3, 7.0)), _measured_queries, rel=0.002)
    if miss is None:
        return (
            True,
            "Measured: one query per subscription per pass, and a pass every P seconds from t = 0: "
            "subscriptions / P queries a second whatever the traffic (a little more when P does not divide the run).",
            "",
        )
    (n, p), got, want = miss
    if close_to(got, n / p, rel=0.002):
        hint = (
            "That is the expectation, subscriptions / P, not the run: measure it. The passes come at "
            "t = 0, P, 2P, ...: count how many a 60 s run makes at this P."
        )
    elif close_to(got, 60 * want, rel=0.01):
        hint = "Divide the metric's total by the run's 60 s."
    else:
        hint = (
            "Sum `fanoutsim_reactor_poll_queries_total` over its series in `sim.metrics()`, after "
            "`sim.run(until=60)`, with `reactor_poll_interval` set to P."
        )
    said = f"For {n} subscriptions at P = {p:g} s you measured {got:.3f} queries/s; the run gives {want:.3f}."
    return False, said, hint


# -- 7 · real time against virtual time -----------------------------------------------------------------


@lru_cache(maxsize=4)
def _reference_wait(rt_s: float) -> float:
    from fanoutsim.designs.reactor.analysis.delivery import latency_frame
    from fanoutsim.designs.reactor.config import SchedulerConfig
    from fanoutsim.designs.reactor.simulation import Simulation

    sim = Simulation(SchedulerConfig(reactor_poll_interval=1.0), seed=0, fetch_latency=rt_s)
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "audit")
    sim.add_workload("pricing_reactor", 20.0)
    sim.run(until=20)
    return float(latency_frame(sim)["fire_to_dispatch"].mean())


def _no_round_trip(rt_s):
    return _reference_wait(0.0)  # the round trip never passed to the simulation


@exercise(
    "7.1",
    "what a round trip adds",
    mistake=_no_round_trip,
    shape=function("mean_wait(rt_s)", a_number("of seconds")),
)
def _round_trip(fn):
    miss = first_miss(fn, (0.0, 0.2), _reference_wait, rel=0.002)
    if miss is not None:
        (rt,), got, want = miss
        if close_to(got, 0.5 + rt, rel=0.002):
            hint = (
                "That is the expectation, P/2 + rt, not the run: measure it (P = 1 s, 20 firings/s for "
                "20 s, `seed=0`) and take the mean of `fire_to_dispatch`."
            )
        elif rt and close_to(got, _reference_wait(0.0), rel=0.002):
            hint = (
                "Pass `fetch_latency=rt_s` to `fs.Simulation`: every fetch then takes that long, and the "
                "dispatch comes that much later."
            )
        else:
            hint = "Measure `fire_to_dispatch` of `latency_frame(sim)` after 20 virtual seconds."
        return False, f"With a round trip of {rt:g} s you measured {got:.3f} s; the run gives {want:.3f} s.", hint
    return (
        True,
        "A round trip adds itself to every dispatch, on top of the poll wait; at well under a "
        "millisecond it disappears in the poll wait's noise.",
        "",
    )


def _compare_means(a, b):
    return abs(a["fire_to_dispatch"].mean() - b["fire_to_dispatch"].mean()) < 0.05  # blind to the shape


@exercise(
    "7.2",
    "the same shape?",
    mistake=_compare_means,
    shape=function("same_shape(a, b)", TRUE_OR_FALSE),
)
def _same_shape(fn):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    frame = lambda x: pd.DataFrame({"fire_to_dispatch": x})  # noqa: E731
    uniform_a, uniform_b = frame(rng.uniform(0, 1, 800)), frame(rng.uniform(0, 1, 800))
    bell = frame(np.clip(rng.normal(0.5, 0.08, 800), 0, 1))  # the same mean, another shape
    shifted = frame(rng.uniform(0.1, 1.1, 800))
    # two humps, rescaled to the uniform sample's own mean and standard deviation: alike in both, not in shape
    humps = np.concatenate([rng.normal(0.2, 0.03, 400), rng.normal(0.8, 0.03, 400)])
    x = uniform_a["fire_to_dispatch"]
    twin = frame((humps - humps.mean()) / humps.std(ddof=1) * x.std(ddof=1) + x.mean())
    cases = (
        (uniform_a, uniform_b, True, "alike"),
        (uniform_a, bell, False, "different"),
        (uniform_a, shifted, False, "different"),
        (uniform_a, twin, False, "of one mean and one standard deviation but different shapes"),
    )
    for a, b, want, what in cases:
        got = call(fn, a, b)
        if bool(got) != want:
            if b is twin:
                hint = (
                    "Equal means and equal spreads do not make one shape: a uniform wait and one in two humps "
                    "can share both. Compare the whole distributions (`ks` against `ks_critical_5pct`)."
                )
            elif want is False:
                hint = (
                    "Two samples with one mean can have different shapes: compare the whole distributions "
                    "(`ks` against `ks_critical_5pct`)."
                )
            else:
                hint = "Samples from one law differ a little by chance; the KS test allows for it."
            return False, f"You said {bool(got)} for two samples that are {what}.", hint
    return True, "The KS statistic compares whole distributions: same mean is not same shape.", ""
