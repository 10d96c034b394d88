"""Exercises for the notebooks, and the checker that marks them.

Every lesson ends with two or three tasks the learner codes against the public
API (``import fanoutsim as fs``). A task's cell ends with
``ex.check("2.1", answer)``: the answer is a number, a word, or a function
the checker calls with inputs of its own (so a copied number does not pass),
and the :class:`Verdict` says *right*, or what is off and a hint.

>>> from fanoutsim import exercises as ex
>>> ex.check("0.1", ...)           # not answered yet: a note, no hint
>>> ex.check("2.1", 1.0)           # wrong: what is off, and a hint

The tasks are grouped by design (:mod:`.reactor`, :mod:`.outbox`,
:mod:`.leases`, :mod:`.designs`, and :mod:`.systems` for the designs in the
systems you run); each registers itself with :func:`exercise`. A judge that
calls the learner's function on cases of its own holds each answer against a
reference with :func:`first_miss`, and words its verdict from the first case
that is off.
Each carries a typical mistake (``Exercise.mistake``): the tests check that
it gets a hint, and that every solution in the notebooks is marked right.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Verdict",
    "Exercise",
    "EXERCISES",
    "exercise",
    "check",
    "exercises",
    "call",
    "close_to",
    "first_miss",
    "Miss",
    "number",
    "one_of",
    "NotAnswered",
]


@dataclass(frozen=True)
class Verdict:
    """What the checker says of one answer to the ``exercise`` (its id): ``right``;
    ``message`` (what is right, or what is off) and, when wrong, a ``hint``;
    ``answered`` False while the answer is still ``...``. True in a boolean test
    when right; shown as Markdown in a notebook."""

    exercise: str
    right: bool
    message: str
    hint: str = ""
    answered: bool = True

    def _render(self, bold: str, line_break: str) -> str:
        """The verdict as text, its lead and the hint's label between ``bold`` marks."""
        if not self.answered:
            return f"{bold}Exercise {self.exercise}: not answered yet.{bold} {self.message}"
        if self.right:
            return f"\u2714 {bold}Exercise {self.exercise}: right.{bold} {self.message}"
        return (
            f"\u2718 {bold}Exercise {self.exercise}: not yet.{bold} {self.message}"
            f"{line_break}{bold}Hint:{bold} {self.hint}"
        )

    def __str__(self) -> str:
        return self._render("", "\n")

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return self._render("**", "  \n")

    def __bool__(self) -> bool:
        return self.right


Judge = Callable[[Any], tuple[bool, str, str]]


@dataclass(frozen=True)
class Exercise:
    """One task: its ``id`` (``"N.k"``: exercise k of notebook N), a one-line
    ``title``, the ``judge`` (answer -> (right, message, hint)) and a typical
    ``mistake`` (an answer that is wrong the way a learner's often is)."""

    id: str
    title: str
    judge: Judge = field(repr=False)
    mistake: Any = field(repr=False, default=None)

    @property
    def notebook(self) -> int:
        """The number of the notebook the exercise belongs to (``N`` of ``"N.k"``)."""
        return int(self.id.split(".")[0])


#: Every registered exercise by its id (``"2.1"``), filled on first use of :func:`check`
#: or :func:`exercises`.
EXERCISES: dict[str, Exercise] = {}


def exercise(id: str, title: str, mistake: Any) -> Callable[[Judge], Judge]:
    """Register the decorated judge as exercise ``id``."""

    def register(judge: Judge) -> Judge:
        if id in EXERCISES:
            raise ValueError(f"exercise {id} is registered twice")
        EXERCISES[id] = Exercise(id, title, judge, mistake)
        return judge

    return register


def exercises(notebook: int | None = None) -> list[Exercise]:
    """The registered exercises, of one notebook (its number) or all, in order."""
    _load()
    found = [e for e in EXERCISES.values() if notebook is None or e.notebook == int(notebook)]
    return sorted(found, key=lambda e: tuple(int(part) for part in e.id.split(".")))


def _unanswered(answer: Any) -> bool:
    return answer is None or answer is Ellipsis


def check(id: str, answer: Any) -> Verdict:
    """Mark ``answer`` to exercise ``id``. Code of the learner's that raises is
    reported as a wrong answer with the error, never as a traceback."""
    _load()
    if id not in EXERCISES:
        raise KeyError(f"no exercise {id!r}; the exercises: {', '.join(sorted(EXERCISES))}")
    if _unanswered(answer):
        return Verdict(id, False, "Replace the `...` with your answer and run the cell again.", answered=False)
    try:
        right, message, hint = EXERCISES[id].judge(answer)
    except NotAnswered as exc:
        return Verdict(id, False, str(exc), answered=False)
    except Exception as exc:  # noqa: BLE001 - the learner's code: say what it raised
        return Verdict(
            id,
            False,
            f"Your code raised {type(exc).__name__}: {exc}",
            "Run your function by hand on a small case and read the error.",
        )
    return Verdict(id, bool(right), message, "" if right else hint)


class NotAnswered(Exception):
    """A function that still returns nothing."""


def call(fn: Callable, *args, **kwargs) -> Any:
    """The learner's function called on the checker's inputs; its result, or
    'not answered' when it still returns None (a body of ``...``)."""
    if not callable(fn):
        raise TypeError(f"this exercise wants a function, got {type(fn).__name__} {fn!r}")
    result = fn(*args, **kwargs)
    if result is None:
        raise NotAnswered("Your function returns nothing yet: write its body and run the cell again.")
    return result


def close_to(answer: Any, expected: float, *, rel: float = 0.05, abs_: float = 1e-9) -> bool:
    """``answer`` is a number within ``rel`` (relative) or ``abs_`` of ``expected``."""
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and math.isclose(value, expected, rel_tol=rel, abs_tol=abs_)


def number(answer: Any) -> float:
    """``answer`` as a float, or a TypeError that says what was given."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) and not hasattr(answer, "__float__"):
        raise TypeError(f"this exercise wants a number, got {type(answer).__name__} {answer!r}")
    return float(answer)


class Miss(NamedTuple):
    """The first case a learner's function answers off the reference: the
    case's arguments (``args``), the learner's number (``got``) and the
    reference's (``want``)."""

    args: tuple
    got: float
    want: Any


def first_miss(
    fn: Callable, cases: Iterable[Any], want: Callable[..., Any], *, rel: float, abs_: float = 1e-9
) -> Miss | None:
    """Call the learner's ``fn`` on each case (a tuple of arguments, or one
    argument) and hold its number against ``want(*case)``: the first case not
    :func:`close_to` the reference (``rel=0``: equal), or None when none is off.
    Cases run in order, so the verdict names the first one a learner gets wrong."""
    for case in cases:
        args = case if isinstance(case, tuple) else (case,)
        got = number(call(fn, *args))
        expected = want(*args)
        if not close_to(got, expected, rel=rel, abs_=abs_):
            return Miss(args, got, expected)
    return None


def one_of(answer: Any, choices: Iterable[str]) -> str:
    """``answer`` as one of ``choices`` (case and spaces ignored), or a
    ValueError naming them."""
    choices = list(choices)
    text = str(answer).strip().lower()
    for c in choices:
        if text == c.lower():
            return c
    raise ValueError(f"answer one of {', '.join(map(repr, choices))}, got {answer!r}")


_LOADED = False


def _load() -> None:
    """Register every design's exercises (once, on first use)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from fanoutsim.exercises import designs, leases, outbox, reactor, systems  # noqa: F401
