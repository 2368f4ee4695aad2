"""SimpleProjection (pick columns), Truncate (drop hidden trailing columns) and
ProjectNames (pick columns by name, for queries over derived tables)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Field, Result
from proxy.engine.stream_util import collect, truncate_result
from proxy.errors import ProxyError
from rewriter.nodes import ProjectNames, SimpleProjection, Truncate


def column_by_name(fields: list[Field], name: str) -> int:
    """Index of the column called ``name`` (case-insensitive, first match, like MySQL)."""
    low = name.lower()
    for i, f in enumerate(fields):
        if f.name.lower() == low:
            return i
    raise ProxyError(1054, f"Unknown column '{name}' in 'field list'")


def _name_plan(node: ProjectNames, fields: list[Field]) -> tuple[list[int], list[Field]]:
    cols: list[int] = []
    out: list[Field] = []
    for name, alias in zip(node.columns, node.aliases, strict=True):
        picked = range(len(fields)) if name is None else [column_by_name(fields, name)]
        for i in picked:
            cols.append(i)
            out.append(dataclasses.replace(fields[i], name=alias) if alias else fields[i])
    return cols, out


def _project(chunk: Result, cols: list[int]) -> Result:
    fields = [chunk.fields[c] for c in cols] if chunk.fields else []
    return Result(fields=fields, rows=[tuple(r[c] for c in cols) for r in chunk.rows])


async def execute(node: SimpleProjection | Truncate | ProjectNames, vcursor: Any,
                  bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: SimpleProjection | Truncate | ProjectNames, vcursor: Any,
                 bindvars: Mapping[str, Any]) -> AsyncIterator[Result]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    by_name: tuple[list[int], list[Field]] | None = None
    try:
        async for chunk in source:
            if isinstance(node, Truncate):
                yield truncate_result(chunk, node.count)
            elif isinstance(node, ProjectNames):
                if by_name is None:
                    by_name = _name_plan(node, chunk.fields)
                cols = by_name[0]
                yield Result(fields=by_name[1] if chunk.fields else [],
                             rows=[tuple(r[c] for c in cols) for r in chunk.rows])
            else:
                yield _project(chunk, node.columns)
    finally:
        await source.aclose()
