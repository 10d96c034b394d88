"""Hooks: the named questions a design's engine asks its fault plan.

Besides the kernel's :meth:`NoFaults.point`, a design declares the hooks its
steps call (in its ``faults`` module): each a :class:`Hook` with a name and
what a healthy system answers. An engine calls a hook as a method of its
faults object, ``e.faults.<name>(...)``:

* :class:`NoFaults` (a healthy system, or a hand-written plan that subclasses
  it) answers every declared hook it does not define itself healthily;
* an :class:`~.plan.Injector` (a :class:`~.plan.FaultPlan` bound to a run)
  answers with the kinds of its plan that act at the hook — each a method of
  the kind's named after the hook, asked in turn; the first answer that is
  not None is the answer, else the healthy one. A hook whose kinds combine
  otherwise declares its own ``bind``.

Either resolves a hook once, on its first call, and keeps the function as an
attribute: a hook no fault of the plan acts at is the healthy function itself,
so a healthy run pays one plain call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


class BoundPlan(Protocol):
    """What a hook's ``bind`` is given: a plan bound to a run
    (:class:`~.plan.Injector`; named here, not imported, so that the plan
    may import the hooks)."""

    plan: Any


class Faults(Protocol):
    """What an engine's steps see of its faults object (:class:`NoFaults`, an
    :class:`~.plan.Injector` or a hand-written plan): the named points, and
    each declared hook as an attribute (its signature is the hook's
    ``healthy``; :meth:`Hook.of` gives it typed)."""

    def point(self, name: str, now: int, **where: Any) -> None: ...

    def __getattr__(self, name: str) -> Any: ...


@dataclass(frozen=True)
class Hook(Generic[F]):
    """A named question the engine asks, by its ``name`` (what a kind's method and
    ``faults.<name>`` are called): ``healthy`` is what a healthy system
    answers (and its signature is the hook's). ``bind(injector)``, when given,
    builds the hook of a bound plan (None: the healthy one); by default the
    plan's kinds that act at it are asked in turn. ``required``: a hand-written
    plan of the design must answer it (an optional hook is asked with
    ``getattr``)."""

    name: str
    healthy: F
    bind: Callable[[BoundPlan], F | None] | None = None
    required: bool = True

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name.startswith("_") or self.name in _RESERVED:
            raise ValueError(
                f"a hook's name must be an identifier, not private and none of "
                f"{', '.join(sorted(_RESERVED))}; got {self.name!r}"
            )

    def of(self, faults: Any) -> F:
        """This hook of a faults object (what ``faults.<name>`` is), typed."""
        return cast(F, getattr(faults, self.name))

    def active(self, faults: Any) -> F | None:
        """This hook of ``faults``, or None where it is the healthy function
        itself (no fault acts at it): a step that asks it for every row asks
        this once and, on None, answers as a healthy system does."""
        fn = self.of(faults)
        return None if fn is self.healthy else fn

    def bound(self, run: BoundPlan) -> F:
        """This hook of a bound plan."""
        fn = self.bind(run) if self.bind is not None else _kinds_in_turn(self, run)
        # the kinds' answers in turn take the healthy function's arguments
        return self.healthy if fn is None else cast(F, fn)


# what the kernel's faults objects are made of: no hook may take these names
_RESERVED = frozenset({"point", "acts", "plan", "rng", "note", "elapsed", "trace", "start_us", "passes"})

#: Every declared hook by name (each design's ``faults`` module declares its own).
HOOKS: dict[str, Hook[Any]] = {}


def register_hook(hook: Hook[F]) -> Hook[F]:
    """Declare ``hook``; another hook by the same name is refused."""
    known = HOOKS.setdefault(hook.name, hook)
    if known is not hook:
        raise ValueError(f"a hook named {hook.name!r} is already declared")
    return hook


def _kinds_in_turn(hook: Hook[Any], run: BoundPlan) -> Callable[..., Any] | None:
    """The plan's kinds that act at ``hook``, asked in turn (by their ``order``,
    then as the plan lists them): the first answer that is not None."""
    acting = sorted((f for f in run.plan.faults if f.acts_at(hook.name)), key=lambda f: f.order)
    if not acting:
        return None
    methods = [getattr(f, hook.name) for f in acting]
    healthy = hook.healthy

    def asked(*args: Any, **kwargs: Any) -> Any:
        for method in methods:
            answer = method(run, *args, **kwargs)
            if answer is not None:
                return answer
        return healthy(*args, **kwargs)

    return asked


def resolve(obj: Any, name: str) -> Any:
    """``obj``'s hook ``name``, kept as its attribute for the next call; an
    AttributeError for a name no design declared."""
    hook = HOOKS.get(name)
    if hook is None or name.startswith("_"):
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    fn = obj._bind_hook(hook)
    try:
        obj.__dict__[name] = fn
    except AttributeError:  # an object without a __dict__ resolves every time
        pass
    return fn


class NoFaults:
    """The fault plan of a healthy system: every hook answers as a healthy system would.

    Subclass it to write a plan by hand: define ``point`` or any declared hook;
    the others stay healthy."""

    def point(self, name: str, now: int, **where: Any) -> None:
        """The named point ``name``, passed at ``now`` (µs) by ``where``'s
        ``who`` and ``what``: a healthy process passes it and lives. A plan
        written by hand raises :class:`~.points.Crash` here to kill the process."""

    def acts(self, hook: str) -> bool:
        """Whether this plan may answer ``hook`` otherwise than a healthy system
        (a class below NoFaults defines it)."""
        return any(hook in vars(c) for c in type(self).__mro__[: type(self).__mro__.index(NoFaults)])

    def _bind_hook(self, hook: Hook[Any]) -> Any:
        return hook.healthy

    def __getattr__(self, name: str) -> Any:  # only for names not found: a declared hook, once
        return resolve(self, name)
