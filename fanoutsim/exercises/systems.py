"""The exercises of lesson 14, the designs in the systems you run (SQS's visibility
timeout as a lease; procrastinate's lost wake-up; JetStream's AckWait for a duplicate target)."""

from __future__ import annotations

import math

from fanoutsim.exercises import TRUE_OR_FALSE, a_number, call, exercise, first_miss, function

# -- 14.1 · the longest handler a visibility timeout allows ----------------------------------------
# (timeout s, duplicates per 1000): SQS's default, a long timeout, a looser target
_TIMEOUTS = ((30.0, 1.0), (120.0, 1.0), (30.0, 10.0))


def _longest_mean(timeout: float, per_1000: float) -> float:
    """The mean of exponential work at which ``timeout`` makes exactly ``per_1000``
    duplicates per 1000 messages (bisection on the leases design's own theory)."""
    from fanoutsim.designs.leases.analysis import expected_duplicates, p_exceeds

    low, high = 1e-6, timeout * 10
    for _ in range(100):
        mid = (low + high) / 2
        if 1000 * expected_duplicates(p_exceeds("exponential", mid, timeout)) < per_1000:
            low = mid
        else:
            high = mid
    return low


def _half_the_timeout(timeout, per_1000):
    return timeout / 2  # "a lease twice the mean work": sized against the mean, not the tail


@exercise(
    "14.1",
    "the longest handler a visibility timeout allows",
    mistake=_half_the_timeout,
    shape=function("longest_handler(timeout, per_1000)", a_number("of seconds")),
)
def _longest_handler(fn):
    from fanoutsim.designs.leases.analysis import expected_duplicates, p_exceeds

    miss = first_miss(fn, _TIMEOUTS, _longest_mean, rel=0.02)
    if miss is None:
        return (
            True,
            f"SQS's default 30 s timeout holds duplicates under 1 in 1000 only for handlers of "
            f"{_longest_mean(30.0, 1.0):.1f} s or less on average: the tail decides, about "
            "ln(1000) ≈ 7 means.",
            "",
        )
    (timeout, per_1000), got, want = miss
    made = 1000 * expected_duplicates(p_exceeds("exponential", got, timeout)) if got > 0 else 0.0
    where = f"For a {timeout:g} s timeout and {per_1000:g} per 1000 you said a mean of {got:.2f} s"
    if got > want:
        return (
            False,
            f"{where}: that handler makes {made:.1f} duplicates per 1000.",
            "Size against the tail: exponential work outlives the timeout with chance "
            "e^(-timeout / mean), and that chance must be about 1 in 1000 (a timeout of twice the mean "
            "leaves 1 in 7).",
        )
    return (
        False,
        f"{where}: safe ({made:.2f} per 1000), but a longer handler is too; it is {want:.2f} s.",
        "Solve e^(-timeout / mean) / (1 - e^(-timeout / mean)) = per_1000 / 1000 for the mean, or "
        "search the mean with `la.expected_duplicates(la.p_exceeds('exponential', mean, timeout))`.",
    )


# -- 14.2 · the lost wake-up, as a rule ------------------------------------------------------------
# (commit, hint, fetch_start, fetch_end) -> whether the worker sleeps through the job, by wake mode
_RACES = (
    ((0.5, 1.005, 1.0, 1.01), {"after_fetch": False, "before_fetch": False}),  # the fetch sees it
    ((1.002, 1.004, 1.0, 1.01), {"after_fetch": True, "before_fetch": False}),  # the race
    ((1.002, 1.02, 1.0, 1.01), {"after_fetch": False, "before_fetch": False}),  # the hint wakes the sleeper
    ((2.0, 2.001, 1.0, 1.01), {"after_fetch": False, "before_fetch": False}),  # long after the fetch
)


def _no_race(commit, hint, fetch_start, fetch_end, wake_mode):
    return False  # as if every delivered NOTIFY woke the worker


@exercise(
    "14.2",
    "the lost wake-up, as a rule",
    mistake=_no_race,
    shape=function("sleeps_through(commit, hint, fetch_start, fetch_end, wake_mode)", TRUE_OR_FALSE),
)
def _sleeps_through(fn):
    for (commit, hint, start, end), wants in _RACES:
        for mode, want in wants.items():
            got = bool(call(fn, commit, hint, start, end, mode))  # a numpy bool is welcome too
            if got == want:
                continue
            case = (
                f"A job committed at {commit:g} s, its hint at {hint:g} s, a fetch from {start:g} s to "
                f"{end:g} s, under `{mode}`: you said {got}, it is {want}."
            )
            if want:
                return (
                    False,
                    case,
                    "The fetch began before the commit, so it cannot see the job; the hint "
                    "set the flag during the fetch, and the fetch's end cleared it.",
                )
            if commit < start:
                return False, case, "A fetch sees every job committed before it started: this one is fetched."
            return (
                False,
                case,
                "A flag set after the fetch returned, or armed before it started, wakes the "
                "worker: only a hint that lands during the fetch is erased, and only under "
                "`after_fetch`.",
            )
    return (
        True,
        "Only a job committed after the fetch began, whose hint lands before it returns, is missed — "
        "and only when the flag is cleared after the fetch.",
        "",
    )


# -- 14.3 · AckWait for a duplicate target ------------------------------------------------------------
# (target duplicates per message, median s, sigma): the lesson's handlers, a tighter target, a heavier tail
_ACK_WAITS = ((0.05, 0.8, 0.5), (0.01, 0.8, 0.5), (0.2, 2.0, 1.0), (0.001, 0.3, 0.25))


def _overrun(ack_wait: float, median: float, sigma: float) -> float:
    """P(a lognormal handler outlives ``ack_wait``): what JetStream redelivers, a late ack honoured."""
    return math.erfc(math.log(ack_wait / median) / (sigma * math.sqrt(2))) / 2


def _ack_wait(target: float, median: float, sigma: float) -> float:
    """The smallest AckWait on the 0.1 s grid whose overrun chance is at most ``target``."""
    tenths = 1
    while _overrun(tenths / 10, median, sigma) > target:
        tenths += 1
    return tenths / 10


def _twice_the_median(target, median, sigma):
    return round(2 * median, 1)  # "a lease twice the typical work": sized against the middle, not the tail


@exercise(
    "14.3",
    "AckWait for a duplicate target",
    mistake=_twice_the_median,
    shape=function("ack_wait_for(target, median, sigma)", a_number("of seconds")),
)
def _ack_wait_for(fn):
    miss = first_miss(fn, _ACK_WAITS, _ack_wait, rel=0, abs_=0.01)
    if miss is None:
        return (
            True,
            f"For handlers with a median of 0.8 s (sigma 0.5), {_ack_wait(0.05, 0.8, 0.5):g} s keeps duplicates "
            f"under 5 per 100 and {_ack_wait(0.01, 0.8, 0.5):g} s under 1 per 100: a target five times "
            "smaller costs the tail's worth of AckWait more, and a crashed consumer's messages wait that long.",
            "",
        )
    (target, median, sigma), got, want = miss
    made = _overrun(got, median, sigma) if got > 0 else 1.0
    where = f"For {target:g} duplicates per message, median {median:g} s, sigma {sigma:g}: you said {got:g} s"
    if got < want:
        return (
            False,
            f"{where}, which makes {made:.3f} per message.",
            "The duplicates are the handlers' tail beyond AckWait: P(T > w) = erfc(ln(w / median) / "
            "(sigma sqrt 2)) / 2 must fall to the target; step w up by 0.1 s until it does.",
        )
    return (
        False,
        f"{where}: safe ({made:.4f} per message), but {want:g} s is enough, and shorter.",
        "Take the smallest AckWait on the 0.1 s grid whose overrun chance is at most the target.",
    )
