"""SimpleProjection (pick columns) and Truncate (drop hidden trailing columns)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Result
from proxy.engine.stream_util import collect, truncate_result
from rewriter.nodes import SimpleProjection, Truncate


def _project(chunk: Result, cols: list[int]) -> Result:
    fields = [chunk.fields[c] for c in cols] if chunk.fields else []
    return Result(fields=fields, rows=[tuple(r[c] for c in cols) for r in chunk.rows])


async def execute(node: SimpleProjection | Truncate, vcursor: Any, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: SimpleProjection | Truncate, vcursor: Any,
                 bindvars: Mapping[str, Any]) -> AsyncIterator[Result]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    try:
        async for chunk in source:
            if isinstance(node, Truncate):
                yield truncate_result(chunk, node.count)
            else:
                yield _project(chunk, node.columns)
    finally:
        await source.aclose()
