"""The loop helpers every design's runtime shares (fanoutsim.kernel.runtime.loops)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from fanoutsim.kernel.runtime.loops import Sleep, Ticks, Until, arrivals


def _drive(loop, *, now: float = 0.0, until: float = 1e9) -> list[float]:
    """Answer a writer's requests as a driver would (time lands where asked);
    the arrivals it made."""
    clock = [now]
    made: list[float] = []
    loop = loop(lambda: clock[0], made.append)
    for request in loop:
        clock[0] = clock[0] + request.seconds if isinstance(request, Sleep) else request.at
        if clock[0] > until:
            break
    return made


@given(
    rate=st.floats(0.1, 50.0),
    start=st.floats(0.0, 20.0),
    span=st.floats(0.0, 30.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_arrivals_are_a_poisson_schedule_from_start_until_stop(rate, start, span, seed):
    stop = start + span
    made = _drive(lambda now, arrive: arrivals(now, rate, start, stop, random.Random(seed), arrive))
    # the same draws by hand: exponential gaps from start, every arrival before stop
    rng, due, want = random.Random(seed), start, []
    while True:
        due += rng.expovariate(rate)
        if due >= stop:
            break
        want.append(due)
    assert made == want


def test_arrivals_keep_their_schedule_when_a_write_is_slow():
    """A late answer (the wall clock's reading after a slow write) moves no later arrival."""
    clock = [0.0]
    made: list[float] = []
    loop = arrivals(lambda: clock[0], 1.0, 0.0, None, random.Random(3), made.append)
    asked = []
    for request in loop:
        asked.append(request.at)
        clock[0] = request.at + 5.0  # every write took 5 s, far longer than a gap
        if len(asked) == 4:
            break
    rng, due, want = random.Random(3), 0.0, []
    for _ in range(4):
        due += rng.expovariate(1.0)
        want.append(due)
    assert asked == want  # the draws' sums, not pushed back by the writes
    assert made == want[:3]


def test_arrivals_count_by_their_time_not_a_late_reading():
    """An arrival due before stop is written even if the clock reads past stop by then."""
    clock = [0.0]
    made: list[float] = []
    loop = arrivals(lambda: clock[0], 1.0, 0.0, 100.0, random.Random(0), made.append)
    first = next(loop)
    clock[0] = 150.0  # the wall clock woke late, past stop
    next(loop, None)
    assert made == [first.at] and first.at < 100.0


def test_arrivals_wait_for_their_start_and_a_started_writer_does_not():
    assert isinstance(next(arrivals(lambda: 2.0, 1.0, 5.0, None, random.Random(0), print)), Sleep)
    assert isinstance(next(arrivals(lambda: 7.0, 1.0, 5.0, None, random.Random(0), print)), Until)


def test_ticks_skip_what_a_slow_pass_overran():
    ticks = Ticks(0.0, 1.0)
    assert [ticks.next(t).at for t in (0.0, 0.5, 4.2, 4.3)] == [1.0, 2.0, 4.2, 5.2]


@given(
    late=st.floats(0.001, 2.0),
    start=st.floats(0.0, 5.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_writer_that_first_wakes_late_keeps_its_schedule(late, start, seed):
    """A wall clock's writer thread may first run ``late`` s after its origin (a
    loaded machine): given the origin, its arrivals are the schedule's, from
    ``start``, the missed ones written at once; without it, they shift."""
    stop = start + 10.0

    def woke_late(origin):
        return _drive(
            lambda now, arrive: arrivals(now, 4.0, start, stop, random.Random(seed), arrive, origin),
            now=start + late,  # the first reading of the clock, already past the start
        )

    on_time = _drive(lambda now, arrive: arrivals(now, 4.0, start, stop, random.Random(seed), arrive))
    assert woke_late(0.0) == on_time
    shifted = woke_late(None)
    assert shifted != on_time and all(a > b for a, b in zip(shifted, on_time))
