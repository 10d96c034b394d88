"""The leases lessons' exercises (notebooks 10 and 11: RiffDB's leased durable consumers)."""

from __future__ import annotations

from functools import lru_cache

from fanoutsim.exercises import a_number, a_tuple, call, exercise, first_miss, function, number

# -- 10 · leases, acks and dead letters ----------------------------------------------------------


def _shortest_safe_lease(law: str = "lognormal", mean: float = 5.0, per_event: float = 0.001) -> int:
    from fanoutsim.designs.leases.analysis import expected_duplicates, p_exceeds

    return next(lease for lease in range(1, 10_000) if expected_duplicates(p_exceeds(law, mean, lease)) < per_event)


@exercise(
    "10.1",
    "the shortest safe lease",
    mistake=15,
    shape=a_number("of seconds"),
)
def _safe_lease(answer):
    from fanoutsim.designs.leases.analysis import expected_duplicates, p_exceeds

    got, want = number(answer), _shortest_safe_lease()
    per_1000 = 1000 * expected_duplicates(p_exceeds("lognormal", 5.0, got)) if got > 0 else float("inf")
    if round(got) == want:
        return (
            True,
            f"{want} s: {per_1000:.2f} duplicates per 1000, {want / 5.0:.0f} times the mean work — a "
            "heavy tail needs a long lease.",
            "",
        )
    if got > want:
        return (
            False,
            f"{got:g} s is safe ({per_1000:.2f} per 1000), but a shorter lease is too.",
            "Try each whole second from 1 up and stop at the first under 1 per 1000.",
        )
    near = want - got <= 2  # just short of it: the first whole second under the line is the answer
    return (
        False,
        f"At {got:g} s the lognormal work makes {per_1000:.3f} duplicates per 1000, not under 1.",
        "Close: the next whole second or two may be the first under 1 per 1000; check each."
        if near
        else "Size the lease against the tail of the work time, not its mean: P(work > lease) must be tiny.",
    )


def _in_flight_always(in_flight, partitions, order):
    return in_flight  # RiffDB's answer for both rules


@exercise(
    "10.2",
    "how many leases can be out",
    mistake=_in_flight_always,
    shape=function("slots(in_flight, partitions, order)", a_number("of leases")),
)
def _slots(fn):
    cases = [(k, p, order) for k, p in ((8, 4), (2, 8), (8, 1), (5, 5)) for order in ("head_of_line", "riffdb")]
    miss = first_miss(fn, cases, lambda k, p, order: min(k, p) if order == "head_of_line" else k, rel=0.0)
    if miss is None:
        return True, "min(in-flight, partitions) under head-of-line; in-flight under RiffDB's rule.", ""
    (k, p, order), got, want = miss
    hint = (
        "Head-of-line leases one event per partition: never more leases than partitions."
        if order == "head_of_line"
        else "RiffDB's rule leases several events per partition (a window of 65): only in-flight limits it."
    )
    return False, f"For in-flight {k} over {p} partitions under `{order}` you said {got:.0f}; it is {want}.", hint


# -- 11 · the fence, restore, backup and identity ---------------------------------------------------


def _acked_anyway():
    return "acked", 1  # as if the restore changed nothing


@exercise(
    "11.1",
    "a stale token, by hand",
    mistake=_acked_anyway,
    shape=function("after_restore()", a_tuple("the ack's result", "the new lease's attempt")),
)
def _stale_token(fn):
    result, attempt = call(fn)
    if result != "stale_incarnation":
        return (
            False,
            f"The old token's ack returned {result!r}; after a restore it fails closed as 'stale_incarnation'.",
            "Ack with the lease's own token and incarnation after `sim.restore()`: the incarnation is now old.",
        )
    if attempt != 2:
        return (
            False,
            f"The event came back as attempt {attempt}; the restore counted the voided lease as a "
            "failed attempt, so it is attempt 2.",
            "Read `attempt` of the lease the second `sim.consume('c')` returns.",
        )
    return (
        True,
        "A pre-restore token never acks, even with time left on its lease, and the restore counts an attempt.",
        "",
    )


@lru_cache(maxsize=4)
def _reference_pruned(seed: int = 0) -> int:
    """What retention prunes in the run 11.2 describes, with no idle consumer."""
    import fanoutsim as fs
    from fanoutsim.designs.leases import LeaseConfig

    sim = fs.LeaseSimulation(LeaseConfig(retention=60.0, retention_interval=10.0), seed=seed)
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(2.0, partitions=4, stop=300.0)
    sim.run(until=300.0)
    return int((sim.trace()["kind"] == "pruned").sum())


def _same_either_way(idle_consumer, seed):
    return 465  # what retention prunes without the idle consumer (seed 0), said for both


_SEEDS = (0, 1)  # 11.2's runs: a count copied from one seed is not the other's


@exercise(
    "11.2",
    "what holds the fence",
    mistake=_same_either_way,
    shape=function("pruned(idle_consumer, seed)", a_number("of events")),
)
def _fence(fn):
    for seed in _SEEDS:
        verdict = _fence_of_seed(fn, seed)
        if verdict is not None:
            return verdict
    counts = " and ".join(str(_reference_pruned(seed)) for seed in _SEEDS)
    return (
        True,
        f"{counts} pruned alone (seeds {' and '.join(map(str, _SEEDS))}), none with a consumer that never "
        "reads: the lowest fence decides.",
        "",
    )


def _fence_of_seed(fn, seed: int) -> tuple[bool, str, str] | None:
    """11.2's verdict at one seed: None when both counts are the run's."""
    alone, held = number(call(fn, False, seed)), number(call(fn, True, seed))
    if alone < 100:
        return (
            False,
            f"Without the idle consumer (seed {seed}) you found {alone:.0f} pruned; retention prunes everything "
            "older than 60 s, hundreds of events in 300 s.",
            "Give the simulation `LeaseConfig(retention=60.0, retention_interval=10.0)` and count kind 'pruned'.",
        )
    if held != 0:
        return (
            False,
            f"With an idle consumer you found {held:.0f} pruned; a consumer that has resolved nothing "
            "allows no pruning at all.",
            "Register the second consumer with `client=False`: it exists, holds its fence at the start, and "
            "never moves it.",
        )
    want = _reference_pruned(seed)
    if alone == want:
        return None
    return (
        False,
        f"Without the idle consumer, at seed {seed}, you found {alone:.0f} pruned; the run described prunes "
        f"{want} (the events older than 60 s at each prune, up to t = 300 s).",
        (
            "Stop the workload and the clock at 300 s (`add_workload(..., stop=300.0)`, "
            "`sim.run(until=300.0)`), and count only the trace's rows of kind 'pruned'."
            if alone > want
            else "Pass the seed (`fs.LeaseSimulation(..., seed=seed)`), prune every 10 s "
            "(`retention_interval=10.0`) and keep 60 s (`retention=60.0`); 2 events/s over 4 partitions, "
            "run to t = 300 s."
        ),
    )
