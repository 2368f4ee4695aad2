"""Filter: keep rows whose predicate (HAVING, compiled by the planner) is true."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.projection import column_by_name
from proxy.engine.projection_compute import evaluation_failed
from proxy.engine.result import Result, evaluator_value
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Filter


async def execute(node: Filter, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Filter, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    fields = None
    picks: list[int] | None = None  # column per predicate value (when names are used)
    first = True
    try:
        async for chunk in source:
            if fields is None and chunk.fields:
                fields = chunk.fields
                if node.names is not None:
                    picks = [column_by_name(fields, n) for n in node.names]
            rows = []
            for row in chunk.rows:
                if picks is not None:
                    values = [evaluator_value(fields[i], row[i]) for i in picks]  # type: ignore[index]
                else:
                    values = [evaluator_value(f, v) for f, v in zip(fields or [], row, strict=False)]
                try:
                    keep = node.predicate(values, bindvars)
                except (ArithmeticError, ValueError, MemoryError) as e:
                    raise evaluation_failed(node.text, e) from e
                if keep:
                    rows.append(row)
            if first:
                yield Result(fields=chunk.fields, rows=rows)
                first = False
            elif rows:
                yield Result(rows=rows)
    finally:
        await source.aclose()
