"""Reading and writing DATE, DATETIME and TIME values as MySQL does.

A string given where a date is expected is read as MariaDB's ``str_to_datetime`` reads it:
``2024-01-31``, ``2024-1-5``, ``24-01-31`` (two-digit years: 00-69 are 20xx), any
punctuation as the delimiter, ``T`` or spaces before the time, ``20240131`` and
``20240131102030`` as digits, trailing text ignored (MySQL warns and keeps the value). A
value that is not a valid date (``2024-02-30``, hour 25) is ``None``: NULL, as MySQL
answers in a SELECT. Zero dates and zero parts (``0000-00-00``, ``2024-00-10``), which
MariaDB keeps under its default sql_mode, have no Python value and are also ``None``.
"""

from __future__ import annotations

import datetime
import re
from decimal import Decimal
from typing import Any

# TIME's largest value; shown with the column's fractional digits (838:59:59, 838:59:59.999999)
MAX_TIME = datetime.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)

_DELIMITED = re.compile(
    r"\s*(\d{1,4})[^\w\s]+(\d{1,2})[^\w\s]+(\d{1,2})"
    r"(?:(?:T|\s+)(\d{1,2})(?:[^\w\s]+(\d{1,2})(?:[^\w\s]+(\d{1,2})(?:\.(\d*))?)?)?)?(.*)", re.S)
_DIGITS = re.compile(r"\s*(\d+)(?:\.(\d*))?(.*)", re.S)
_TIME = re.compile(r"\s*(-)?\s*(?:(\d+)\s+)?(\d+):(\d{1,2})(?::(\d{1,2}))?(?:\.(\d*))?")
_TIME_DIGITS = re.compile(r"\s*(-)?\s*(\d+)(?:\.(\d*))?")


def _year(text: str) -> int:
    y = int(text)
    if len(text) <= 2:
        return y + (2000 if y < 70 else 1900)
    return y


def _micro(frac: str | None) -> int:
    if not frac:
        return 0
    return int((frac + "000000")[:6])


def _build(y: int, mo: int, d: int, hms: tuple[int, int, int, int] | None) -> datetime.date | None:
    try:
        if hms is None:
            return datetime.date(y, mo, d)
        return datetime.datetime(y, mo, d, *hms)
    except ValueError:
        return None


def parse_datetime(text: str) -> datetime.date | None:
    """A string as a DATE (no time part written) or DATETIME, ``None`` if it is not one."""
    m = _DELIMITED.match(text)
    if m is not None:
        y, mo, d = _year(m.group(1)), int(m.group(2)), int(m.group(3))
        if m.group(4) is None:
            return _build(y, mo, d, None)
        hms = (int(m.group(4)), int(m.group(5) or 0), int(m.group(6) or 0), _micro(m.group(7)))
        return _build(y, mo, d, hms)
    m = _DIGITS.match(text)
    if m is None:
        return None
    digits = m.group(1)
    if len(digits) in (6, 12):
        digits = str(_year(digits[:2])) + digits[2:]
    elif len(digits) not in (8, 14):
        return None
    y, mo, d = int(digits[:4]), int(digits[4:6]), int(digits[6:8])
    if len(digits) == 8:
        return _build(y, mo, d, None)
    return _build(y, mo, d, (int(digits[8:10]), int(digits[10:12]), int(digits[12:14]), _micro(m.group(2))))


def _number_text(v: Any) -> str:
    if isinstance(v, float):
        return format(Decimal(repr(v)), "f")
    if isinstance(v, Decimal):
        return format(v, "f")
    return str(v)


def to_date(v: Any) -> datetime.date | None:
    """A value where MySQL wants a DATE (the date part of a DATETIME)."""
    d = to_datetime_or_date(v)
    if isinstance(d, datetime.datetime):
        return d.date()
    return d


def to_datetime_or_date(v: Any) -> datetime.date | None:
    """A value where MySQL wants a date or datetime, keeping whether it has a time part."""
    if v is None or isinstance(v, datetime.timedelta):
        return None  # a TIME reads as today's date: not deterministic, NULL here
    if isinstance(v, datetime.date):
        return v
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str):
        return parse_datetime(v)
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int | Decimal | float):
        if v < 0:
            return None
        return parse_datetime(_number_text(v))
    return None


def to_datetime(v: Any) -> datetime.datetime | None:
    d = to_datetime_or_date(v)
    return None if d is None else as_datetime(d)


def as_datetime(d: datetime.date) -> datetime.datetime:
    if isinstance(d, datetime.datetime):
        return d
    return datetime.datetime(d.year, d.month, d.day)


def _clamp_time(t: datetime.timedelta) -> datetime.timedelta:
    if t > MAX_TIME:
        return MAX_TIME
    if t < -MAX_TIME:
        return -MAX_TIME
    return t


def to_time(v: Any) -> datetime.timedelta | None:
    """A value where MySQL wants a TIME: ``[-][D ]HH:MM[:SS[.f]]``, ``[-]HHMMSS``, or a
    datetime's time of day."""
    if v is None:
        return None
    if isinstance(v, datetime.timedelta):
        return v
    if isinstance(v, datetime.datetime):
        return datetime.timedelta(hours=v.hour, minutes=v.minute, seconds=v.second, microseconds=v.microsecond)
    if isinstance(v, datetime.date):
        return datetime.timedelta(0)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if not isinstance(v, str):
        v = _number_text(v)
    dm = _DELIMITED.match(v)
    if dm is not None and dm.group(4) is not None:
        d = parse_datetime(v)
        return None if d is None else to_time(d)
    m = _TIME.match(v)
    if m is not None:
        hours = int(m.group(3)) + 24 * int(m.group(2) or 0)
        minutes, seconds = int(m.group(4)), int(m.group(5) or 0)
        micro = _micro(m.group(6))
        neg = bool(m.group(1))
    else:
        m = _TIME_DIGITS.match(v)
        if m is None:
            return None
        n = int(m.group(2))
        hours, minutes, seconds = n // 10000, n // 100 % 100, n % 100
        micro = _micro(m.group(3))
        neg = bool(m.group(1))
    if minutes > 59 or seconds > 59:
        return None
    if hours >= 4294967295:  # the hours do not fit MariaDB's 32-bit field: not a time
        return None
    if hours > 838:  # beyond TIME's range: MariaDB clamps (and a timedelta of any hours would overflow)
        return -MAX_TIME if neg else MAX_TIME
    t = datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)
    return _clamp_time(-t if neg else t)


def fraction(micro: int, fsp: int) -> str:
    return "." + f"{micro:06d}"[:fsp] if fsp > 0 else ""


def date_text(d: datetime.date) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def datetime_text(d: datetime.datetime, fsp: int | None = None) -> str:
    """``YYYY-MM-DD HH:MM:SS`` with ``fsp`` fractional digits (``None``: six when there are
    microseconds, else none)."""
    if fsp is None:
        fsp = 6 if d.microsecond else 0
    return f"{date_text(d)} {d.hour:02d}:{d.minute:02d}:{d.second:02d}{fraction(d.microsecond, fsp)}"


def time_text(t: datetime.timedelta, fsp: int | None = None) -> str:
    sign = "-" if t < datetime.timedelta(0) else ""
    t = abs(t)
    secs = t.days * 86400 + t.seconds
    if fsp is None:
        fsp = 6 if t.microseconds else 0
    return f"{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}{fraction(t.microseconds, fsp)}"


def temporal_text(v: datetime.date | datetime.timedelta, fsp: int | None = None) -> str:
    if isinstance(v, datetime.datetime):
        return datetime_text(v, fsp)
    if isinstance(v, datetime.date):
        return date_text(v)
    return time_text(v, fsp)
