"""PulloutSubquery: run an uncorrelated subquery, bind its result, run the outer plan."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Result, decode_value
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_OPERAND_COLUMNS, ER_SUBQUERY_NO_1_ROW, ProxyError
from rewriter.nodes import PulloutSubquery


async def _bind(node: PulloutSubquery, vcursor: VCursor, bindvars: Mapping[str, Any]) -> dict[str, Any]:
    res = await dispatch.execute(node.subquery, vcursor, bindvars)
    bv = dict(bindvars)
    bv[node.has_values_var] = 1 if res.rows else 0
    if node.kind == "exists":
        return bv
    if res.fields and len(res.fields) != 1:
        raise ProxyError(ER_OPERAND_COLUMNS, "Operand should contain 1 column(s)")
    f = res.fields[0] if res.fields else None
    values = [decode_value(f, r[0]) if f is not None and not f.is_binary else r[0] for r in res.rows]
    if node.kind == "value":
        if len(values) > 1:
            raise ProxyError(ER_SUBQUERY_NO_1_ROW, "Subquery returns more than 1 row")
        bv[node.values_var] = values[0] if values else None
    else:
        # one NULL keeps "x IN (...)" valid SQL when empty; the has-values flag decides
        bv[node.values_var] = values or [None]
    return bv


async def execute(node: PulloutSubquery, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await dispatch.execute(node.outer, vcursor, await _bind(node, vcursor, bindvars))


async def stream(node: PulloutSubquery, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    s = dispatch.stream(node.outer, vcursor, await _bind(node, vcursor, bindvars))
    try:
        async for chunk in s:
            yield chunk
    finally:
        await s.aclose()
