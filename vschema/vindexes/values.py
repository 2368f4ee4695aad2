"""Conversion of SQL values (as decoded into Python) to what vindexes hash.

Values reach a vindex as the Python form of a SQL literal or of a text-protocol value:
``int``, ``bool``, ``str``, ``bytes``, ``decimal.Decimal``, ``float`` or ``None``. Vitess
works on the literal's raw text, so the conversions here reproduce what Vitess's
``sqltypes.Value`` would give for the same literal.
"""

from __future__ import annotations

import re
from decimal import Decimal

UINT64_MAX = (1 << 64) - 1
INT64_MIN = -(1 << 63)

_INTEGER_LITERAL = re.compile(r"-?[0-9]+")


class ValueConversionError(ValueError):
    """The value has no unsigned 64-bit integer form."""


def _integer_from_text(text: str) -> int:
    if not _INTEGER_LITERAL.fullmatch(text):
        raise ValueConversionError(f"cannot parse uint64 from {text!r}")
    return int(text)


def integer_value(value: object) -> int:
    """The exact integer a value denotes, or ValueConversionError.

    Floats never convert (Vitess's ``Float64`` values fail its uint64 parse, see the
    ``numeric`` vectors), nor do decimals written with a fractional part.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return _integer_from_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return _integer_from_text(bytes(value).decode("ascii"))
        except UnicodeDecodeError as exc:
            raise ValueConversionError(f"cannot parse uint64 from {bytes(value)!r}") from exc
    if isinstance(value, Decimal):
        if value.is_finite() and value.as_tuple().exponent >= 0:  # type: ignore[operator]
            return int(value)
        raise ValueConversionError(f"cannot parse uint64 from {str(value)!r}")
    if isinstance(value, float):
        raise ValueConversionError(f"cannot convert float {value!r} to uint64")
    raise ValueConversionError(f"cannot convert {type(value).__name__} value {value!r} to uint64")


def to_uint64(value: object, *, wrap_negative: bool) -> int:
    """The uint64 a value maps to.

    ``wrap_negative``: a negative int64 is taken as its two's-complement uint64 (what
    Vitess's ``hash`` does for signed values); otherwise negative values do not convert.
    """
    number = integer_value(value)
    if number < 0:
        if wrap_negative and number >= INT64_MIN:
            return number + (1 << 64)
        raise ValueConversionError(f"negative number {number} cannot be converted to unsigned")
    if number > UINT64_MAX:
        raise ValueConversionError(f"value {number} is out of range for uint64")
    return number


def to_bytes(value: object) -> bytes:
    """The raw bytes of a value as Vitess's ``Value.ToBytes`` gives them (NULL -> empty)."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, int):
        return str(value).encode("ascii")
    if isinstance(value, Decimal):
        return str(value).encode("ascii")
    if isinstance(value, float):
        return repr(value).encode("ascii")
    raise ValueConversionError(f"cannot convert {type(value).__name__} value {value!r} to bytes")


def is_integral(value: object) -> bool:
    """True for values Vitess types as integers (these can be looked up in one batch)."""
    return isinstance(value, int)
