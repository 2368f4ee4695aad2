"""MemorySort: sort the whole input at the proxy (ORDER BY that shards cannot do,
e.g. over aggregated values or a cross-shard join)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.compare import row_key_fn
from proxy.engine.result import Result
from proxy.engine.stream_util import from_result, truncate_result
from proxy.engine.vcursor import VCursor
from rewriter.nodes import MemorySort


async def execute(node: MemorySort, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    res = await dispatch.execute(node.input, vcursor, bindvars)
    if res.fields:
        res.rows.sort(key=row_key_fn(res.fields, node.order_by))
    return truncate_result(res, node.truncate)


async def stream(node: MemorySort, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    async for chunk in from_result(await execute(node, vcursor, bindvars)):
        yield chunk
