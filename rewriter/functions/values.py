"""MySQL's implicit conversions between the values the evaluator sees.

Values are what the engine decodes from a row for the evaluator (``proxy.engine.result.
evaluator_value``): ``None`` (NULL), ``int``, ``Decimal``, ``float``, ``str`` (text, compared
with ``utf8mb4_general_ci``), ``bytes`` (a binary string), ``datetime.date`` (DATE),
``datetime.datetime`` (DATETIME/TIMESTAMP) and ``datetime.timedelta`` (TIME).

- a string in numeric context is its longest numeric prefix as a DOUBLE (``'12abc'`` is
  12, ``'abc'`` 0); a temporal value is its number (``2024-01-31`` is 20240131);
- a temporal value compared with a string compares as that temporal type when the string
  reads as one (``d = '2024-1-31'`` is true), else as text;
- text compares with ``utf8mb4_general_ci`` (case and accents ignored, trailing spaces
  ignored); a binary string byte by byte.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from decimal import Decimal
from typing import Any

from rewriter.collation import general_ci_key
from sqltext import temporal as tv
from sqltext.quoting import double_text

_NUMERIC_PREFIX = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT_PREFIX = re.compile(r"\s*[+-]?\d+")

TEMPORAL = (datetime.date, datetime.timedelta)  # datetime.datetime is a date


class ShownDecimal(Decimal):
    """An exact result carried with more digits than MySQL shows: a division keeps whole
    9-digit words (``1/3*3`` is 1.0000) but its type has the dividend's scale + 4. ``shown``
    is that scale, used where the value becomes text (CONCAT(i / 7) is '1.0000')."""

    shown: int

    def __new__(cls, value: Decimal, shown: int) -> ShownDecimal:
        d = super().__new__(cls, value)
        d.shown = shown
        return d


def decimal_scale(v: Any) -> int:
    """The scale MySQL's type gives an exact value (0 for an integer)."""
    if isinstance(v, ShownDecimal):
        return v.shown
    if isinstance(v, Decimal):
        exponent = v.as_tuple().exponent
        return -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return 0


def string_to_double(v: str | bytes) -> float:
    """A string in numeric context: its longest numeric prefix, else 0 (MySQL)."""
    text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    m = _NUMERIC_PREFIX.match(text)
    if m is None:
        return 0.0
    try:
        return float(m.group(0))
    except OverflowError:  # pragma: no cover - float() saturates to inf instead
        return float("inf")


def is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal)


def temporal_number(v: datetime.date | datetime.timedelta) -> int | Decimal:
    """A DATE, DATETIME or TIME in numeric context: ``YYYYMMDD[HHMMSS[.ffffff]]`` or ``[-]HHMMSS``."""
    if isinstance(v, datetime.timedelta):
        sign = -1 if v < datetime.timedelta(0) else 1
        total = abs(v)
        secs = total.days * 86400 + total.seconds
        whole = secs // 3600 * 10000 + secs % 3600 // 60 * 100 + secs % 60
        if total.microseconds:
            return sign * (Decimal(whole) + Decimal(total.microseconds).scaleb(-6))
        return sign * whole
    if isinstance(v, datetime.datetime):
        whole = int(v.strftime("%Y%m%d%H%M%S")) if v.year >= 1000 else (
            ((v.year * 100 + v.month) * 100 + v.day) * 1000000 + v.hour * 10000 + v.minute * 100 + v.second)
        return Decimal(whole) + Decimal(v.microsecond).scaleb(-6) if v.microsecond else whole
    return (v.year * 100 + v.month) * 100 + v.day


def as_number(v: Any) -> Any:
    """An operand in numeric context (NULL stays None, bool is 1/0)."""
    if isinstance(v, str | bytes):
        return string_to_double(v)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, TEMPORAL):
        return temporal_number(v)
    return v


def integer_prefix(v: str | bytes) -> int:
    """A string read as an integer: its longest integer prefix (``' 12abc'`` is 12), else 0."""
    text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    m = _INT_PREFIX.match(text)
    return int(m.group(0)) if m else 0


def as_int(v: Any) -> int | None:
    """An integer argument (a length, a position, a count): numbers rounded half away from
    zero, a string's integer prefix, as MySQL reads them."""
    if v is None:
        return None
    if isinstance(v, str | bytes):
        return integer_prefix(v)
    n = as_number(v)
    if isinstance(n, int):
        return n
    if isinstance(n, float):
        if math.isnan(n) or math.isinf(n):
            return 0
        return int(Decimal(n).quantize(Decimal(1), rounding=decimal.ROUND_HALF_UP))
    return int(Decimal(n).quantize(Decimal(1), rounding=decimal.ROUND_HALF_UP))


def to_text(v: Any) -> str:
    """A non-NULL value as a string (CONCAT, string functions): MySQL's text of it."""
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return double_text(v)
    if isinstance(v, ShownDecimal):
        return format(v.quantize(Decimal(1).scaleb(-v.shown), rounding=decimal.ROUND_HALF_UP), "f")
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, TEMPORAL):
        return tv.temporal_text(v)
    return str(v)


def _temporal_pair(a: Any, b: Any) -> tuple[Any, Any] | None:
    """Two values compared as temporal values when one is and the other reads as one."""
    if isinstance(b, TEMPORAL) and not isinstance(a, TEMPORAL):
        pair = _temporal_pair(b, a)
        return None if pair is None else (pair[1], pair[0])
    if not isinstance(a, TEMPORAL):
        return None
    if isinstance(a, datetime.timedelta):
        if isinstance(b, datetime.timedelta):
            return a, b
        other = tv.to_time(b) if isinstance(b, str | bytes) else None
        return None if other is None else (a, other)
    if isinstance(b, datetime.date):
        return tv.as_datetime(a), tv.as_datetime(b)
    if isinstance(b, str | bytes):
        parsed = tv.parse_datetime(to_text(b))
        return None if parsed is None else (tv.as_datetime(a), tv.as_datetime(parsed))
    return None


def comparable(a: Any, b: Any) -> tuple[Any, Any]:
    """Two non-NULL values as MySQL compares them."""
    if is_number(a) and is_number(b):
        if isinstance(a, float) or isinstance(b, float):
            return float(a), float(b)
        return a, b
    if is_number(a) or is_number(b):
        x, y = as_number(a), as_number(b)
        if isinstance(a, TEMPORAL) or isinstance(b, TEMPORAL):
            if not (isinstance(x, float) or isinstance(y, float)):
                return x, y
        return float(x), float(y)
    pair = _temporal_pair(a, b)
    if pair is not None:
        return pair
    if isinstance(a, TEMPORAL):
        a = tv.temporal_text(a)
    if isinstance(b, TEMPORAL):
        b = tv.temporal_text(b)
    if isinstance(a, bytes) or isinstance(b, bytes):
        a = a if isinstance(a, bytes) else str(a).encode()
        b = b if isinstance(b, bytes) else str(b).encode()
        return a, b
    return general_ci_key(str(a)), general_ci_key(str(b))


def truthy(v: Any) -> bool | None:
    """A value as a condition: NULL, or whether it is non-zero as a number."""
    if v is None:
        return None
    if isinstance(v, str | bytes):
        return string_to_double(v) != 0
    if isinstance(v, TEMPORAL):
        return temporal_number(v) != 0
    return bool(v)
