"""VindexLookup: map values through a lookup vindex (a query on its lookup table),
then run the route on the shards of the keyspace ids found."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import route as route_mod
from proxy.engine.destinations import Targets
from proxy.engine.lookup import lookup_shards
from proxy.engine.result import Result
from proxy.engine.vcursor import VCursor
from rewriter.nodes import VindexLookup


async def _targets(node: VindexLookup, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Targets:
    values = [v.resolve(bindvars) for v in node.values]
    return [(s, bindvars) for s in await lookup_shards(vcursor, node.vindex, node.keyspace, values)]


async def execute(node: VindexLookup, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await route_mod.execute(node.route, vcursor, bindvars, await _targets(node, vcursor, bindvars))


async def stream(node: VindexLookup, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    tg = await _targets(node, vcursor, bindvars)
    s = route_mod.stream(node.route, vcursor, bindvars, tg)
    try:
        async for chunk in s:
            yield chunk
    finally:
        await s.aclose()
