"""Concatenate: UNION ALL of sources on different routes, one after the other."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Result
from proxy.engine.stream_util import collect
from proxy.engine.union_fields import arm_fields, merge_union_fields
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT, ProxyError
from rewriter.nodes import Concatenate


async def execute(node: Concatenate, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Concatenate, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    # the columns are typed from every arm (proxy.engine.union_fields)
    others = [await arm_fields(src, vcursor, bindvars) for src in node.sources[1:]]
    first = True
    width = -1
    for src in node.sources:
        s = dispatch.stream(src, vcursor, bindvars)
        arm_first = True
        try:
            async for chunk in s:
                if arm_first and chunk.fields:
                    arm_first = False
                    if width < 0:
                        width = len(chunk.fields)
                        if any(f is not None and len(f) != width for f in others):
                            _different_widths()
                    elif len(chunk.fields) != width:  # an arm with a '*' the planner did not count
                        _different_widths()
                if first:
                    known = [f for f in others if f is not None]
                    if chunk.fields and known:
                        chunk.fields = merge_union_fields([chunk.fields, *known])
                    yield chunk
                    first = False
                elif chunk.rows:
                    yield Result(rows=chunk.rows)
        finally:
            await s.aclose()


def _different_widths() -> None:
    raise ProxyError(ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                     "The used SELECT statements have a different number of columns")
