"""Send: a statement verbatim to one named shard (shard-targeted sessions)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine.result import Result
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Send


async def execute(node: Send, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await vcursor.execute_shard(node.keyspace, node.shard, node.query.render(bindvars))


async def stream(node: Send, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    if node.is_dml:
        yield await execute(node, vcursor, bindvars)
        return
    s = vcursor.stream_shard(node.keyspace, node.shard, node.query.render(bindvars))
    try:
        async for chunk in s:
            yield chunk
    finally:
        await s.aclose()
