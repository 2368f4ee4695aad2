"""Date and time functions: DATE, TIME, YEAR, MONTH, DAY/DAYOFMONTH, HOUR, MINUTE, SECOND,
DAYOFWEEK, DAYOFYEAR, WEEKDAY, QUARTER, WEEK/WEEKOFYEAR/YEARWEEK, DAYNAME, EXTRACT,
TIME_TO_SEC, SEC_TO_TIME, FROM_DAYS, TIMESTAMP(x), DATE_ADD/
DATE_SUB/ADDDATE/SUBDATE/TIMESTAMPADD and ``x +/- INTERVAL n unit``, DATEDIFF,
TIMESTAMPDIFF, DATE_FORMAT/MONTHNAME, LAST_DAY, MAKEDATE, STR_TO_DATE.

MySQL's rules: arguments are read as dates the way MySQL reads them
(``sqltext.temporal``: an invalid date is NULL); adding months or years clamps the day
to the end of the month (``2024-01-31 + INTERVAL 1 MONTH`` is ``2024-02-29``); a result
outside years 1-9999 is NULL; ``DATE_ADD`` of a DATE by days, weeks, months, quarters or
years is a DATE, by a time unit a DATETIME, and of a string a string (a datetime
result then shows six fractional digits, as MariaDB's string result does); WEEK's default
mode is 0 (``default_week_format``); TIMESTAMPDIFF counts whole units (a month only
when the day and time of day are reached). Functions of the current time (NOW,
CURDATE, UNIX_TIMESTAMP(), ...) and those of the session time zone (UNIX_TIMESTAMP(x),
FROM_UNIXTIME) are not here: they are refused at the proxy.
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.time import format_time

from rewriter.dialect import DIALECT
from rewriter.functions.signature import (
    DATE,
    INT,
    STRING,
    Compile,
    CompileKind,
    Fn,
    Function,
    KindFn,
    KindOf,
    constant,
    fixed,
    refuse,
    strict,
)
from rewriter.functions.values import as_int, as_number, to_text
from rewriter.nodes import ValueKind
from sqltext import temporal as tv

_DATE_UNITS = frozenset({"DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "YEAR_MONTH"})
_MONTH_UNITS = frozenset({"MONTH", "QUARTER", "YEAR", "YEAR_MONTH"})
# composite units: the parts, in microseconds (months for YEAR_MONTH)
_COMPOSITE = {
    "YEAR_MONTH": (12, 1),
    "DAY_HOUR": (86400_000000, 3600_000000),
    "DAY_MINUTE": (86400_000000, 3600_000000, 60_000000),
    "DAY_SECOND": (86400_000000, 3600_000000, 60_000000, 1_000000),
    "HOUR_MINUTE": (3600_000000, 60_000000),
    "HOUR_SECOND": (3600_000000, 60_000000, 1_000000),
    "MINUTE_SECOND": (60_000000, 1_000000),
}
_SIMPLE = {
    "MICROSECOND": 1, "SECOND": 1_000000, "MINUTE": 60_000000, "HOUR": 3600_000000, "DAY": 86400_000000,
    "WEEK": 7 * 86400_000000, "MONTH": 1, "QUARTER": 3, "YEAR": 12,
}
_MIN = datetime.datetime(1, 1, 1)
_MAX = datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)
_INTEGER = re.compile(r"[+-]?\d+")


# --- reading the arguments -------------------------------------------------------------

def _date_of(v: Any) -> datetime.date | None:
    return tv.to_date(v)


def _date_part(impl: Callable[[datetime.date], int]) -> Callable[[exp.Expression, Compile], Fn]:
    def compile_(e: exp.Expression, c: Compile) -> Fn:
        def run(v: Any) -> int | None:
            d = _date_of(v)
            return None if d is None else impl(d)

        return strict([c(e.this)], run)

    return compile_


def _time_part(impl: Callable[[datetime.timedelta], int]) -> Callable[[exp.Expression, Compile], Fn]:
    def compile_(e: exp.Expression, c: Compile) -> Fn:
        def run(v: Any) -> int | None:
            t = tv.to_time(v)
            return None if t is None else impl(abs(t))

        return strict([c(e.this)], run)

    return compile_


def _seconds(t: datetime.timedelta) -> int:
    return t.days * 86400 + t.seconds


# --- weeks, as MySQL's calc_week --------------------------------------------------------

_MONDAY_FIRST, _WEEK_YEAR, _FIRST_WEEKDAY = 1, 2, 4


def week_behaviour(mode: int) -> int:
    fmt = mode & 7
    if not fmt & _MONDAY_FIRST:
        fmt ^= _FIRST_WEEKDAY
    return fmt


def calc_week(d: datetime.date, behaviour: int) -> tuple[int, int]:
    """MySQL's ``calc_week``: (week, year)."""
    def days_in_year(y: int) -> int:
        return 366 if calendar.isleap(y) else 365

    daynr = d.toordinal()
    first_daynr = datetime.date(d.year, 1, 1).toordinal()
    monday_first = bool(behaviour & _MONDAY_FIRST)
    week_year = bool(behaviour & _WEEK_YEAR)
    first_weekday = bool(behaviour & _FIRST_WEEKDAY)
    weekday = (first_daynr + 365 + 5 + (0 if monday_first else 1)) % 7
    year = d.year
    if d.month == 1 and d.day <= 7 - weekday:
        if not week_year and ((first_weekday and weekday != 0) or (not first_weekday and weekday >= 4)):
            return 0, year
        week_year = True
        year -= 1
        days = days_in_year(year)
        first_daynr -= days
        weekday = (weekday + 53 * 7 - days) % 7
    if (first_weekday and weekday != 0) or (not first_weekday and weekday >= 4):
        days = daynr - (first_daynr + (7 - weekday))
    else:
        days = daynr - (first_daynr - weekday)
    if week_year and days >= 52 * 7:
        weekday = (weekday + days_in_year(year)) % 7
        if (not first_weekday and weekday < 4) or (first_weekday and weekday == 0):
            return 1, year + 1
    return days // 7 + 1, year


def _week(e: exp.Expression, c: Compile) -> Fn:
    m = e.args.get("mode") if isinstance(e, exp.Week) else exp.Literal.number(3)
    mode = constant(e, m, "the week mode") if m is not None else (lambda bv: 0)  # default_week_format
    f = c(e.this)

    def week(row: list[Any], bv: Mapping[str, Any]) -> Any:
        d = _date_of(f(row, bv))
        return None if d is None else calc_week(d, week_behaviour(as_int(mode(bv)) or 0))[0]

    return week


# --- DATE(), TIME(), the wrappers sqlglot adds -------------------------------------------

def _date(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], tv.to_date)


def _datetime_arg(e: exp.Expression, c: Compile) -> Fn:
    """sqlglot's wrapper of DATE_FORMAT's argument: the value as a date or datetime."""
    return strict([c(e.this)], tv.to_datetime_or_date)


def _time(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], tv.to_time)


def _time_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    fsp = _temporal_fsp(e.this, k)
    return lambda kind_of, bv: ("time", fsp(kind_of, bv))


# --- EXTRACT -----------------------------------------------------------------------------

def _extract_impl(unit: str) -> Callable[[Any], int | None]:
    time_only = unit in ("HOUR", "MINUTE", "SECOND", "MICROSECOND", "HOUR_MINUTE", "HOUR_SECOND", "MINUTE_SECOND")

    def run(v: Any) -> int | None:
        if time_only:
            t = tv.to_time(v)
            if t is None:
                return None
            sign = -1 if t < datetime.timedelta(0) else 1
            t = abs(t)
            s = _seconds(t)
            h, mi, se = s // 3600, s // 60 % 60, s % 60
            value = {"HOUR": h, "MINUTE": mi, "SECOND": se, "MICROSECOND": t.microseconds,
                     "HOUR_MINUTE": h * 100 + mi, "HOUR_SECOND": h * 10000 + mi * 100 + se,
                     "MINUTE_SECOND": mi * 100 + se}[unit]
            return sign * value
        d = tv.to_datetime(v)
        if d is None:
            return None
        day_time = d.day * 1000000 + d.hour * 10000 + d.minute * 100 + d.second
        return {
            "YEAR": d.year, "QUARTER": (d.month - 1) // 3 + 1, "MONTH": d.month, "DAY": d.day,
            "WEEK": calc_week(d.date(), week_behaviour(0))[0], "YEAR_MONTH": d.year * 100 + d.month,
            "DAY_HOUR": d.day * 100 + d.hour, "DAY_MINUTE": day_time // 100, "DAY_SECOND": day_time,
        }[unit]

    return run


_EXTRACT_UNITS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MICROSECOND",
                            "YEAR_MONTH", "DAY_HOUR", "DAY_MINUTE", "DAY_SECOND", "HOUR_MINUTE", "HOUR_SECOND",
                            "MINUTE_SECOND"})


def _extract(e: exp.Expression, c: Compile) -> Fn:
    unit = e.this.name.upper()
    if unit not in _EXTRACT_UNITS:
        raise refuse(e)
    return strict([c(e.expression)], _extract_impl(unit))


# --- interval arithmetic -------------------------------------------------------------------

def _unit(e: exp.Expression, node: exp.Expression | None) -> str:
    unit = node.name.upper() if node is not None else "DAY"
    if unit not in _SIMPLE and unit not in _COMPOSITE:
        raise refuse(e)
    return unit


def _amount(e: exp.Expression, value: exp.Expression, unit: str, c: Compile) -> Fn:
    """The interval's size in microseconds (months for month units), from its expression."""
    if isinstance(value, exp.Literal):
        text = value.this
        if unit in _COMPOSITE:
            parts = [int(p) for p in re.findall(r"\d+", text)]
            sizes = _COMPOSITE[unit]
            if not parts or len(parts) > len(sizes):
                raise refuse(e)
            total = sum(p * s for p, s in zip(reversed(parts), reversed(sizes), strict=False))
            total = -total if text.lstrip().startswith("-") else total
            return lambda row, bv: total
        if not _INTEGER.fullmatch(text.strip()):
            raise refuse(e, " (an interval must be an integer)")
        constant = int(text) * _SIMPLE[unit]
        return lambda row, bv: constant
    if unit in _COMPOSITE:
        raise refuse(e)
    f, size = c(value), _SIMPLE[unit]

    def amount(row: list[Any], bv: Mapping[str, Any]) -> Any:
        n = as_int(f(row, bv))
        return None if n is None else n * size

    return amount


def add_interval(d: datetime.date, amount: int, unit: str) -> datetime.date | None:
    """``d + INTERVAL``: months clamp the day to the month's end; ``None`` outside years 1-9999."""
    if unit in _MONTH_UNITS:
        months = d.year * 12 + d.month - 1 + amount
        year, month = divmod(months, 12)
        if not 1 <= year <= 9999:
            return None
        day = min(d.day, calendar.monthrange(year, month + 1)[1])
        return d.replace(year=year, month=month + 1, day=day)
    base = tv.as_datetime(d)
    try:
        out = base + datetime.timedelta(microseconds=amount)
    except OverflowError:
        return None
    if not _MIN <= out <= _MAX:
        return None
    if not isinstance(d, datetime.datetime) and unit in _DATE_UNITS:
        return out.date()
    return out


def _temporal_fsp(arg: exp.Expression, k: CompileKind) -> Callable[[KindOf, Mapping[str, Any]], int]:
    """Fractional digits of ``arg`` read as a date/time: a DATETIME's or TIME's own, a
    string's (``_string_fsp``), none for anything else."""
    arg_kind, string_fsp = k(arg), _string_fsp(arg)

    def fsp(kind_of: KindOf, bv: Mapping[str, Any]) -> int:
        name, scale = arg_kind(kind_of, bv)
        return scale if name in ("datetime", "time") else string_fsp if name == "string" else 0

    return fsp


def _string_fsp(arg: exp.Expression) -> int:
    """Fractional digits a string argument's datetime result shows: a literal's own, else
    six (MariaDB gives a string result the most digits a string may carry)."""
    if isinstance(arg, exp.Literal) and arg.is_string:
        m = re.search(r"\.(\d+)\s*$", arg.this)
        return len(m.group(1)) if m else 0
    return 6


def _interval_fn(e: exp.Expression, c: Compile, date_arg: exp.Expression, value: exp.Expression,
                 unit_node: exp.Expression | None, sign: int) -> Fn:
    unit = _unit(e, unit_node)
    fd, fa = c(date_arg), _amount(e, value, unit, c)
    fsp = _string_fsp(date_arg)

    def run(row: list[Any], bv: Mapping[str, Any]) -> Any:
        v = fd(row, bv)
        if v is None:
            return None
        n = fa(row, bv)
        if n is None:
            return None
        if isinstance(v, datetime.timedelta):  # a TIME moves by time units (and days), not months
            if unit in _MONTH_UNITS:
                return None
            try:
                moved = v + datetime.timedelta(microseconds=sign * n)
            except OverflowError:
                return None
            return moved if abs(moved) <= tv.MAX_TIME else None  # out of TIME's range: NULL
        d = tv.to_datetime_or_date(v)
        if d is None:
            return None
        out = add_interval(d, sign * n, unit)
        if out is None or isinstance(v, datetime.date):
            return out
        if isinstance(out, datetime.datetime):  # a string in, a string out
            return tv.datetime_text(out, max(fsp, 6 if out.microsecond else 0))
        return tv.date_text(out)

    return run


def _interval_kind(date_arg: exp.Expression, unit_node: exp.Expression | None, k: CompileKind,
                   e: exp.Expression) -> KindFn:
    unit = _unit(e, unit_node)
    arg = k(date_arg)

    def kind(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
        name, scale = arg(kind_of, bv)
        micro = 6 if unit == "MICROSECOND" else 0
        if name == "date":
            return DATE if unit in _DATE_UNITS else ("datetime", micro)
        if name == "datetime":
            return ("datetime", max(scale, micro))
        if name == "time":  # by months: MariaDB types it DATETIME (and answers NULL)
            return ("datetime", 0) if unit in _MONTH_UNITS else ("time", max(scale, micro))
        return STRING

    return kind


def _interval_parts(e: exp.Expression) -> tuple[exp.Expression, exp.Expression, exp.Expression | None, int]:
    """(date argument, interval value, unit, sign) of any of the interval forms."""
    if isinstance(e, exp.Add | exp.Sub):
        interval, other = (e.expression, e.this) if isinstance(e.expression, exp.Interval) else (e.this, e.expression)
        if isinstance(other, exp.Interval):
            raise refuse(e)
        return other, interval.this, interval.args.get("unit"), -1 if isinstance(e, exp.Sub) else 1
    if isinstance(e, exp.Anonymous):  # ADDDATE/SUBDATE(d, INTERVAL n unit | days)
        if len(e.expressions) != 2:
            raise refuse(e)
        d, iv = e.expressions
        sign = -1 if str(e.this).upper() == "SUBDATE" else 1
        if isinstance(iv, exp.Interval):
            return d, iv.this, iv.args.get("unit"), sign
        return d, iv, None, sign
    sign = -1 if isinstance(e, exp.DateSub) else 1
    return e.this, e.expression, e.args.get("unit"), sign


def _interval(e: exp.Expression, c: Compile) -> Fn:
    d, value, unit, sign = _interval_parts(e)
    return _interval_fn(e, c, d, value, unit, sign)


def _interval_k(e: exp.Expression, k: CompileKind) -> KindFn:
    d, _, unit, _ = _interval_parts(e)
    return _interval_kind(d, unit, k, e)


INTERVAL_ARITHMETIC = Function(_interval, _interval_k)


# --- differences ---------------------------------------------------------------------------

_YEAR_ZERO = re.compile(r"\s*0{1,4}[^\w\s]+(\d{1,2})[^\w\s]+(\d{1,2})")


def day_number(v: Any) -> int | None:
    """MySQL's day number of a date (TO_DAYS), also for year 0, which MariaDB accepts and
    sqlglot writes TO_DAYS(x) with (``DATEDIFF(x, '0000-01-01') + 1``): 0000-01-01 is day 1."""
    d = _date_of(v)
    if d is not None:
        return d.toordinal() + 365
    m = _YEAR_ZERO.match(v) if isinstance(v, str) else None
    if m is None:
        return None
    month, day = int(m.group(1)), int(m.group(2))
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(2001, month)[1]:
        return None  # MariaDB's year 0 has no February 29
    return 31 * (month - 1) + day - ((month * 4 + 23) // 10 if month > 2 else 0)  # calc_daynr


def _datediff(e: exp.Expression, c: Compile) -> Fn:
    def run(a: Any, b: Any) -> int | None:
        x, y = day_number(a), day_number(b)
        return None if x is None or y is None else x - y

    def arg(x: exp.Expression) -> exp.Expression:  # sqlglot's DATE() around an argument changes nothing here
        return x.this if isinstance(x, exp.TsOrDsToDate) else x

    return strict([c(arg(e.this)), c(arg(e.expression))], run)


def timestampdiff(unit: str, start: datetime.datetime, end: datetime.datetime) -> int:
    if unit in _MONTH_UNITS:
        sign = 1
        if end < start:
            start, end, sign = end, start, -1
        months = (end.year - start.year) * 12 + end.month - start.month
        if (end.day, end.time()) < (start.day, start.time()):
            months -= 1
        return sign * (months // {"MONTH": 1, "QUARTER": 3, "YEAR": 12}[unit])
    delta = end - start
    micro = (delta.days * 86400 + delta.seconds) * 1000000 + delta.microseconds
    size = _SIMPLE[unit]
    q = abs(micro) // size
    return q if micro >= 0 else -q


def _timestampdiff(e: exp.Expression, c: Compile) -> Fn:
    unit = _unit(e, e.args.get("unit"))
    if unit in _COMPOSITE:
        raise refuse(e)

    def run(end: Any, start: Any) -> int | None:
        x, y = tv.to_datetime(start), tv.to_datetime(end)
        return None if x is None or y is None else timestampdiff(unit, x, y)

    return strict([c(e.this), c(e.expression)], run)


# --- DATE_FORMAT -----------------------------------------------------------------------------

_DAY_NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December"]


def _ordinal(n: int) -> str:
    if 10 < n % 100 < 14:
        return f"{n}th"
    return f"{n}" + {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _h12(dt: datetime.datetime) -> int:
    return (dt.hour + 11) % 12 + 1


def _week_spec(behaviour: int, year: bool) -> Callable[[datetime.datetime], str]:
    def spec(dt: datetime.datetime) -> str:
        w, y = calc_week(dt.date(), behaviour)
        return f"{y:04d}" if year else f"{w:02d}"

    return spec


_SPECIFIERS: dict[str, Callable[[datetime.datetime], str]] = {
    "Y": lambda dt: f"{dt.year:04d}", "y": lambda dt: f"{dt.year % 100:02d}", "m": lambda dt: f"{dt.month:02d}",
    "c": lambda dt: str(dt.month), "d": lambda dt: f"{dt.day:02d}", "e": lambda dt: str(dt.day),
    "D": lambda dt: _ordinal(dt.day), "H": lambda dt: f"{dt.hour:02d}", "k": lambda dt: str(dt.hour),
    "h": lambda dt: f"{_h12(dt):02d}", "I": lambda dt: f"{_h12(dt):02d}", "l": lambda dt: str(_h12(dt)),
    "i": lambda dt: f"{dt.minute:02d}", "s": lambda dt: f"{dt.second:02d}", "S": lambda dt: f"{dt.second:02d}",
    "f": lambda dt: f"{dt.microsecond:06d}", "p": lambda dt: "AM" if dt.hour < 12 else "PM",
    "M": lambda dt: _MONTH_NAMES[dt.month - 1], "b": lambda dt: _MONTH_NAMES[dt.month - 1][:3],
    "W": lambda dt: _DAY_NAMES[dt.weekday()], "a": lambda dt: _DAY_NAMES[dt.weekday()][:3],
    "w": lambda dt: str((dt.weekday() + 1) % 7), "j": lambda dt: f"{dt.timetuple().tm_yday:03d}",
    "T": lambda dt: f"{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}",
    "r": lambda dt: f"{_h12(dt):02d}:{dt.minute:02d}:{dt.second:02d} {'AM' if dt.hour < 12 else 'PM'}",
    "U": _week_spec(_FIRST_WEEKDAY, False), "u": _week_spec(_MONDAY_FIRST, False),
    "V": _week_spec(_WEEK_YEAR | _FIRST_WEEKDAY, False), "v": _week_spec(_MONDAY_FIRST | _WEEK_YEAR, False),
    "X": _week_spec(_WEEK_YEAR | _FIRST_WEEKDAY, True), "x": _week_spec(_WEEK_YEAR | _MONDAY_FIRST, True),
}


@lru_cache(maxsize=256)
def _format_parts(fmt: str) -> tuple[str | Callable[[datetime.datetime], str], ...]:
    """A DATE_FORMAT format read once (a format repeats for every row): literal text and
    specifiers; one MySQL does not know stands for its letter."""
    parts: list[str | Callable[[datetime.datetime], str]] = []
    i = 0
    while i < len(fmt):
        if fmt[i] != "%" or i + 1 == len(fmt):
            parts.append(fmt[i])
            i += 1
            continue
        s = fmt[i + 1]
        parts.append(_SPECIFIERS.get(s, s))
        i += 2
    return tuple(parts)


def date_format(d: datetime.date, fmt: str) -> str:
    """MySQL's DATE_FORMAT."""
    dt = tv.as_datetime(d)
    return "".join(p if isinstance(p, str) else p(dt) for p in _format_parts(fmt))


def _mysql_format(e: exp.Expression) -> exp.Expression:
    """The format argument as MySQL's text (sqlglot keeps a literal in its own notation)."""
    fmt = e.args["format"]
    if isinstance(fmt, exp.Literal) and fmt.is_string:
        return exp.Literal.string(format_time(fmt.this, DIALECT.INVERSE_TIME_MAPPING, DIALECT.INVERSE_TIME_TRIE)
                                  or "")
    return fmt


def _date_format(e: exp.Expression, c: Compile) -> Fn:
    def run(v: Any, fmt: Any) -> str | None:
        d = tv.to_datetime_or_date(v)
        return None if d is None else date_format(d, to_text(fmt))

    return strict([c(e.this), c(_mysql_format(e))], run)


def _dayname(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], lambda v: None if (d := _date_of(v)) is None else _DAY_NAMES[d.weekday()])


# --- LAST_DAY, MAKEDATE ------------------------------------------------------------------------

def _last_day(e: exp.Expression, c: Compile) -> Fn:
    def run(v: Any) -> datetime.date | None:
        d = _date_of(v)
        return None if d is None else d.replace(day=calendar.monthrange(d.year, d.month)[1])

    return strict([c(e.this)], run)


def _makedate(e: exp.Expression, c: Compile) -> Fn:
    if len(e.expressions) != 2:
        raise refuse(e)

    def run(y: Any, n: Any) -> datetime.date | None:
        year, day = as_int(y), as_int(n)
        if year is None or day is None or day <= 0 or year < 0:
            return None
        if year < 100:
            year += 2000 if year < 70 else 1900
        try:
            out = datetime.date(year, 1, 1) + datetime.timedelta(days=day - 1)
        except (ValueError, OverflowError):
            return None
        return out if out.year <= 9999 and year >= 1 else None

    return strict([c(x) for x in e.expressions], run)


# --- STR_TO_DATE -------------------------------------------------------------------------------

_DATE_SPECS, _TIME_SPECS = set("YymcdeMb"), set("HkhIliSsfpTr")


def _spec_kinds(fmt: str) -> tuple[set[str], bool]:
    specs = set(re.findall(r"%(.)", fmt.replace("%%", "")))
    unknown = specs - _DATE_SPECS - _TIME_SPECS
    return specs, not unknown


def str_to_date_kind(fmt: str, e: exp.Expression, planning: bool = True) -> ValueKind:
    """STR_TO_DATE's result type, from its format: DATETIME with date and time fields, DATE
    or TIME with only those (six fractional digits with ``%f``). A format with a specifier
    not implemented here is refused when planning; one bound at execution (the normalizer's
    bind variable) gives NULL once the text reaches it, typed by the fields it does have."""
    specs, known = _spec_kinds(fmt)
    has_date, has_time = bool(specs & _DATE_SPECS), bool(specs & _TIME_SPECS)
    if planning and (not known or not (has_date or has_time)):
        raise refuse(e)
    fsp = 6 if "f" in specs else 0
    if has_date:
        return ("datetime", fsp) if has_time else DATE
    return ("time", fsp)


def _str_to_date_format(e: exp.Expression) -> Callable[[Mapping[str, Any]], str]:
    fmt = constant(e, _mysql_format(e), "the format")
    return lambda bv: to_text(fmt(bv))


# STR_TO_DATE's specifiers that read up to two digits into one field.
_TWO_DIGIT_FIELDS = {
    "m": "month", "c": "month", "d": "day", "e": "day", "H": "hour", "k": "hour", "h": "hour", "I": "hour",
    "l": "hour", "i": "minute", "S": "second", "s": "second",
}


def str_to_date(text: str, fmt: str) -> dict[str, int] | None:
    """The fields ``fmt`` reads from ``text`` (MySQL's ``extract_date_time``), ``None`` on a mismatch."""
    f: dict[str, int] = {}
    pos, i = 0, 0
    n = len(text)

    def number(width: int) -> int | None:
        nonlocal pos
        m = re.match(r"\d{1," + str(width) + "}", text[pos:])
        if m is None:
            return None
        pos += m.end()
        return int(m.group(0))

    while i < len(fmt) and pos < n:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        ch = fmt[i]
        if ch == "%" and i + 1 < len(fmt):
            s = fmt[i + 1]
            i += 2
            if s in "Yy":
                start = pos
                v = number(4 if s == "Y" else 2)
                if v is None:
                    return None
                if s == "y" or pos - start <= 2:
                    v += 2000 if v < 70 else 1900
                f["year"] = v
            elif s in _TWO_DIGIT_FIELDS:
                v = number(2)
                if v is None:
                    return None
                f[_TWO_DIGIT_FIELDS[s]] = v
                if s in "hIl":
                    f["h12"] = 1
            elif s == "f":
                m = re.match(r"\d{1,6}", text[pos:])
                if m is None:
                    return None
                pos += m.end()
                f["micro"] = int((m.group(0) + "000000")[:6])
            elif s == "p":
                word = text[pos:pos + 2].upper()
                if word not in ("AM", "PM"):
                    return None
                pos += 2
                f["pm"] = 1 if word == "PM" else 0
            elif s in "Mb":
                names = _MONTH_NAMES if s == "M" else [m[:3] for m in _MONTH_NAMES]
                for k, name in enumerate(names):
                    if text[pos:pos + len(name)].lower() == name.lower():
                        f["month"] = k + 1
                        pos += len(name)
                        break
                else:
                    return None
            elif s in "Tr":
                sub = str_to_date(text[pos:], "%H:%i:%s" if s == "T" else "%I:%i:%s %p")
                return None if sub is None else {**f, **sub}
            elif s == "%":
                if text[pos] != "%":
                    return None
                pos += 1
            else:
                return None
        else:
            i += 1
            if ch.isspace():
                continue
            if text[pos] != ch:
                return None
            pos += 1
    return f  # the text may end before the format does: the fields not read are 0, as in MySQL


def _str_to_date(e: exp.Expression, c: Compile) -> Fn:
    format_of, arg = _str_to_date_format(e), c(e.this)
    if isinstance(e.args["format"], exp.Literal):
        str_to_date_kind(format_of({}), e)  # refused now rather than at execution

    def run(row: list[Any], bv: Mapping[str, Any]) -> Any:
        v = arg(row, bv)
        if v is None:
            return None
        fmt = format_of(bv)
        kind = str_to_date_kind(fmt, e, planning=False)
        f = str_to_date(to_text(v), fmt)  # None at a specifier it does not know, as MariaDB
        if f is None:
            return None
        hour = f.get("hour", 0)
        if "h12" in f or "pm" in f:
            if hour < 1 or hour > 12:
                return None
            hour = hour % 12 + 12 * f.get("pm", 0)
        if hour > 23 or f.get("minute", 0) > 59 or f.get("second", 0) > 59:
            return None
        clock = (hour, f.get("minute", 0), f.get("second", 0), f.get("micro", 0))
        if kind[0] == "time":
            return datetime.timedelta(hours=clock[0], minutes=clock[1], seconds=clock[2], microseconds=clock[3])
        y, mo, d = f.get("year", 0), f.get("month", 0), f.get("day", 0)
        try:
            day = datetime.date(y, mo, d)
        except ValueError:
            # MariaDB keeps a date STR_TO_DATE read with parts in range but no such day
            # (2024-02-30, 2024-02-00): Python has no such date, so its text stands for it
            if not (0 <= y <= 9999 and 0 <= mo <= 12 and 0 <= d <= 31):
                return None
            text = f"{y:04d}-{mo:02d}-{d:02d}"
            if kind[0] == "date":
                return text
            return text + " " + tv.time_text(datetime.timedelta(hours=clock[0], minutes=clock[1], seconds=clock[2],
                                                                microseconds=clock[3]), kind[1])
        return day if kind[0] == "date" else datetime.datetime(day.year, day.month, day.day, *clock)

    return run


def _str_to_date_k(e: exp.Expression, k: CompileKind) -> KindFn:
    format_of = _str_to_date_format(e)
    return lambda kind_of, bv: str_to_date_kind(format_of(bv), e, planning=False)


def _yearweek(e: exp.Expression, c: Compile) -> Fn:
    if not 1 <= len(e.expressions) <= 2:
        raise refuse(e)
    mode = constant(e, e.expressions[1], "the week mode") if len(e.expressions) == 2 else (lambda bv: 0)
    f = c(e.expressions[0])

    def yearweek(row: list[Any], bv: Mapping[str, Any]) -> Any:
        d = _date_of(f(row, bv))
        if d is None:
            return None
        week, year = calc_week(d, week_behaviour(as_int(mode(bv)) or 0) | _WEEK_YEAR)
        return year * 100 + week

    return yearweek


def _one_arg(e: exp.Expression) -> exp.Expression:
    if len(e.expressions) != 1:
        raise refuse(e)
    return e.expressions[0]


def _time_to_sec(e: exp.Expression, c: Compile) -> Fn:
    def run(v: Any) -> int | Decimal | None:
        t = tv.to_time(v)
        if t is None:
            return None
        sign = -1 if t < datetime.timedelta(0) else 1
        t = abs(t)
        whole = _seconds(t)
        return sign * (Decimal(whole) + Decimal(t.microseconds).scaleb(-6)) if t.microseconds else sign * whole

    return strict([c(_one_arg(e))], run)


def _time_to_sec_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    arg_fsp = _temporal_fsp(_one_arg(e), k)

    def kind(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
        fsp = arg_fsp(kind_of, bv)
        return ("decimal", fsp) if fsp else INT

    return kind


def _sec_to_time(e: exp.Expression, c: Compile) -> Fn:
    def run(v: Any) -> datetime.timedelta | None:
        n = as_number(v)
        secs = Decimal(repr(n)) if isinstance(n, float) else Decimal(n)
        if abs(secs) > 3020399:  # 838:59:59: TIME's range
            return -tv.MAX_TIME if secs < 0 else tv.MAX_TIME
        micro = int((secs * 1000000).to_integral_value(rounding=decimal.ROUND_DOWN))
        return datetime.timedelta(microseconds=micro)

    return strict([c(_one_arg(e))], run)


def _sec_to_time_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    arg = k(_one_arg(e))

    def kind(kind_of: KindOf, bv: Mapping[str, Any]) -> ValueKind:
        name, scale = arg(kind_of, bv)
        return ("time", scale if name == "decimal" else 0 if name in ("int", "null") else 6)

    return kind


def _from_days(e: exp.Expression, c: Compile) -> Fn:
    def run(v: Any) -> datetime.date | str | None:
        n = as_int(v)
        if n is None:
            return None
        if not 366 <= n <= 3652424:
            return "0000-00-00"  # MariaDB's zero date (no Python date): its text stands for it
        return datetime.date.fromordinal(n - 365)

    return strict([c(_one_arg(e))], run)


def _timestamp(e: exp.Expression, c: Compile) -> Fn:
    if e.expression is not None:
        raise refuse(e)  # TIMESTAMP(d, t): not here
    return strict([c(e.this)], tv.to_datetime)


def _timestamp_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    fsp = _temporal_fsp(e.this, k)
    return lambda kind_of, bv: ("datetime", fsp(kind_of, bv))


def _weekday(e: exp.Expression, c: Compile) -> Fn:
    if len(e.expressions) != 1:
        raise refuse(e)
    return strict([c(e.expressions[0])], lambda v: None if (d := _date_of(v)) is None else d.weekday())


def _datetime_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    return lambda kind_of, bv: ("datetime", 0)


_INT_KIND = fixed(INT)
FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    exp.TsOrDsToDate: Function(_date, fixed(DATE)),
    exp.TsOrDsToTimestamp: Function(_datetime_arg, _datetime_kind),
    exp.Time: Function(_time, _time_kind),
    exp.Year: Function(_date_part(lambda d: d.year), _INT_KIND),
    exp.Month: Function(_date_part(lambda d: d.month), _INT_KIND),
    exp.Day: Function(_date_part(lambda d: d.day), _INT_KIND),
    exp.DayOfMonth: Function(_date_part(lambda d: d.day), _INT_KIND),
    exp.DayOfWeek: Function(_date_part(lambda d: (d.weekday() + 1) % 7 + 1), _INT_KIND),
    exp.DayOfYear: Function(_date_part(lambda d: d.timetuple().tm_yday), _INT_KIND),
    exp.Quarter: Function(_date_part(lambda d: (d.month - 1) // 3 + 1), _INT_KIND),
    exp.Week: Function(_week, _INT_KIND),
    exp.WeekOfYear: Function(_week, _INT_KIND),
    "WEEKDAY": Function(_weekday, _INT_KIND),
    "YEARWEEK": Function(_yearweek, _INT_KIND),
    "FROM_DAYS": Function(_from_days, fixed(DATE)),
    exp.Timestamp: Function(_timestamp, _timestamp_kind),
    "TIME_TO_SEC": Function(_time_to_sec, _time_to_sec_kind),
    "SEC_TO_TIME": Function(_sec_to_time, _sec_to_time_kind),
    exp.Dayname: Function(_dayname, fixed(STRING)),
    exp.Hour: Function(_time_part(lambda t: _seconds(t) // 3600), _INT_KIND),
    exp.Minute: Function(_time_part(lambda t: _seconds(t) // 60 % 60), _INT_KIND),
    exp.Second: Function(_time_part(lambda t: _seconds(t) % 60), _INT_KIND),
    "MICROSECOND": Function(lambda e, c: _time_part(lambda t: t.microseconds)(e.expressions[0], c), _INT_KIND),
    exp.Extract: Function(_extract, _INT_KIND),
    exp.DateAdd: INTERVAL_ARITHMETIC,
    exp.DateSub: INTERVAL_ARITHMETIC,
    exp.TimestampAdd: INTERVAL_ARITHMETIC,
    "ADDDATE": INTERVAL_ARITHMETIC,
    "SUBDATE": INTERVAL_ARITHMETIC,
    exp.DateDiff: Function(_datediff, _INT_KIND),
    exp.TimestampDiff: Function(_timestampdiff, _INT_KIND),
    exp.TimeToStr: Function(_date_format, fixed(STRING)),
    exp.LastDay: Function(_last_day, fixed(DATE)),
    "MAKEDATE": Function(_makedate, fixed(DATE)),
    exp.StrToDate: Function(_str_to_date, _str_to_date_k),
    exp.StrToTime: Function(_str_to_date, _str_to_date_k),  # sqlglot's name when the format has a time
}
