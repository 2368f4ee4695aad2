"""CAST(x AS type) and CONVERT(x, type) to SIGNED/UNSIGNED [INTEGER], DECIMAL(p,s), DOUBLE,
CHAR[(n)], BINARY, DATE, DATETIME[(n)] and TIME[(n)].

MySQL's rules: a string cast to an integer takes its integer prefix (``'12.9abc'`` is
12), to DECIMAL its numeric prefix; exact and DOUBLE values are rounded half away from
zero to an integer or to the DECIMAL's scale, and a value beyond DECIMAL(p,s) is
clamped to its largest value; UNSIGNED wraps a negative value modulo 2^64; CHAR(n) keeps
the first n characters; a string that is not a date is NULL as DATE/DATETIME/TIME.
``CONVERT(x USING charset)`` and other types are refused.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlglot import exp

from rewriter.functions.signature import (
    DOUBLE,
    INT,
    STRING,
    Compile,
    CompileKind,
    Fn,
    Function,
    KindFn,
    refuse,
    strict,
)
from rewriter.functions.values import as_number, integer_prefix, to_text
from rewriter.nodes import ValueKind
from sqltext import temporal as tv

T = exp.DataType.Type
_DECIMAL = decimal.Context(prec=65)
_DECIMAL_PREFIX = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_SIGNED = {T.BIGINT, T.INT}
_TEXT = {T.CHAR, T.NCHAR, T.VARCHAR, T.NVARCHAR, T.TEXT}


def _params(e: exp.Expression) -> list[int]:
    out = []
    for p in e.args["to"].expressions:
        inner = p.this if isinstance(p, exp.DataTypeParam) else p
        if not isinstance(inner, exp.Literal) or not inner.this.isdigit():
            raise refuse(e)
        out.append(int(inner.this))
    return out


def to_signed(v: Any) -> int:
    if isinstance(v, str | bytes):
        return integer_prefix(v)
    n = as_number(v)
    if isinstance(n, int):
        return n
    if isinstance(n, float):
        return round(n) if math.isfinite(n) else 0  # rint: CAST(2.5e0 AS SIGNED) is 2
    return int(n.quantize(Decimal(1), rounding=decimal.ROUND_HALF_UP))


def to_decimal(v: Any, precision: int, scale: int) -> Decimal:
    if isinstance(v, str | bytes):
        text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        m = _DECIMAL_PREFIX.match(text)
        d = Decimal(m.group(0).strip()) if m else Decimal(0)
    else:
        n = as_number(v)
        d = Decimal(repr(n)) if isinstance(n, float) else Decimal(n)
    limit = Decimal(10) ** (precision - scale) - Decimal(1).scaleb(-scale)
    if abs(d) > limit:  # clamped first: quantizing 1e100 to two decimals exceeds 65 digits
        return limit if d > 0 else -limit
    d = d.quantize(Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP, context=_DECIMAL)
    return max(-limit, min(limit, d))


def _truncated(t: Any, fsp: int) -> Any:
    """A DATETIME or TIME with ``fsp`` fractional digits (MariaDB truncates the rest)."""
    if t is None:
        return None
    keep = 10 ** (6 - fsp)
    micro = t.microsecond if isinstance(t, datetime.datetime) else t.microseconds
    cut = micro - micro % keep
    if isinstance(t, datetime.datetime):
        return t.replace(microsecond=cut)
    return t - datetime.timedelta(microseconds=micro - cut)


def _converter(e: exp.Expression) -> tuple[Callable[[Any], Any], ValueKind]:
    to = e.args["to"]
    t = to.this
    params = _params(e)
    if t in _SIGNED and not params:
        return to_signed, INT
    if t == T.UBIGINT and not params:
        return (lambda v: to_signed(v) % (1 << 64)), INT
    if t == T.DECIMAL:
        precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
        if scale > precision or precision > 65 or scale > 38:
            raise refuse(e)
        return (lambda v: to_decimal(v, precision, scale)), ("decimal", scale)
    if t == T.DOUBLE and not params:
        return (lambda v: float(as_number(v))), DOUBLE
    if t in _TEXT and len(params) <= 1 and to.args.get("kind") is None:
        n = params[0] if params else None
        return (lambda v: to_text(v)[:n] if n is not None else to_text(v)), STRING
    if t == T.BINARY and not params:
        return (lambda v: v if isinstance(v, bytes) else to_text(v).encode("utf-8", "surrogateescape")), STRING
    if t == T.DATE and not params:
        return tv.to_date, ("date", 0)
    if t == T.DATETIME and len(params) <= 1:
        fsp = params[0] if params else 0
        return (lambda v: _truncated(tv.to_datetime(v), fsp)), ("datetime", fsp)
    if t == T.TIME and len(params) <= 1:
        fsp = params[0] if params else 0
        return (lambda v: _truncated(tv.to_time(v), fsp)), ("time", fsp)
    raise refuse(e)


def _cast(e: exp.Expression, c: Compile) -> Fn:
    convert, _ = _converter(e)
    return strict([c(e.this)], convert)


def _cast_kind(e: exp.Expression, k: CompileKind) -> KindFn:
    _, kind = _converter(e)
    return lambda kind_of, bv: kind


FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    exp.Cast: Function(_cast, _cast_kind),
}
