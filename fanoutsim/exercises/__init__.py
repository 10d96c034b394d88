"""Exercises for the notebooks, and the checker that marks them.

Every lesson ends with two or three tasks the learner codes against the public
API (``import fanoutsim as fs``). A task's cell ends with
``ex.check("2.1", answer)``: the answer is a number, a word, or a function
the checker calls with inputs of its own (so a copied number does not pass),
and the :class:`Verdict` says *right*, or what is off and a hint.

>>> from fanoutsim import exercises as ex
>>> ex.check("0.1", ...)           # not answered yet: a note, no hint
>>> ex.check("5.2", 1.0)           # wrong: what is off, and a hint
>>> ex.check("2.1", 1.0)           # a number where a function is asked: the shape expected

The tasks are grouped by design (:mod:`.reactor`, :mod:`.outbox`,
:mod:`.leases`, :mod:`.designs`, and :mod:`.systems` for the designs in the
systems you run); each registers itself with :func:`exercise`. A judge that
calls the learner's function on cases of its own holds each answer against a
reference with :func:`first_miss`, and words its verdict from the first case
that is off.
Each carries a typical mistake (``Exercise.mistake``): the tests check that
it gets a hint, and that every solution in the notebooks is marked right.

Each also declares the shape of its answer (``Exercise.shape``): a
:func:`function` with its signature and what it returns, :func:`a_number`,
:func:`a_string`, :func:`a_tuple`, :data:`TRUE_OR_FALSE` or :func:`a_dict`. :func:`check` holds the answer against it
before the judge sees it, and a function's every result on the way: an answer
of the wrong shape (a string where a dict is asked, a number where a function
is, a function of two arguments where three are passed, a list returned where
a number is wanted) is told what shape is expected, never to debug code that
may be right.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

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
    "NotAnswered",
    "WrongShape",
    "Shape",
    "function",
    "a_number",
    "a_string",
    "a_dict",
    "a_tuple",
    "TRUE_OR_FALSE",
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


class WrongShape(TypeError):
    """An answer, or a result of the learner's function, of the wrong shape. Its
    message is the clause that follows the shape expected (``Expected a number of
    seconds; ...``): ``got a str ('Outbox')``, ``called as wait(0.25, 1.0) it
    returned a list ([0.75])``; its ``hint``, if set, what to do instead."""

    #: What to do instead, when the wrong shape has a hint of its own (a whole
    #: record returned where one number of it was asked); None: the general one.
    hint: str | None = None


def _kind(value: Any) -> str:
    """What ``value`` is, in a learner's words: ``a str ('Outbox')``, ``a function
    wait(fire_at)``, ``a DataFrame``."""
    if inspect.isroutine(value) or isinstance(value, functools.partial):
        return f"a function {_signature(value)}"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    text = repr(value)
    return f"{article} {name} ({text})" if len(text) <= 40 else f"{article} {name}"


def _signature(fn: Callable) -> str:
    try:
        return f"{getattr(fn, '__name__', 'fn')}{inspect.signature(fn)}"
    except (TypeError, ValueError):  # a builtin without one
        return getattr(fn, "__name__", repr(fn))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 30 else _kind(value)


@dataclass(frozen=True)
class Shape:
    """The shape of an answer, or of what a function returns. ``text`` (also
    ``str(shape)``) says it to the learner ("a number of seconds"); :meth:`misfit`
    says what an answer is instead, or None when it fits; :meth:`accept` is the
    answer as the judge gets it."""

    text: str

    def __str__(self) -> str:
        return self.text

    def misfit(self, answer: Any) -> str | None:
        """What ``answer`` is instead of this shape, in a learner's words ("a str
        ('Outbox')"), or None when it fits. Each kind of shape says it its way."""
        raise NotImplementedError

    def accept(self, answer: Any) -> Any:
        """``answer`` as the judge gets it, once it fits: itself, unless a shape
        converts it (a numpy number to Python's, say)."""
        return answer


@dataclass(frozen=True)
class _Number(Shape):
    def misfit(self, answer: Any) -> str | None:
        fits = isinstance(answer, numbers.Real) and not isinstance(answer, (bool, np.bool_))
        return None if fits else _kind(answer)


@dataclass(frozen=True)
class _Bool(Shape):
    def misfit(self, answer: Any) -> str | None:
        return None if isinstance(answer, (bool, np.bool_)) else _kind(answer)


@dataclass(frozen=True)
class _String(Shape):
    def misfit(self, answer: Any) -> str | None:
        return None if isinstance(answer, str) else _kind(answer)


@dataclass(frozen=True)
class _Tuple(Shape):
    size: int = 2

    def misfit(self, answer: Any) -> str | None:
        if isinstance(answer, tuple) and len(answer) == self.size:
            return None
        return _kind(answer) if not isinstance(answer, tuple) else f"a tuple of {len(answer)} ({answer!r})"


@dataclass(frozen=True)
class _Dict(Shape):
    keys: tuple[str, ...] = ()
    values: tuple[str, ...] = ()  # the words a value may be (case and spaces ignored); `...` is unanswered

    def misfit(self, answer: Any) -> str | None:
        if not isinstance(answer, Mapping):
            return _kind(answer)
        if set(answer) != set(self.keys):
            return f"a dict with the keys {', '.join(map(repr, answer))}" if answer else "an empty dict"
        words = {v.lower() for v in self.values}
        for key in self.keys:
            value = answer[key]
            if value is not ... and not (isinstance(value, str) and value.strip().lower() in words):
                return f"{_kind(value)} for {key!r}"
        return None


@dataclass(frozen=True)
class _Function(Shape):
    name: str = ""
    params: tuple[str, ...] = ()
    returns: Shape | None = None

    def misfit(self, answer: Any) -> str | None:
        if not callable(answer) or isinstance(answer, type):
            return _kind(answer)
        try:
            signature = inspect.signature(answer)
        except (TypeError, ValueError):  # a builtin without one: its call will say
            return None
        try:
            signature.bind(*self.params)
        except TypeError:
            count = len(self.params)
            return f"{_kind(answer)}, which cannot be called with {count} argument{'s' * (count != 1)}"
        return None

    def accept(self, answer: Any) -> Any:
        """The learner's function with each of its results held against ``returns``
        (None passes through: :func:`call` says the function is not written yet)."""
        returns = self.returns
        if returns is None:
            return answer

        @functools.wraps(answer)
        def checked(*args: Any) -> Any:
            result = answer(*args)
            off = None if result is None else returns.misfit(result)
            if off is not None:
                wrong = WrongShape(f"called as {self.name}({', '.join(map(_short, args))}) it returned {off}")
                if isinstance(returns, _Number) and _is_whole(result):
                    wrong.hint = WHOLE_HINT
                raise wrong
            return result

        return checked


def function(signature: str, returns: Shape | None = None, does: str = "") -> Shape:
    """A function answer: ``signature`` as the task's cell defines it
    (``"wait(fire_at, poll_interval)"``), what each call ``returns`` (a shape,
    checked on every call) or, for a function whose result is not read, what it
    ``does``."""
    m = re.fullmatch(r"(\w+)\(([\w, ]*)\)", signature)
    if not m:
        raise ValueError(f"a signature like 'name(a, b)', got {signature!r}")
    params = tuple(p.strip() for p in m.group(2).split(",") if p.strip())
    said = f"that returns {returns}" if returns is not None else does
    return _Function(f"a function `{signature}` {said}".strip(), m.group(1), params, returns)


def a_number(of: str = "") -> Shape:
    """A number (int or float, a numpy one too; not True or False): ``of`` says of what."""
    return _Number(f"a number {of}".strip())


def a_string(of: str = "") -> Shape:
    """A string (``str``): ``of`` says of what ("a string naming the cause")."""
    return _String(f"a string {of}".strip())


def a_tuple(*names: str) -> Shape:
    """A tuple of ``len(names)`` items, said by their names: ``a pair (result, attempt)``."""
    word = {2: "a pair", 3: "a triple"}.get(len(names), f"a tuple of {len(names)}")
    return _Tuple(f"{word} ({', '.join(names)})", len(names))


def a_dict(keys: Iterable[str], values: Iterable[str]) -> Shape:
    """A dict of exactly ``keys``, each value one of the words ``values``."""
    keys, values = tuple(keys), tuple(values)
    like = "{" + ", ".join(f"{k!r}: ..." for k in keys) + "}"
    return _Dict(f"a dict like {like}, each value one of {', '.join(map(repr, values))}", keys, values)


#: The shape of a yes-or-no answer: ``True`` or ``False`` (a numpy bool too).
TRUE_OR_FALSE: Shape = _Bool("True or False")


@dataclass(frozen=True)
class Exercise:
    """One task: its ``id`` (``"N.k"``: exercise k of notebook N), a one-line
    ``title``, the ``judge`` (answer -> (right, message, hint)), a typical
    ``mistake`` (an answer that is wrong the way a learner's often is) and the
    ``shape`` an answer must have before the judge sees it."""

    id: str
    title: str
    judge: Judge = field(repr=False)
    shape: Shape = field(repr=False)
    mistake: Any = field(repr=False, default=None)

    @property
    def notebook(self) -> int:
        """The number of the notebook the exercise belongs to (``N`` of ``"N.k"``)."""
        return int(self.id.split(".")[0])


#: Every registered exercise by its id (``"2.1"``), filled on first use of :func:`check`
#: or :func:`exercises`.
EXERCISES: dict[str, Exercise] = {}


def exercise(id: str, title: str, mistake: Any, shape: Shape) -> Callable[[Judge], Judge]:
    """Register the decorated judge as exercise ``id``, whose answers have ``shape``."""

    def register(judge: Judge) -> Judge:
        if id in EXERCISES:
            raise ValueError(f"exercise {id} is registered twice")
        EXERCISES[id] = Exercise(id, title, judge, shape, mistake)
        return judge

    return register


def exercises(notebook: int | None = None) -> list[Exercise]:
    """The registered exercises, of one notebook (its number) or all, in order."""
    _load()
    found = [e for e in EXERCISES.values() if notebook is None or e.notebook == int(notebook)]
    return sorted(found, key=lambda e: tuple(int(part) for part in e.id.split(".")))


def _unanswered(answer: Any) -> bool:
    return answer is None or answer is Ellipsis


SHAPE_HINT = "Start from the exercise's own cell: it has that shape, with `...` where your answer goes."
WHOLE_HINT = (
    "Your function returns a whole record or table: return the one number the task names from it "
    "(an entry, `result['name']`, or a column's value)."
)


def _is_whole(result: Any) -> bool:
    """A record or a table of results where one number of it was asked for."""
    import pandas as pd

    return isinstance(result, (dict, pd.Series, pd.DataFrame)) or hasattr(result, "__dataclass_fields__")


def check(id: str, answer: Any) -> Verdict:
    """Mark ``answer`` to exercise ``id``. An answer of the wrong shape is told
    the shape expected; code of the learner's that raises is reported as a wrong
    answer with the error, never as a traceback."""
    _load()
    if id not in EXERCISES:
        raise KeyError(f"no exercise {id!r}; the exercises: {', '.join(sorted(EXERCISES))}")
    if _unanswered(answer):
        return Verdict(id, False, "Replace the `...` with your answer and run the cell again.", answered=False)
    task = EXERCISES[id]
    off = task.shape.misfit(answer)
    if off is not None:
        return Verdict(id, False, f"Expected {task.shape}; got {off}.", SHAPE_HINT)
    try:
        right, message, hint = task.judge(task.shape.accept(answer))
    except NotAnswered as exc:
        return Verdict(id, False, str(exc), answered=False)
    except WrongShape as exc:
        return Verdict(id, False, f"Expected {task.shape}; {exc}.", exc.hint or SHAPE_HINT)
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
        raise WrongShape(f"got {_kind(fn)}")
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
    """``answer`` as a float, or :class:`WrongShape` saying what was given."""
    off = _Number("a number").misfit(answer)
    if off is not None:
        raise WrongShape(f"got {off} where a number is wanted")
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


_LOADED = False


def _load() -> None:
    """Register every design's exercises (once, on first use)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from fanoutsim.exercises import designs, leases, outbox, reactor, systems  # noqa: F401
