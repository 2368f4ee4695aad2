"""Distinct: drop rows equal (under the column collations) to one already sent.
Streams; memory grows with the number of distinct rows, not the input."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.compare import columns_key_fn
from proxy.engine.result import Result
from proxy.engine.stream_util import collect, truncate_result
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Distinct


async def execute(node: Distinct, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Distinct, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    seen: set[tuple[Any, ...]] = set()
    key = None
    first = True
    try:
        async for chunk in source:
            chunk = truncate_result(chunk, node.truncate)
            if key is None and chunk.fields:
                key = columns_key_fn(chunk.fields, range(len(chunk.fields)))
            rows = []
            for row in chunk.rows:
                k = key(row) if key is not None else row
                if k not in seen:
                    seen.add(k)
                    rows.append(row)
            if first:
                yield Result(fields=chunk.fields, rows=rows)
                first = False
            elif rows:
                yield Result(rows=rows)
    finally:
        await source.aclose()
