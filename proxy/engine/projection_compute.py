"""Projection: compute columns at the proxy from other columns of the row, with
MySQL's result types (e.g. ``sum(price) / count(*)`` -> DECIMAL with scale + 4, ``DATE(d +
INTERVAL 1 MONTH)`` -> DATE, sent as MySQL's text of each type)."""

from __future__ import annotations

import datetime
import logging
from collections.abc import AsyncGenerator, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine import dispatch
from proxy.engine.result import (
    BINARY_CHARSET,
    BINARY_FLAG,
    NUM_FLAG,
    UTF8MB4_GENERAL_CI,
    Field,
    Result,
    Row,
    encode_value,
    evaluator_value,
    is_numeric,
)
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_DATA_OUT_OF_RANGE, ER_UNKNOWN_ERROR, ProxyError
from rewriter.nodes import Projection
from rewriter.sqltemplate import parse_template
from sqltext import temporal

logger = logging.getLogger(__name__)

_FLOATS = {ColumnType.FLOAT, ColumnType.DOUBLE}
_DECIMALS = {ColumnType.DECIMAL, ColumnType.NEWDECIMAL}
_TEMPORAL_KINDS = {
    ColumnType.DATE: "date", ColumnType.NEWDATE: "date", ColumnType.DATETIME: "datetime",
    ColumnType.TIMESTAMP: "datetime", ColumnType.TIME: "time",
}
# kind -> (column type, display length without fractional digits)
_TEMPORAL_FIELDS = {"date": (ColumnType.DATE, 10), "datetime": (ColumnType.DATETIME, 19), "time": (ColumnType.TIME, 10)}


def field_kind(f: Field) -> tuple[str, int]:
    if f.type in _FLOATS:
        return ("double", 0)
    if f.type in _DECIMALS:
        return ("decimal", f.decimals)
    if is_numeric(f):
        return ("int", 0)
    if f.type in _TEMPORAL_KINDS:
        return (_TEMPORAL_KINDS[f.type], f.decimals if f.type != ColumnType.DATE else 0)
    return ("string", 0)


def _field_for(name: str, kind: tuple[str, int]) -> Field:
    k, scale = kind
    if k == "int":
        return Field(name=name, type=ColumnType.LONGLONG, charset=BINARY_CHARSET, length=21,
                     flags=BINARY_FLAG | NUM_FLAG)
    if k == "decimal":
        return Field(name=name, type=ColumnType.NEWDECIMAL, charset=BINARY_CHARSET, length=66,
                     flags=BINARY_FLAG | NUM_FLAG, decimals=scale)
    if k == "double":
        return Field(name=name, type=ColumnType.DOUBLE, charset=BINARY_CHARSET, length=23,
                     flags=BINARY_FLAG | NUM_FLAG, decimals=scale or 31)
    if k in _TEMPORAL_FIELDS:
        ctype, length = _TEMPORAL_FIELDS[k]
        return Field(name=name, type=ctype, charset=BINARY_CHARSET, length=length + (scale + 1 if scale else 0),
                     flags=BINARY_FLAG, decimals=scale)
    return Field(name=name, type=ColumnType.VAR_STRING, charset=UTF8MB4_GENERAL_CI, length=1024)


def computed_text(value: Any, kind: tuple[str, int]) -> bytes | None:
    """A computed value as MySQL sends a value of ``kind`` (text protocol)."""
    if value is None:
        return None
    k, scale = kind
    if k == "int":
        return str(int(value)).encode()
    if k == "decimal":
        d = Decimal(value).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        return format(d, "f").encode()
    if k == "double":
        if scale:  # a DOUBLE with fixed decimals (ROUND(x, 1)) shows them all, as MySQL does
            return f"{float(value):.{scale}f}".encode()
        return encode_value(float(value))
    if k == "date" and isinstance(value, datetime.date):
        return temporal.date_text(value).encode()
    if k == "datetime" and isinstance(value, datetime.date):
        return temporal.datetime_text(temporal.as_datetime(value), scale).encode()
    if k == "time" and isinstance(value, datetime.timedelta):
        return temporal.time_text(value, scale).encode()
    if isinstance(value, datetime.date | datetime.timedelta):
        return temporal.temporal_text(value).encode()
    return encode_value(value)


def evaluation_failed(text: str, e: Exception) -> ProxyError:
    """An expression the evaluator could not finish on some row (a value beyond what Python
    holds): the statement fails with MySQL's generic error naming the expression, never
    with the Python exception's text."""
    logger.warning("expression failed at the proxy", extra={"expression": text, "error": type(e).__name__})
    if isinstance(e, OverflowError):  # the evaluator's DOUBLE out of range: MySQL's own error
        return ProxyError(ER_DATA_OUT_OF_RANGE, f"DOUBLE value is out of range in '{text}'")
    return ProxyError(ER_UNKNOWN_ERROR, f"cannot evaluate '{text}' at the proxy for a value of this row")


async def execute(node: Projection, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Projection, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    fields: list[Field] | None = None
    kinds: list[tuple[str, int]] = []
    try:
        async for chunk in source:
            out_fields: list[Field] = []
            if fields is None and chunk.fields:
                fields = chunk.fields
                in_kinds = [field_kind(f) for f in fields]
                kinds = [c.result_kind(in_kinds.__getitem__, bindvars) for c in node.computed]
                out_fields = list(fields)
                for c, k in zip(node.computed, kinds, strict=True):
                    name = parse_template(c.name).render(bindvars) if ":" in c.name else c.name
                    out_fields[c.column] = _field_for(name, k)
            rows: list[Row] = []
            for row in chunk.rows:
                values = [evaluator_value(f, v) for f, v in zip(fields or [], row, strict=True)]
                new = list(row)
                for c, k in zip(node.computed, kinds, strict=True):
                    try:
                        new[c.column] = computed_text(c.fn(values, bindvars), k)
                    except (ArithmeticError, ValueError, MemoryError) as e:
                        raise evaluation_failed(c.text or c.name, e) from e
                rows.append(tuple(new))
            yield Result(fields=out_fields, rows=rows)
    finally:
        await source.aclose()
