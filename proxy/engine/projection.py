"""SimpleProjection (pick columns), Truncate (drop hidden trailing columns) and
ProjectNames (pick columns by name, for queries over derived tables)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Mapping
from decimal import Decimal
from operator import itemgetter
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine import dispatch
from proxy.engine.result import (
    BINARY_CHARSET,
    BINARY_FLAG,
    NOT_NULL_FLAG,
    NUM_FLAG,
    Field,
    Result,
    encode_value,
)
from proxy.engine.stream_util import collect, truncate_result
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_BAD_FIELD_ERROR, ProxyError
from rewriter.nodes import ProjectNames, SimpleProjection, Truncate, Val
from rewriter.sqltemplate import parse_template


def column_by_name(fields: list[Field], name: str) -> int:
    """Index of the column called ``name`` (case-insensitive, first match, like MySQL)."""
    low = name.lower()
    for i, f in enumerate(fields):
        if f.name.lower() == low:
            return i
    raise ProxyError(ER_BAD_FIELD_ERROR, f"Unknown column '{name}' in 'field list'")


def _constant(value: Any, name: str) -> tuple[bytes | None, Field]:
    if isinstance(value, int | Decimal):
        ctype = ColumnType.LONGLONG if isinstance(value, int) else ColumnType.NEWDECIMAL
        return encode_value(value), Field(name=name, type=ctype, charset=BINARY_CHARSET, length=21,
                                          flags=NOT_NULL_FLAG | BINARY_FLAG | NUM_FLAG)
    if isinstance(value, bytes):
        return value, Field(name=name, type=ColumnType.VAR_STRING, charset=BINARY_CHARSET, length=len(value))
    return encode_value(value), Field(name=name, type=ColumnType.VAR_STRING, length=1024)


def _name_plan(node: ProjectNames, fields: list[Field],
               bindvars: Mapping[str, Any]) -> tuple[list[int | bytes | None], list[Field]]:
    """Per output column: an input index, or the constant's bytes."""
    cols: list[int | bytes | None] = []
    out: list[Field] = []
    for col, alias in zip(node.columns, node.aliases, strict=True):
        if isinstance(col, Val):
            name = alias or ""
            if ":" in name:
                name = parse_template(name).render(bindvars)
            raw, f = _constant(col.resolve(bindvars), name)
            cols.append(raw)
            out.append(f)
            continue
        picked = range(len(fields)) if col is None else [column_by_name(fields, col)]
        for i in picked:
            cols.append(i)
            out.append(dataclasses.replace(fields[i], name=alias) if alias else fields[i])
    return cols, out


def _project(chunk: Result, cols: list[int]) -> Result:
    fields = [chunk.fields[c] for c in cols] if chunk.fields else []
    if len(cols) < 2:
        return Result(fields=fields, rows=[tuple(r[c] for c in cols) for r in chunk.rows])
    pick = itemgetter(*cols)  # in C: 20,000 rows of 3 columns in 1.3 ms, not 5.8 ms
    return Result(fields=fields, rows=[pick(r) for r in chunk.rows])


async def execute(node: SimpleProjection | Truncate | ProjectNames, vcursor: VCursor,
                  bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: SimpleProjection | Truncate | ProjectNames, vcursor: VCursor,
                 bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    by_name: tuple[list[int | bytes | None], list[Field]] | None = None
    try:
        async for chunk in source:
            if isinstance(node, Truncate):
                yield truncate_result(chunk, node.count)
            elif isinstance(node, ProjectNames):
                if by_name is None:
                    by_name = _name_plan(node, chunk.fields, bindvars)
                cols = by_name[0]
                yield Result(fields=by_name[1] if chunk.fields else [],
                             rows=[tuple(r[c] if isinstance(c, int) else c for c in cols) for r in chunk.rows])
            else:
                yield _project(chunk, node.columns)
    finally:
        await source.aclose()
