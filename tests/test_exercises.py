"""The exercises, as a teacher runs them: every solution in the notebooks, run on
its own, is marked right by the checker; every typical mistake gets a hint; an
answer not written yet gets a note, not a hint; learner code that raises is
marked wrong with its error, not a traceback; an answer of the wrong shape (a
string for a dict, a number for a function, a function of the wrong arity or one
that returns the wrong kind of thing) is told the shape expected, as the task's
own cell writes it.

A solution cell is self-contained (it imports what it uses), so it runs here
in a fresh namespace from the notebooks' folder, as in the notebook.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fanoutsim import exercises as ex

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _build():
    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _solutions() -> list:
    build = _build()
    found = []
    for src in sorted((NOTEBOOKS / "src").glob("*.py")):
        for cell in build.cells_of(src.read_text()):
            if "solution" in cell.metadata.get("tags", []):
                found.append(pytest.param(cell.source, id=f"{src.stem}:{cell.source.count(chr(10))}"))
    return found


SOLUTIONS = _solutions()


def _run(source: str):
    """Run a cell's code; the value of its last line (the checker's verdict)."""
    tree = ast.parse(source)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr), "a solution ends with ex.check(...)"
    namespace: dict = {"__name__": "__lesson__"}
    exec(compile(tree, "<solution>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<solution>", "eval"), namespace)


@pytest.mark.parametrize("source", SOLUTIONS)
def test_every_solution_is_marked_right(source, monkeypatch):
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    verdict = _run(source)
    assert isinstance(verdict, ex.Verdict)
    assert verdict.right, str(verdict)
    assert "right" in str(verdict) and not verdict.hint


def test_every_exercise_has_exactly_one_solution_in_the_notebooks():

    ids = [re.search(r'ex\.check\("(\d+\.\d+)"', p.values[0]).group(1) for p in SOLUTIONS]
    assert sorted(ids) == sorted(e.id for e in ex.exercises())
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("exercise", ex.exercises(), ids=lambda e: e.id)
def test_a_typical_mistake_gets_what_is_off_and_a_hint(exercise):
    verdict = ex.check(exercise.id, exercise.mistake)
    assert verdict.answered and not verdict.right, str(verdict)
    assert verdict.message and verdict.hint and "Hint:" in str(verdict) and "raised" not in verdict.message


@pytest.mark.parametrize("exercise", ex.exercises(), ids=lambda e: e.id)
def test_an_unwritten_answer_gets_a_note_and_no_hint(exercise):
    verdict = ex.check(exercise.id, ...)
    assert not verdict.answered and not verdict.right and not verdict.hint
    assert "not answered yet" in str(verdict)


@pytest.mark.parametrize("bound", [lambda poll: poll, lambda poll: poll + 0.01], ids=["poll", "poll+step"])
def test_a_measured_exercise_refuses_the_formula_for_the_run(bound):
    """8.1 asks for the worst wait of one run: the bound it stays under (one
    interval, plus the step) is not that measurement, and is told to measure."""
    verdict = ex.check("8.1", bound)
    assert verdict.answered and not verdict.right, str(verdict)
    assert "the run gives" in verdict.message and "measure it" in verdict.hint


def test_the_retry_budget_exercise_wants_the_measured_wait_not_its_input_or_its_ceiling():
    """8.2 asks how long the row behind a poison row waited: a number of the
    run (the backoffs are jittered), never the budget it is given. The reference
    run passes; the budget echoed back, the backoffs summed without jitter, one
    backoff too many, and a wait in the jitter's range but not this run's each
    get the hint for that mistake."""
    from fanoutsim.exercises.outbox import _measured_hold_up

    assert ex.check("8.2", _measured_hold_up).right
    assert ex.check("8.2", lambda budget: round(_measured_hold_up(budget), 2)).right  # read to 2 decimals
    assert all(_measured_hold_up(b) != b for b in (4, 6))  # the answer is not the input

    def wrong(answer) -> ex.Verdict:
        verdict = ex.check("8.2", answer)
        assert verdict.answered and not verdict.right and "the run gives 2.470 s" in verdict.message, str(verdict)
        return verdict

    assert "the budget itself" in wrong(lambda budget: budget).hint
    assert "without jitter" in wrong(lambda budget: 0.5 * (2 ** (budget - 1) - 1)).hint
    assert "One backoff too many" in wrong(lambda budget: 0.5 * (2**budget - 1)).hint
    assert "doubles" in wrong(lambda budget: 0.5 * budget).hint
    assert "in order" in wrong(lambda budget: 0.0).hint
    assert "seed=0" in wrong(lambda budget: 3.0).hint  # within the jitter's range (1.75 to 3.5 s), not the run


def test_the_backfill_exercise_wants_the_runs_worst_not_a_typical_wait_or_the_poll():
    """9.2 asks for the worst latency of the rows committed in the backfill: the
    reference run passes; a typical wait (a mean, a median, a round number under
    the poll), the safety poll itself and the reserved answer for both do not,
    each with its hint."""
    from fanoutsim.exercises.outbox import _measured_backfill_worst

    assert ex.check("9.2", _measured_backfill_worst).right
    worst = _measured_backfill_worst(False)
    assert 5.0 < worst < 5.1  # the safety poll, plus the step

    def wrong(answer) -> ex.Verdict:
        verdict = ex.check("9.2", answer)
        assert verdict.answered and not verdict.right and f"the run gives {worst:.3f} s" in verdict.message, str(
            verdict
        )
        return verdict

    assert "not a typical one" in wrong(lambda reserved: 0.01 if reserved else 3.0).hint
    assert "not a typical one" in wrong(lambda reserved: 0.01 if reserved else worst / 2).hint
    assert "the bound" in wrong(lambda reserved: 0.01 if reserved else 5.0).hint
    assert "hint is lost" in wrong(lambda reserved: 0.01).hint


def test_learner_code_that_raises_is_marked_wrong_with_its_error():
    verdict = ex.check("0.1", lambda prices, threshold: 1 / 0)
    assert not verdict.right and "ZeroDivisionError" in verdict.message and verdict.hint
    with pytest.raises(KeyError, match="no exercise '99.9'"):
        ex.check("99.9", 1)


def test_a_verdict_reads_as_markdown_in_a_notebook():
    right = ex.Verdict("0.1", True, "Well done.")
    wrong = ex.Verdict("0.1", False, "Off by one.", "Count again.")
    assert right._repr_markdown_().startswith("\u2714 **Exercise 0.1: right.**")
    assert "**Hint:** Count again." in wrong._repr_markdown_() and not wrong


@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=6),
    st.integers(0, 6),
    st.sampled_from([0.0, 0.05]),
)
def test_first_miss_names_the_first_case_off_the_reference_and_calls_no_further(xs, wrong_at, rel):
    calls: list[float] = []

    def learner(x: float) -> float:
        calls.append(x)
        return 2 * x + 1 + (1e6 if len(calls) - 1 == wrong_at else 0.0)

    miss = ex.first_miss(learner, xs, lambda x: 2 * x + 1, rel=rel)
    if wrong_at >= len(xs):
        assert miss is None and calls == xs
    else:
        assert miss == ex.Miss((xs[wrong_at],), 2 * xs[wrong_at] + 1 + 1e6, 2 * xs[wrong_at] + 1)
        assert calls == xs[: wrong_at + 1]


def test_first_miss_spreads_tuples_and_holds_rel_zero_to_equality():
    assert ex.first_miss(lambda k, p: min(k, p), [(8, 4), (2, 8)], min, rel=0.0) is None
    assert ex.first_miss(lambda k, p: k, [(8, 4), (2, 8)], min, rel=0.0) == ex.Miss((8, 4), 8.0, 4)
    assert ex.first_miss(lambda x: x * 1.01, [100.0], lambda x: x, rel=0.0) is not None
    assert ex.first_miss(lambda x: x * 1.01, [100.0], lambda x: x, rel=0.02) is None
    with pytest.raises(ex.NotAnswered):
        ex.first_miss(lambda x: None, [1], lambda x: x, rel=0.0)
    with pytest.raises(ex.WrongShape, match=r"got a str \('x'\) where a number is wanted"):
        ex.first_miss(lambda x: "x", [1], lambda x: x, rel=0.0)


def test_a_learner_right_on_the_first_case_only_hears_of_the_case_it_misses():
    from fanoutsim.exercises.reactor import _measured_mean_wait

    first = _measured_mean_wait(0.5)
    verdict = ex.check("1.1", lambda p: first)  # right at P = 0.5 s, not at 2 s
    assert not verdict.right and f"At P = 2 s you measured {first:.3f} s" in verdict.message
    verdict = ex.check("10.2", lambda k, p, order: min(k, p))  # head-of-line's rule for both
    assert "under `riffdb` you said 4; it is 8" in verdict.message


# -- answers of the wrong shape ---------------------------------------------------------------------

ALL = ex.exercises()
# anything but a function, a number, a string or a dict, as a learner might type it by mistake
_VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=4),
    st.tuples(st.integers(0, 9)),
    st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=3),
    st.sets(st.integers(0, 9), max_size=3),
)


def _kind(exercise) -> str:
    """The kind of answer an exercise asks for, from how its shape reads."""
    text = str(exercise.shape)
    return next(k for k in ("a function", "a number", "a string", "a dict") if text.startswith(k))


def _of_kind(value, kind: str) -> bool:
    if kind == "a number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"a string": isinstance(value, str), "a dict": isinstance(value, dict), "a function": callable(value)}[kind]


def _function_of(arity: int, result):
    """A function of exactly ``arity`` parameters that returns ``result``."""

    def fn(*args):
        return result

    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(arity)]
    )
    return fn


def _told_the_shape(exercise, verdict, returned=None) -> None:
    """The shape expected, and the hint for it: to return one number of a whole
    record (a dict, a Series, a DataFrame) a function returned, else to start
    from the task's cell."""
    import pandas as pd

    assert verdict.answered and not verdict.right, str(verdict)
    assert verdict.message.startswith(f"Expected {exercise.shape}; "), verdict.message
    whole = isinstance(returned, (dict, pd.Series, pd.DataFrame)) and "returns a number" in str(exercise.shape)
    assert "raised" not in verdict.message and verdict.hint == (ex.WHOLE_HINT if whole else ex.SHAPE_HINT)


@pytest.mark.parametrize("exercise", ALL, ids=lambda e: e.id)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(value=_VALUES)
def test_an_answer_of_another_kind_is_told_the_shape_expected(exercise, value):
    assume(not _of_kind(value, _kind(exercise)))
    verdict = ex.check(exercise.id, value)
    _told_the_shape(exercise, verdict)
    assert "; got a" in verdict.message


@pytest.mark.parametrize("exercise", [e for e in ALL if _kind(e) == "a function"], ids=lambda e: e.id)
@settings(max_examples=10, deadline=None)
@given(arity=st.integers(0, 6))
def test_a_function_of_the_wrong_arity_is_told_the_signature_expected(exercise, arity):
    wanted = len(inspect.signature(exercise.mistake).parameters)
    assume(arity != wanted)
    verdict = ex.check(exercise.id, _function_of(arity, 1.0))
    _told_the_shape(exercise, verdict)
    assert f"which cannot be called with {wanted} argument" in verdict.message


RETURNING = [e for e in ALL if _kind(e) == "a function" and "that returns" in str(e.shape)]


@pytest.mark.parametrize("exercise", RETURNING, ids=lambda e: e.id)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(result=_VALUES)
def test_a_function_that_returns_another_kind_is_told_what_it_returned(exercise, result):
    returns = str(exercise.shape).split("that returns ", 1)[1]
    if returns.startswith("a number"):
        assume(not _of_kind(result, "a number"))
    elif returns == "True or False":
        assume(not isinstance(result, bool))
    else:  # a pair
        assume(not (isinstance(result, tuple) and len(result) == 2))
    arity = len(inspect.signature(exercise.mistake).parameters)
    verdict = ex.check(exercise.id, _function_of(arity, result))
    _told_the_shape(exercise, verdict, returned=result)
    assert " it returned " in verdict.message


def test_the_shape_names_what_is_off_in_a_dict_and_the_call_that_returned_the_wrong_kind():
    verdict = ex.check("12.1", "Outbox")  # the learner's mistake that asked for this
    assert verdict.message == (
        "Expected a dict like {'a': ..., 'b': ..., 'c': ...}, each value one of 'reactor', 'outbox', "
        "'leases'; got a str ('Outbox')."
    )
    assert "got a dict with the keys 'a', 'b'." in ex.check("12.1", {"a": "outbox", "b": "leases"}).message
    assert "got an int (3) for 'c'." in ex.check("12.1", {"a": "outbox", "b": "leases", "c": 3}).message
    assert not ex.check("12.1", {"a": "outbox", "b": "leases", "c": ...}).answered
    verdict = ex.check("0.2", lambda fire_at, poll_interval: [1.0])
    assert verdict.message.endswith("called as wait(0.25, 1.0) it returned a list ([1.0]).")
    verdict = ex.check("7.2", lambda a, b: "yes")
    assert "called as same_shape(a DataFrame, a DataFrame) it returned a str ('yes')." in verdict.message


@pytest.mark.parametrize("exercise", ALL, ids=lambda e: e.id)
def test_a_typical_mistake_has_the_right_shape_and_so_is_told_about_the_idea(exercise):
    assert exercise.shape.misfit(exercise.mistake) is None


def _tasks() -> dict[str, str]:
    build = _build()
    found = {}
    for src in sorted((NOTEBOOKS / "src").glob("*.py")):
        for cell in build.cells_of(src.read_text()):
            m = re.search(r'ex\.check\("(\d+\.\d+)"', cell.source)
            if m and "solution" not in cell.metadata.get("tags", []):
                found[m.group(1)] = cell.source
    return found


def test_the_shape_a_checker_expects_is_the_one_the_task_cell_starts_from():
    tasks = _tasks()
    assert set(tasks) == {e.id for e in ALL}
    for exercise in ALL:
        source, shape = tasks[exercise.id], str(exercise.shape)
        if shape.startswith("a function"):
            (signature,) = re.findall(r"^def (\w+\([^)]*\)):", source, flags=re.M)
            assert shape.startswith(f"a function `{signature}`"), (exercise.id, shape, signature)
        else:  # the cell assigns `...`, which check() calls not answered
            assert re.search(r"^\w+ = (\.\.\.|\{.*\.\.\..*\})", source, flags=re.M), source


@pytest.mark.parametrize(
    ("exercise", "answer", "hint"),
    [
        ("2.1", lambda mode, limit: {"crashes": 8, "duplicates_per_crash": 1.0}, "returns a whole record or table"),
        ("3.2", lambda policy, pause: {"lost_paused": 0}, "returns a whole record or table"),
        ("3.1", lambda retention: 2.0 * (retention + 10.0), "the sawtooth's top"),
        ("10.1", 66, "the next whole second or two"),
    ],
    ids=["2.1-a-dict", "3.2-a-dict", "3.1-the-top", "10.1-a-second-short"],
)
def test_a_near_miss_gets_the_hint_for_that_mistake(exercise, answer, hint):
    """A whole result where one number was asked, the sawtooth's top for its
    mean, a lease a second short: each told what it is, not a generic hint."""
    verdict = ex.check(exercise, answer)
    assert verdict.answered and not verdict.right, str(verdict)
    assert hint in verdict.hint, verdict.hint


def test_a_wait_in_milliseconds_is_told_its_unit():
    """0.2 wants seconds; the tour's table showed the wait in milliseconds."""
    verdict = ex.check("0.2", lambda fire_at, p: 1000 * (math.ceil(fire_at / p) * p - fire_at))
    assert verdict.answered and not verdict.right, str(verdict)
    assert "milliseconds" in verdict.hint, verdict.hint


def test_the_fence_exercise_holds_the_count_against_the_run_of_each_seed():
    """11.2 runs the learner's function at two seeds: the run's counts pass; one
    seed's count said for both, a run twice as long and a made-up number do not,
    and each is told what to fix."""
    from fanoutsim.exercises.leases import _SEEDS, _reference_pruned

    counts = {seed: _reference_pruned(seed) for seed in _SEEDS}
    assert len(set(counts.values())) == 2  # else a count copied from one seed would pass
    assert ex.check("11.2", lambda idle, seed: 0 if idle else counts[seed]).right
    verdict = ex.check("11.2", lambda idle, seed: 0 if idle else counts[0])  # copied from the notebook's seed
    assert not verdict.right and f"prunes {counts[1]}" in verdict.message and "Pass the seed" in verdict.hint
    for alone, hint in ((1000, "Stop the workload and the clock at 300 s"), (360, "prune every 10 s")):
        verdict = ex.check("11.2", lambda idle, seed, alone=alone: 0 if idle else alone)
        assert verdict.answered and not verdict.right, str(verdict)
        assert f"prunes {counts[0]}" in verdict.message and hint in verdict.hint, str(verdict)


def test_the_hintless_outbox_exercise_wants_the_runs_median_not_half_the_poll():
    """12.2: the run's medians pass; P/2 (what they tend to, with no run), the
    hinted latency and the poll itself do not, each with its hint."""
    from fanoutsim.exercises.designs import _measured_median

    assert ex.check("12.2", _measured_median).right
    assert all(_measured_median(p) != p / 2 for p in (1.0, 4.0))  # else P/2 would pass without a run
    for answer, hint in (
        (lambda p: p / 2, "not this run's"),
        (lambda p: 0.01, "Drop every hint"),
        (lambda p: p, "median"),
    ):
        verdict = ex.check("12.2", answer)
        assert not verdict.right and "the run gives" in verdict.message and hint in verdict.hint, str(verdict)


def _wrong(id: str, answer, *, said: str, hint: str) -> ex.Verdict:
    """``answer`` to exercise ``id`` is marked wrong, its message saying ``said`` and its hint ``hint``."""
    verdict = ex.check(id, answer)
    assert verdict.answered and not verdict.right, str(verdict)
    assert said in verdict.message and hint in verdict.hint, str(verdict)
    return verdict


def test_the_pollers_exercise_holds_the_count_against_the_seeded_run():
    """13.2: the run's counts for 1, 2 and 3 pollers pass; the count the notebook's
    verdict prints, said for every number of pollers, fails at 3; the expectation
    (rate × time per extra poller) is told to measure; runs of 50 s and 70 s, a
    seed's few percent off, and a poller too many are held against the run."""
    import fanoutsim as fs
    from fanoutsim.exercises.designs import _reference_extra
    from fanoutsim.faults import FaultPlan, Pollers

    want = {n: _reference_extra(n) for n in (1, 2, 3)}
    assert want[1] == 0 and want[2] != 300 and want[3] != want[2]
    assert ex.check("13.2", _reference_extra).right

    def run(pollers: int, until: float = 60, seed: int = 0) -> int:
        sim = fs.Simulation(seed=seed, faults=FaultPlan([Pollers(pollers)]) if pollers > 1 else None)
        sim.runner.subscribe_workflow_to_reactor("r", "w")
        sim.add_workload("r", 5.0)
        sim.run(until=until)
        return int(fs.check(sim).total["extra_deliveries"])

    said = f"makes {want[2]}"
    _wrong("13.2", lambda n: 0 if n == 1 else want[2], said=f"makes {want[3]}", hint="Pollers(pollers)")
    _wrong("13.2", lambda n: (n - 1) * 300, said=said, hint="That is the expectation")
    _wrong("13.2", lambda n: run(n, until=70), said=said, hint="no longer")
    _wrong("13.2", lambda n: run(n, until=50), said=said, hint="run the clock to t = 60 s")
    _wrong("13.2", lambda n: run(n, seed=1), said=said, hint="default seed (0)")
    _wrong("13.2", lambda n: _reference_extra(n + 1), said="With one poller", hint="the runner included")


def test_the_late_commit_exercise_holds_the_lost_rows_against_the_seeded_run():
    """13.1: the run's count passes; a run of 90 s or 150 s, or 8% of commits held
    where the task says 10%, is held against the run's count, with the run's recipe."""
    import fanoutsim as fs
    from fanoutsim.designs.outbox import OutboxConfig
    from fanoutsim.exercises.designs import _reference_lost_late
    from fanoutsim.faults import FaultPlan, LateCommit

    want = _reference_lost_late("all")
    assert want > 0 and _reference_lost_late("gap") == 0
    assert ex.check("13.1", _reference_lost_late).right

    def run(mode: str, seconds: float = 120.0, until: float = 130.0, probability: float = 0.1) -> int:
        config = OutboxConfig(safety_poll_interval=0.5, read_mode=mode, gap_timeout=5.0)
        sim = fs.OutboxSimulation(config, seed=0, faults=FaultPlan([LateCommit(probability=probability, delay=0.8)]))
        sim.register_consumer("indexer", duration=0.001)
        sim.add_workload(5.0, stop=seconds)
        sim.run(until=until)
        return int(fs.check_outbox(sim).total["lost"])

    for answer in (
        lambda m: run(m, seconds=90.0, until=90.0),
        lambda m: run(m, seconds=150.0, until=150.0),
        lambda m: run(m, probability=0.08),
    ):
        _wrong("13.1", answer, said=f"the run described loses {want}", hint="LateCommit(probability=0.1")
    _wrong("13.1", lambda m: 0, said="nothing lost", hint="LateCommit")
    _wrong("13.1", lambda m: want, said='Under `read_mode="gap"`', hint="read_mode=read_mode")


def test_the_backlog_exercise_wants_the_runs_count_at_three_batch_limits():
    """1.2: the run's backlogs pass; the verdict's two numbers copied (wrong at the
    third limit), the expectation (5 - B) × 300 and a run of 340 s do not."""
    from fanoutsim.exercises.reactor import _backlog_ignoring_the_limit, _measured_backlog

    want = {b: _measured_backlog(b) for b in (2, 4, 10)}
    assert ex.check("1.2", _measured_backlog).right
    assert want[2] != 900 and want[4] != 300  # else the formula would pass without a run

    _wrong("1.2", lambda b: want[2] if b < 5 else want[10], said=f"the run leaves {want[4]}", hint="until=300")
    _wrong("1.2", lambda b: max(5 - b, 0) * 300, said=f"the run leaves {want[2]}", hint="That is the expectation")
    _wrong("1.2", lambda b: _run_backlog(b, until=340), said=f"the run leaves {want[2]}", hint="no longer")
    _wrong("1.2", _backlog_ignoring_the_limit, said=f"the run leaves {want[2]}", hint="reactor_poll_batch_limit")


def _run_backlog(batch_limit: int, until: float) -> int:
    import fanoutsim as fs

    sim = fs.Simulation(fs.SchedulerConfig(reactor_poll_interval=1.0, reactor_poll_batch_limit=batch_limit), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.add_workload("r", 5.0)
    sim.run(until=until)
    return len(sim.firings()) - len(sim.executions())


def test_the_duplicates_exercise_varies_the_batch_limit_so_a_lookup_by_mode_fails():
    """2.1: the runs' ratios pass; a lookup by mode (the notebook's 8.12 for
    `per_batch` included) and the expectation (L + 1) / 2 do not."""
    from fanoutsim.exercises.reactor import _measured_per_crash

    assert ex.check("2.1", _measured_per_crash).right
    assert _measured_per_crash("per_batch", 20) != _measured_per_crash("per_batch", 30)
    verdict = ex.check("2.1", lambda mode, batch_limit: {"atomic": 0, "per_firing": 1}[mode])
    assert not verdict.right and "KeyError" in verdict.message
    table = {"atomic": 0.0, "per_firing": 1.0, "per_batch": round(_measured_per_crash("per_batch", 20), 2)}
    _wrong("2.1", lambda mode, batch_limit: table[mode], said="at a batch limit of 30", hint="pass the batch limit")
    half = {"atomic": 0.0, "per_firing": 1.0}
    _wrong(
        "2.1",
        lambda mode, batch_limit: half.get(mode, (batch_limit + 1) / 2),
        said="Under `per_batch` at a batch limit of 20",
        hint="That is the expectation",
    )


def test_the_idempotent_effect_gets_a_context_with_every_key_a_real_one_has():
    """2.2: the probe the checker first calls the learner's function with is a
    real execution's context: `reactor_fired_at` is in it (lesson 0 says so)."""
    from fanoutsim.exercises.reactor import _a_real_context

    assert {"reactor_name", "reactor_firing_id", "reactor_fired_at"} <= dict(_a_real_context()).keys()

    def write(table, context):
        table[context["reactor_firing_id"]] = {"at": context["reactor_fired_at"], "n": context["n"]}

    assert ex.check("2.2", write).right


@pytest.mark.parametrize(
    ("id", "formula", "said"),
    [
        ("1.1", lambda p: p / 2, "At P = 0.5 s"),
        ("3.1", lambda r: 2 * (r + 5), "At a retention of 60 s"),
        ("6.2", lambda n, p: n / p, "For 3 subscriptions at P = 7 s"),
        ("7.1", lambda rt: 0.5 + rt, "With a round trip of 0 s"),
    ],
    ids=["1.1-P/2", "3.1-rate(R+I/2)", "6.2-n/P", "7.1-P/2+rt"],
)
def test_a_measured_exercise_refuses_the_expectation_for_the_run(id, formula, said):
    """1.1, 3.1, 6.2, 7.1 ask for a number measured in a run; the formula it tends
    to differs from the run's number in the checker's cases, and is told to measure."""
    _wrong(id, formula, said=said, hint="That is the expectation")


def test_the_measured_exercises_pass_their_runs():
    from fanoutsim.exercises.reactor import (
        _measured_errors,
        _measured_mean_rows,
        _measured_mean_wait,
        _measured_queries,
        _reference_wait,
    )

    for id, run in (
        ("1.1", _measured_mean_wait),
        ("3.1", _measured_mean_rows),
        ("4.2", _measured_errors),
        ("6.2", _measured_queries),
        ("7.1", _reference_wait),
    ):
        assert ex.check(id, run).right, id
    assert _measured_queries(3, 7.0) == 27 / 60  # 9 passes (t = 0, 7, ..., 56), not 60 / 7
    assert _measured_errors(25) == 20  # a 20 s run ends before the limit


def test_the_hold_exercise_refuses_the_limit_where_the_run_ends_first():
    """4.2: the limit itself is the count only when the run reaches it; at 25 the
    20 s run counts 20, and the limit is told it is not the run."""
    _wrong(
        "4.2",
        lambda limit: limit,
        said="With a limit of 25 you counted 25 errors; the run counts 20",
        hint="measure it",
    )
    _wrong("4.2", lambda limit: 1, said="With a limit of 3", hint="retries it each poll")


def test_the_twins_exercise_varies_the_pairs_so_a_copied_count_fails():
    """5.1: the pairs' twins lost under `fired_at`, none under the compound cursor;
    the count of the notebook's three pairs said for any number fails."""
    assert ex.check("5.1", lambda watermark, pairs: pairs if watermark == "fired_at" else 0).right
    _wrong("5.1", lambda w, pairs: 3 if w == "fired_at" else 0, said="with 2 pairs you found 3 lost", hint="pairs")
    _wrong("5.1", lambda w, pairs: pairs, said="Under `fired_at_id` with 3 pairs", hint="watermark=watermark")


@pytest.mark.parametrize(
    ("when", "hint"),
    [
        ("payload.quote.region.startsWith('us') && payload.quote.price > 100", "compare the region exactly"),
        ("payload.quote.region == 'us-east' && payload.quote.price >= 101", "100.5 is above 100"),
        ("payload.quote.region == 'us-east' && payload.quote.price >= 100", "exactly 100 is not above"),
        ("payload.quote.region == 'us-east' || payload.quote.price > 100", "`&&`, not `||`"),
    ],
    ids=["a-prefix", "whole-prices", "at-least-100", "or"],
)
def test_the_filter_exercise_fires_a_us_west_quote_and_a_fractional_price(when, hint):
    """4.1: a region matched by its prefix passes us-west; `>= 101` misses 100.5."""
    assert ex.check("4.1", "payload.quote.region == 'us-east' && payload.quote.price > 100").right
    _wrong("4.1", when, said="it should pass", hint=hint)


def test_the_shape_exercise_has_a_pair_of_one_mean_and_one_spread():
    """7.2: comparing the mean and the standard deviation passes the first three
    pairs; the fourth shares both and differs in shape, as KS sees."""

    def mean_and_sd(a, b):
        x, y = a["fire_to_dispatch"], b["fire_to_dispatch"]
        return bool(abs(x.mean() - y.mean()) < 0.05 and abs(x.std() - y.std()) < 0.05)

    _wrong("7.2", mean_and_sd, said="one mean and one standard deviation", hint="Equal means and equal spreads")
