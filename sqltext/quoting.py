"""The one identifier quoter and the one literal renderer: every piece of SQL the proxy writes
with a name or a value in it goes through these.

``sql_literal(value)`` turns a Python value into MySQL literal text: ``None -> NULL``,
ints/Decimals as digits, ``str`` quoted with MySQL's backslash escapes (``\\0 \\' \\" \\b \\n
\\r \\t \\Z \\\\``, read back the same under the default sql_mode), ``bytes`` as ``X'..'``,
dates and times as quoted ISO text (aware datetimes in UTC), lists as comma-separated
literals (for ``IN (::list)``). A float MySQL has no literal for (NaN, infinities) raises.

``double_text(x)`` is MySQL's text of a DOUBLE value (a result column's value, CONCAT of a
DOUBLE): MariaDB's ``my_gcvt``.

``text_value_literal(raw, kind)`` renders a value as a shard sent it in the text protocol
(bytes, typed by its column: ``TextValueKind``), for rows the proxy writes back (temporary
tables, message acks): numbers as their digits, strings escaped, binary strings as ``X'..'``.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from enum import IntEnum
from typing import Any

_ESCAPE_TABLE = str.maketrans(
    {
        "\0": "\\0",
        "'": "\\'",
        '"': '\\"',
        "\b": "\\b",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\x1a": "\\Z",
        "\\": "\\\\",
    }
)


def quote_identifier(name: str) -> str:
    """A MySQL identifier in backquotes, for any name."""
    return "`" + name.replace("`", "``") + "`"


def escape_string(s: str) -> str:
    """The body of a MySQL single-quoted string literal for ``s``."""
    return s.translate(_ESCAPE_TABLE)


# MariaDB's MAX_DECPT_FOR_F_FORMAT (DBL_DIG): beyond it a DOUBLE shows as 1e15, 1.5e-20
_MAX_DECPT_FOR_F_FORMAT = 15


def double_text(x: float) -> str:
    """A DOUBLE as MariaDB sends it (``my_gcvt``): the shortest digits that read back, in
    fixed notation unless the point falls more than 15 places out of them (``1e14`` is
    100000000000000, ``1e15`` is 1e15, ``1.5e-9`` is 0.0000000015, ``1.5e-20`` is 1.5e-20)."""
    if x != x or x in (float("inf"), float("-inf")):
        return repr(x)
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exponent = f"{abs(x)!r}".partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    decpt = len(whole.lstrip("0")) + int(exponent or 0) if whole.strip("0") else \
        int(exponent or 0) - (len(frac) - len(frac.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    n = len(digits)
    if decpt >= 1 - _MAX_DECPT_FOR_F_FORMAT and (decpt <= _MAX_DECPT_FOR_F_FORMAT or n > decpt):
        if decpt <= 0:
            return f"{sign}0.{'0' * -decpt}{digits}"
        if decpt < n:
            return f"{sign}{digits[:decpt]}.{digits[decpt:]}"
        return f"{sign}{digits}{'0' * (decpt - n)}"
    return f"{sign}{digits[0]}{'.' + digits[1:] if n > 1 else ''}e{decpt - 1}"


def sql_literal(value: Any) -> str:
    # Exact type tests first: this runs for every bind variable of every routed query.
    if value is None:
        return "NULL"
    t = type(value)
    if t is int:
        return str(value)
    if t is str:
        return "'" + value.translate(_ESCAPE_TABLE) + "'"
    if t is bool:
        return "1" if value else "0"
    if t is Decimal:
        return format(value, "f")
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"MySQL has no literal for {value!r}")
        text = repr(value)
        # with an exponent: MySQL reads '1.5' as a DECIMAL, '1.5e0' as the DOUBLE it is (a
        # prepared statement's DOUBLE parameter keeps its type, as on MySQL)
        return text if "e" in text else text + "e0"
    if t is bytes or t is bytearray or t is memoryview:
        return "X'" + bytes(value).hex() + "'"
    if t is list or t is tuple:
        return ", ".join(sql_literal(v) for v in value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return "'" + value.isoformat(sep=" ") + "'"
    if isinstance(value, datetime.date | datetime.time):
        return "'" + value.isoformat() + "'"
    if isinstance(value, datetime.timedelta):
        us = value // datetime.timedelta(microseconds=1)
        sign, us = ("-" if us < 0 else ""), abs(us)
        secs, us = divmod(us, 1_000_000)
        return f"'{sign}{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}.{us:06d}'"
    if isinstance(value, int):
        return str(int(value))
    raise TypeError(f"cannot render {t.__name__} as a SQL literal")


class TextValueKind(IntEnum):
    """How a column's text-protocol value is written as a literal."""

    NUMBER = 0  # integer, decimal and float columns: the digits as sent
    STRING = 1  # text (and temporal) columns: a quoted, escaped string
    BYTES = 2  # binary strings and BIT: hexadecimal, so no byte is re-read through a charset


def bytes_literal(data: bytes) -> str:
    """A binary string as ``X'..'`` (binary-safe, no escaping); empty: ``''`` (MySQL reads
    ``X''`` alike; ``''`` also suits a BIT column)."""
    return "X'" + data.hex() + "'" if data else "''"


def text_value_literal(raw: bytes | None, kind: TextValueKind) -> str:
    """``raw`` (a text-protocol value; None is SQL NULL) as literal SQL text of ``kind``."""
    if raw is None:
        return "NULL"
    if kind == TextValueKind.NUMBER:
        return raw.decode("ascii")
    if kind == TextValueKind.BYTES:
        return bytes_literal(raw)
    return "'" + raw.decode("utf-8", "surrogateescape").translate(_ESCAPE_TABLE) + "'"


__all__ = ["TextValueKind", "bytes_literal", "escape_string", "quote_identifier", "sql_literal", "text_value_literal"]
