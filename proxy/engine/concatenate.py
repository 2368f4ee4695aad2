"""Concatenate: UNION ALL of sources on different routes, one after the other."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Result
from proxy.engine.stream_util import collect
from proxy.engine.union_fields import arm_fields, merge_union_fields
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Concatenate


async def execute(node: Concatenate, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Concatenate, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    # the columns are typed from every arm (proxy.engine.union_fields)
    others = [await arm_fields(src, vcursor, bindvars) for src in node.sources[1:]]
    first = True
    for src in node.sources:
        s = dispatch.stream(src, vcursor, bindvars)
        try:
            async for chunk in s:
                if first:
                    known = [f for f in others if f is not None and len(f) == len(chunk.fields)]
                    if chunk.fields and known:
                        chunk.fields = merge_union_fields([chunk.fields, *known])
                    yield chunk
                    first = False
                elif chunk.rows:
                    yield Result(rows=chunk.rows)
        finally:
            await s.aclose()
