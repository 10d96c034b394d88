"""Checks of one value of a scenario file, each saying what is allowed.

A validator is called with a TOML value and returns the value to keep (a float
for a number of seconds, a :class:`~fanoutsim.kernel.dist.Dist` for a
duration, ...) or raises :class:`Invalid` with a message such as ``must be a
finite number of seconds > 0, got -1``; the scenario reader puts the file and
the key path in front of it. Each validator also says what it allows in a few
words (``allowed``: the "is required" messages and the docs use it) and as a
JSON Schema fragment (:meth:`Validator.json_schema`), so a scenario schema
declared with them (:mod:`fanoutsim.kernel.scenario`) gives the checks, the
docs and an editor's schema from one place.

===================  ==================================================  ================
validator            allows                                              keeps
===================  ==================================================  ================
:class:`Name`        a non-empty string                                  the string
:class:`Text`        any string                                          the string
:class:`Seconds`     a finite number of seconds (``>= 0`` by default;    a float
                     a duration is 0 or at least 1 µs, the clock's unit)
:class:`SecondsRange`  seconds from ``low`` through ``high``             a float
:class:`Rate`        a finite number of things per virtual second > 0    a float
:class:`Fraction`    a number in [0, 1]                                  a float
:class:`IntAtLeast`  an integer >= ``low``                               the int
:class:`IntRange`    an integer from ``low`` through ``high``            the int
:class:`Seed`        any integer                                         the int
:class:`OneOf`       one of a few values                                 the value
:class:`Distribution`  seconds >= 0 or a law of :mod:`fanoutsim.kernel.dist`  a Dist
:class:`Position`    ``"beginning"``, ``"end"`` or a seq >= 0            the value
:class:`OrWord`      what another validator allows, or one word          the value, or a stand-in
:class:`Store`       ``"memory"``, ``"duckdb"``, a .duckdb path,        the string
                     ``"postgres"`` or a ``postgresql://`` URI
:class:`Timestamp`   an RFC 3339 timestamp with a timezone               the value
===================  ==================================================  ================
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fanoutsim.kernel.dist import _LAWS, EMPIRICAL_MAX_SAMPLES, Dist, parse_dist
from fanoutsim.kernel.timeutil import parse_start

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# a JSON Schema (draft 7) document, as json.dumps takes it
JsonSchema = dict[str, Any]

__all__ = [
    "Invalid",
    "Validator",
    "kind",
    "show",
    "is_number",
    "is_real",
    "is_whole",
    "plain",
    "plain_fields",
    "CLOCK_UNIT",
    "below_unit",
    "duration",
    "Name",
    "Text",
    "Seconds",
    "SecondsRange",
    "Rate",
    "Fraction",
    "IntAtLeast",
    "IntRange",
    "Seed",
    "OneOf",
    "Distribution",
    "Position",
    "OrWord",
    "Store",
    "Timestamp",
    "DIST_SCHEMA",
    "DURATION_REF",
]


class Invalid(ValueError):
    """A value a validator refuses. ``message`` says what is allowed and what
    was given; ``key`` is a path below the checked key (``"dist"`` for a
    duration's law, ``"mean"`` for its parameter), or ``""``."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.key = key


def kind(value: Any) -> str:
    """The TOML name of a value's type, with the value: ``integer 3``, ``a table``."""
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, datetime):
        return f"datetime {value.isoformat()}"
    return type(value).__name__


def show(value: Any) -> str:
    """A value as an error message quotes it: ``'x'``, ``3``, ``boolean true``, ``a table``."""
    return kind(value) if isinstance(value, (dict, list, bool, datetime)) else repr(value)


def is_real(value: Any) -> bool:
    """A real number — Python's int or float, or NumPy's (any ``numbers.Real``) —
    and not a bool (Python's or NumPy's, which is no ``numbers.Real``)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_whole(value: Any) -> bool:
    """An integer — Python's or NumPy's (any ``numbers.Integral``) — and not a bool."""
    if type(value) is int:  # the common case, without the ABC's subclass check (a row limit per fetch)
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite real number (see :func:`is_real`)."""
    return is_real(value) and math.isfinite(value)


def plain_fields(obj: DataclassInstance) -> None:
    """Every field of the (frozen) dataclass ``obj`` as :func:`plain` keeps it:
    a config given NumPy numbers holds Python's, as report.json needs."""
    import dataclasses

    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        kept = plain(value)
        if kept is not value:
            object.__setattr__(obj, f.name, kept)


def plain(value: Any) -> Any:
    """A number as Python's own (``np.int64(3)`` -> ``3``, ``np.float32(.5)`` ->
    ``0.5``), so that what keeps it (a config, a row) prints and serialises as
    with a Python number; anything else as it is."""
    if type(value) in (int, float) or not is_real(value):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


class Validator:
    """The check of one value: ``validator(value)`` returns the value to keep or
    raises :class:`Invalid`. ``allowed`` says what is allowed in a few words."""

    if TYPE_CHECKING:  # a subclass says it as a class attribute or as a property of its fields

        @property
        def allowed(self) -> str: ...
    else:
        allowed = "a value"

    def __call__(self, value: Any) -> Any:
        return self.check(value)

    def check(self, value: Any) -> Any:  # overridden
        return value

    def refuse(self, value: Any, note: str = "") -> Invalid:
        """The error for ``value``: ``must be <allowed>, got <value>``."""
        return Invalid(f"must be {self.allowed}, got {show(value)}{note}")

    def json_schema(self) -> JsonSchema:
        """What the validator allows, as JSON Schema (draft 7)."""
        return {}


@dataclass(frozen=True)
class Name(Validator):
    """A non-empty string: a name of a consumer, workflow, reactor, tenant, ..."""

    allowed = "a non-empty string"

    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.refuse(value)
        return value

    def json_schema(self) -> JsonSchema:
        return {"type": "string", "pattern": r"\S"}


@dataclass(frozen=True)
class Text(Validator):
    """Any string (a description)."""

    allowed = "a string"

    def check(self, value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid(f"must be a string, got {kind(value)}")
        return value

    def json_schema(self) -> JsonSchema:
        return {"type": "string"}


CLOCK_UNIT = 1e-6  # seconds: both clocks count whole microseconds
UNIT_NOTE = "(1 µs, the clock's unit)"


def below_unit(value: float) -> bool:
    """A duration the clocks cannot tell from 0 but is not 0 (0 < value < 1 µs):
    as an interval it would never move the clock."""
    return 0 < value < CLOCK_UNIT


@dataclass(frozen=True)
class Seconds(Validator):
    """A finite number of ``unit`` at or above ``low`` (above it if ``strict``;
    no bound if ``low`` is None); kept as a float. A duration (``low`` 0, a
    unit of seconds) is 0 or at least the clock's unit, 1 µs (``strict``: at
    least 1 µs): below it an interval would never move the clock."""

    low: float | None = 0.0
    strict: bool = False
    unit: str = "seconds"

    @property
    def _floored(self) -> bool:
        return self.low == 0 and "second" in self.unit

    @property
    def allowed(self) -> str:
        if self._floored and self.strict:
            return f"a finite number of {self.unit} >= {CLOCK_UNIT:g} {UNIT_NOTE}"
        bound = "" if self.low is None else f" {'>' if self.strict else '>='} {self.low:g}"
        return f"a finite number of {self.unit}{bound}"

    def check(self, value: Any) -> float:
        if not is_number(value) or (self.low is not None and (value < self.low or (self.strict and value == self.low))):
            raise self.refuse(value)
        if self._floored and below_unit(value):
            if self.strict:
                raise self.refuse(value)
            raise Invalid(f"must be 0 or at least {CLOCK_UNIT:g} {self.unit} {UNIT_NOTE}, got {show(value)}")
        return float(value)

    def json_schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "number"}
        if self._floored:
            if self.strict:
                return {**out, "minimum": CLOCK_UNIT}
            return {**out, "minimum": 0, "not": {"exclusiveMinimum": 0, "exclusiveMaximum": CLOCK_UNIT}}
        if self.low is not None:
            out["exclusiveMinimum" if self.strict else "minimum"] = self.low
        return out


def duration(value: object, where: str, *, positive: bool = False) -> float:
    """A config's duration in seconds, checked as a scenario file's is
    (:class:`Seconds`: 0 or at least 1 µs; ``positive``: at least 1 µs);
    ValueError names ``where``."""
    try:
        return Seconds(strict=positive).check(value)
    except Invalid as exc:
        raise ValueError(f"{where} {exc.message}") from None


_Bound = TypeVar("_Bound", int, float)


@dataclass(frozen=True)
class _Range(Validator, Generic[_Bound]):
    """A value from ``low`` through ``high``; ``note`` (say, "the seed's
    range") is added in brackets to the error."""

    low: _Bound
    high: _Bound
    note: str = ""

    def refuse_outside(self, value: Any, of_kind: Callable[[Any], bool]) -> None:
        """Refuse ``value`` unless ``of_kind(value)`` and it lies in the range."""
        if not of_kind(value) or not self.low <= value <= self.high:
            raise self.refuse(value, f" ({self.note})" if self.note else "")

    def range_schema(self, json_type: str) -> JsonSchema:
        return {"type": json_type, "minimum": self.low, "maximum": self.high}


@dataclass(frozen=True)
class SecondsRange(_Range[float]):
    """A number of seconds from ``low`` through ``high``; ``note`` (say, "the
    seed's range") is added in brackets to the error."""

    @property
    def allowed(self) -> str:
        return f"{self.low:g} through {self.high:g} seconds"

    def check(self, value: Any) -> float:
        self.refuse_outside(value, is_number)
        if self.low == 0 and below_unit(value):  # a duration: 0, or at least the clock's unit
            raise Invalid(f"must be 0 or at least {CLOCK_UNIT:g} seconds {UNIT_NOTE}, got {show(value)}")
        return float(value)

    def json_schema(self) -> JsonSchema:
        out = self.range_schema("number")
        if self.low == 0:
            out["not"] = {"exclusiveMinimum": 0, "exclusiveMaximum": CLOCK_UNIT}
        return out


@dataclass(frozen=True)
class Rate(Validator):
    """A rate: a finite number of ``per`` (firings, commits, events) per virtual second, > 0."""

    per: str

    @property
    def allowed(self) -> str:
        return f"a finite number of {self.per} per virtual second > 0"

    @property
    def required(self) -> str:
        return f"{self.per} per virtual second (a number > 0)"

    def check(self, value: Any) -> float:
        if not is_number(value) or value <= 0:
            raise self.refuse(value)
        return float(value)

    def json_schema(self) -> JsonSchema:
        return {"type": "number", "exclusiveMinimum": 0}


@dataclass(frozen=True)
class Fraction(Validator):
    """A number in [0, 1] (a probability, a share); ``what`` says what it is."""

    what: str = ""

    @property
    def allowed(self) -> str:
        return f"a number in [0, 1] ({self.what})" if self.what else "a number in [0, 1]"

    def check(self, value: Any) -> float:
        if not is_number(value) or not 0 <= value <= 1:
            raise self.refuse(value)
        return float(value)

    def json_schema(self) -> JsonSchema:
        return {"type": "number", "minimum": 0, "maximum": 1}


@dataclass(frozen=True)
class IntAtLeast(Validator):
    """An integer >= ``low``; ``what`` says what it counts."""

    low: int
    what: str = ""

    @property
    def allowed(self) -> str:
        return f"an integer >= {self.low}" + (f" ({self.what})" if self.what else "")

    def check(self, value: Any) -> int:
        if not is_whole(value) or value < self.low:
            raise self.refuse(value)
        return int(value)

    def json_schema(self) -> JsonSchema:
        return {"type": "integer", "minimum": self.low}


@dataclass(frozen=True)
class IntRange(_Range[int]):
    """An integer from ``low`` through ``high``; ``note`` is added in brackets to the error."""

    @property
    def allowed(self) -> str:
        return f"an integer from {self.low} through {self.high}"

    def check(self, value: Any) -> int:
        self.refuse_outside(value, is_whole)
        return int(value)

    def json_schema(self) -> JsonSchema:
        return self.range_schema("integer")


@dataclass(frozen=True)
class Seed(Validator):
    """Any integer: a run's seed."""

    allowed = "an integer seed"

    def check(self, value: Any) -> int:
        if not is_whole(value):
            raise self.refuse(value)
        return int(value)

    def json_schema(self) -> JsonSchema:
        return {"type": "integer"}


@dataclass(frozen=True)
class OneOf(Validator):
    """One of ``choices`` (strings, usually)."""

    choices: tuple[Any, ...]

    @property
    def allowed(self) -> str:
        return f"one of {', '.join(map(repr, self.choices))}"

    def check(self, value: Any) -> Any:
        if not any(type(c) is type(value) and c == value for c in self.choices):
            raise Invalid(f"must be {self.allowed}; got {show(value)}")
        return value

    def json_schema(self) -> JsonSchema:
        return {"enum": list(self.choices)}


DURATION_FORMS = (
    'seconds >= 0, or a table such as {dist = "exponential", mean = 0.2} or '
    '{dist = "uniform", low = 0.05, high = 0.15} (laws: fixed, exponential, uniform, lognormal, '
    "empirical with samples = [...])"
)


def _param_schema(law: str) -> JsonSchema:
    if law == "empirical":  # measured values, inline
        return {
            "type": "array",
            "items": {"type": "number", "minimum": 0},
            "minItems": 1,
            "maxItems": EMPIRICAL_MAX_SAMPLES,
        }
    return {"type": "number", "minimum": 0}


DIST_SCHEMA: JsonSchema = {
    "anyOf": [
        {"type": "number", "minimum": 0, "description": "a fixed number of seconds"},
        *(
            {
                "type": "object",
                "description": f"{law}: {', '.join(params)}",
                "properties": {"dist": {"const": law}, **{p: _param_schema(law) for p in params}},
                "required": ["dist", *params],
                "additionalProperties": False,
            }
            for law, params in _LAWS.items()
        ),
    ],
}
"""A duration in the notation of :mod:`fanoutsim.kernel.dist`, as JSON Schema: a
scenario's JSON Schema holds it once, as ``definitions.duration``."""

DURATION_REF: JsonSchema = {"allOf": [{"$ref": "#/definitions/duration"}]}
"""A duration in a scenario's JSON Schema (a reference to its ``definitions``; the
``allOf`` keeps a key's description and default beside it)."""


@dataclass(frozen=True)
class Distribution(Validator):
    """A duration: seconds >= 0, or a table naming a law of :mod:`fanoutsim.kernel.dist`;
    kept as a :class:`~fanoutsim.kernel.dist.Dist`."""

    allowed = DURATION_FORMS

    def check(self, value: Any) -> Dist:
        try:
            return parse_dist(value, where="@")
        except ValueError as exc:
            key, message = _split_where(str(exc))
            if not isinstance(value, dict):  # the wrong kind of value: say which kinds are right
                message += f"; allowed: {DURATION_FORMS}"
            raise Invalid(message, key) from None

    def json_schema(self) -> JsonSchema:
        return dict(DURATION_REF)


def _split_where(message: str) -> tuple[str, str]:
    """parse_dist's ``"@.dist must be ..."`` / ``"@: ..."`` -> (the key below, the rest)."""
    if not message.startswith("@"):
        return "", message
    rest = message[1:]
    if rest.startswith("."):
        key, _, rest = rest[1:].partition(" ")
        return key.rstrip(":"), rest.strip()
    return "", rest.lstrip(":").strip()


@dataclass(frozen=True)
class Position(Validator):
    """A position in a log: ``"beginning"``, ``"end"`` or a seq (an integer >= 0)."""

    allowed = '"beginning", "end" or a seq (an integer >= 0)'

    def check(self, value: Any) -> str | int:
        if value in ("beginning", "end") and isinstance(value, str):
            return value
        if not is_whole(value) or value < 0:
            raise self.refuse(value)
        return int(value)

    def json_schema(self) -> JsonSchema:
        return {"anyOf": [{"enum": ["beginning", "end"]}, {"type": "integer", "minimum": 0}]}


@dataclass(frozen=True)
class OrWord(Validator):
    """What ``inner`` allows, or the string ``word`` (``meaning`` says what it
    means), which is kept as ``stands_for``: ``timeout = "none"`` -> None."""

    inner: Validator
    word: str
    meaning: str
    stands_for: Any = None

    @property
    def allowed(self) -> str:
        return f'{self.inner.allowed}, or "{self.word}" ({self.meaning})'

    def check(self, value: Any) -> Any:
        if value == self.word and isinstance(value, str):
            return self.stands_for
        try:
            return self.inner(value)
        except Invalid:
            raise self.refuse(value) from None

    def json_schema(self) -> JsonSchema:
        return {"anyOf": [self.inner.json_schema(), {"const": self.word}]}


_PG_SCHEMES = ("postgresql://", "postgres://")


def is_duckdb_path(value: object) -> bool:
    """A DuckDB file's path, as every command and ``open_store`` take one: a
    name ending in ``.duckdb`` (the one rule, so that no command accepts a file
    another refuses)."""
    return isinstance(value, str) and value.endswith(".duckdb") and len(value) > len(".duckdb")


@dataclass(frozen=True)
class Store(Validator):
    """Where a run keeps its tables: ``"memory"``, ``"duckdb"`` (a temporary
    file), the path of a new ``.duckdb`` file, ``"postgres"`` (a throwaway
    PostgreSQL server of the run's own) or a ``postgresql://`` URI (a server of
    yours; the URI is checked when the store opens)."""

    allowed = '"memory", "duckdb", a path ending in .duckdb, "postgres" or a postgresql:// URI'

    def check(self, value: Any) -> str:
        if isinstance(value, str) and (
            value in ("memory", "duckdb", "postgres")
            or is_duckdb_path(value)
            or (value.startswith(_PG_SCHEMES) and not value.endswith("://"))
        ):
            return value
        raise Invalid(f"must be {self.allowed}, got {show(value)}")

    def json_schema(self) -> JsonSchema:
        return {
            "type": "string",
            "anyOf": [
                {"enum": ["memory", "duckdb", "postgres"]},
                {"pattern": r".\.duckdb$"},
                {"pattern": "^postgres(ql)?://."},
            ],
        }


@dataclass(frozen=True)
class Timestamp(Validator):
    """An RFC 3339 timestamp with a timezone (a string or a TOML datetime)."""

    allowed = "an RFC 3339 timestamp such as 2026-01-01T00:00:00Z"

    def check(self, value: Any) -> str | datetime:
        if not isinstance(value, (str, datetime)):
            raise self.refuse(value)
        try:
            parse_start(value)
        except (ValueError, TypeError) as exc:
            raise Invalid(f"{exc} (an RFC 3339 timestamp with a timezone, such as 2026-01-01T00:00:00Z)") from None
        return value

    def json_schema(self) -> JsonSchema:
        return {"type": "string", "format": "date-time"}
