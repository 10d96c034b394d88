"""The checks a fault kind's fields are declared with
(:meth:`~fanoutsim.kernel.faults.kinds.Fault.check_fields`): each takes the
value and where it stands (``"<kind>.<field>"``) and returns what the kind
keeps, or raises a ValueError that names the field and what it allows::

    self.check_fields(probability=checks.probability, delay=checks.dist, window=checks.window)

The ``checked_*`` functions are the same checks for values a kind checks by
hand (an item of a list, say)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

from fanoutsim.kernel.dist import parse_dist
from fanoutsim.kernel.validate import is_real, is_whole

Window = tuple[float, float] | None

# a field's check: (value, "<kind>.<field>") -> the value to keep, or a ValueError naming the field
Check = Callable[[Any, str], Any]


def checked_number(
    value: Any,
    where: str,
    *,
    low: float | None = None,
    high: float | None = None,
    strict_low: bool = False,
    integer: bool = False,
) -> float:
    """``value`` if it is a finite number within the bounds; a ValueError naming ``where``."""
    if not is_real(value) or not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    if integer and not is_whole(value):
        raise ValueError(f"{where} must be an integer, got {value!r}")
    if low is not None and (value <= low if strict_low else value < low):
        raise ValueError(f"{where} must be {'>' if strict_low else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{where} must be <= {high}, got {value!r}")
    kept: float = value  # a real number: checked above
    return kept


def checked_window(value: Any, where: str) -> Window:
    """A window ``(start, end)`` in virtual seconds, or None."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{where} must be [start, end] in virtual seconds or omitted, got {value!r}")
    start = checked_number(value[0], f"{where} start", low=0)
    end = checked_number(value[1], f"{where} end", low=0)
    if end <= start:
        raise ValueError(f"{where} must end after it starts, got {list(value)!r}")
    return (float(start), float(end))


def checked_name(value: Any, where: str, optional: bool = False) -> str | None:
    """A non-empty string (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    kept: str = value
    return kept


def checked_flag(value: Any, where: str) -> bool:
    """True or False (not a truthy number or string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return value


def number(**bounds: Any) -> Check:
    """The check of a number within ``bounds`` (:func:`checked_number`'s)."""
    return partial(checked_number, **bounds)


# the vocabulary a kind's check_fields declares with
name: Check = checked_name  # a non-empty string
optional_name: Check = partial(checked_name, optional=True)  # ... or None
flag: Check = checked_flag  # true or false
window: Check = checked_window  # [start, end] in virtual seconds, or None for always
dist: Check = parse_dist  # a duration: a number of seconds or a distribution table
probability = number(low=0, high=1)
