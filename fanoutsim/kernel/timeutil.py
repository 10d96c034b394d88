"""Time as the engine sees it: integer microseconds since the Unix epoch, UTC.

The core never touches ``datetime`` on its hot path: every timestamp it reads or
writes is an ``int`` of microseconds, which compares exactly and makes
microsecond-truncation ties (two firings stamped in the same microsecond) a
natural, reproducible event rather than a float rounding accident. The stores
keep timezone-aware UTC timestamps; conversion happens at their edges and when
tables become DataFrames.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache

UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
US = 1_000_000  # microseconds per second
_ONE_US = timedelta(microseconds=1)
# the instants a run's clock may reach: the frames hold times as pandas'
# nanosecond timestamps, 1677-09-21T00:12:43Z through 2262-04-11T23:47:16Z
FIRST_US = -9_223_372_036_854_775
LAST_US = 9_223_372_036_854_775


def to_us(value: datetime) -> int:
    """Microseconds since the epoch of a timezone-aware datetime."""
    if value.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone; use UTC")
    return (value - EPOCH) // _ONE_US


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def seconds_to_us(seconds: float) -> int:
    return round(seconds * US)


def rfc3339(us: int) -> str:
    """RFC 3339 with microseconds and a ``Z``: how ``reactor_fired_at`` is written
    (``from_us(us).strftime("%Y-%m-%dT%H:%M:%S.%fZ")``). The date's text is
    strftime's, cached per day; the time of day is plain arithmetic (a firing a
    second would miss a cache of seconds, and strftime is most of the cost)."""
    seconds, micros = divmod(us, US)
    days, second = divmod(seconds, 86_400)
    hour, second = divmod(second, 3600)
    minute, second = divmod(second, 60)
    return f"{_day(days)}T{hour:02d}:{minute:02d}:{second:02d}.{micros:06d}Z"


@lru_cache(maxsize=1024)
def _day(days: int) -> str:
    return from_us(days * 86_400 * US).strftime("%Y-%m-%d")


@lru_cache(maxsize=4096)
def rfc3339_us(text: str) -> int | None:
    """The inverse of :func:`rfc3339` for text in exactly its shape
    (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) and years 1678-2261 (where pandas'
    nanosecond timestamps reach): epoch microseconds; None for any other text
    (the caller then parses it the general way). Cached: a firing's stamp is
    read once per subscriber."""
    m = _RFC3339.fullmatch(text)
    if m is None or not 1678 <= int(text[:4]) <= 2261:
        return None
    seconds = _second_us(m.group(1))
    return None if seconds is None else seconds + int(m.group(2))


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{6})Z", re.ASCII)


@lru_cache(maxsize=4096)
def _second_us(text: str) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS`` (digits where the pattern has them) as epoch
    microseconds, what ``strptime(text, "%Y-%m-%dT%H:%M:%S")`` reads, built
    from the fields rather than through strptime (a fortieth of its cost)."""
    try:  # a date that does not exist (month 13, February 30) is not this shape either
        return to_us(
            datetime(
                int(text[0:4]),
                int(text[5:7]),
                int(text[8:10]),
                int(text[11:13]),
                int(text[14:16]),
                int(text[17:19]),
                tzinfo=UTC,
            )
        )
    except ValueError:
        return None


def past_the_clock(start_us: int, until: float) -> str:
    """Why a run to ``until`` from ``start_us`` is refused (see :data:`LAST_US`)."""
    return (
        f"until={until:g} runs past the last time a run can hold: it starts at "
        f"{from_us(start_us):%Y-%m-%dT%H:%M:%SZ} and time ends at {from_us(LAST_US):%Y-%m-%dT%H:%M:%SZ} "
        f"(until at most {(LAST_US - start_us) // US} virtual seconds)"
    )


def parse_start(value: str | datetime | None) -> int:
    """The wall time that virtual time 0 stands for, as epoch microseconds."""
    if value is None:
        return to_us(DEFAULT_START)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"start {value!r} is not an ISO 8601 timestamp such as 2026-01-01T00:00:00Z") from None
    if not isinstance(value, datetime):
        raise TypeError(f"start must be a datetime or ISO 8601 string, not {type(value).__name__}")
    us = to_us(value)
    if not FIRST_US <= us <= LAST_US:
        raise ValueError(
            f"start {value.isoformat()} is outside the times a run can hold, "
            f"{from_us(FIRST_US):%Y-%m-%dT%H:%M:%SZ} through {from_us(LAST_US):%Y-%m-%dT%H:%M:%SZ}"
        )
    return us
