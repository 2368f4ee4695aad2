"""DMLWithInput: find the rows first, then change them by key (Vitess's primitive).

The input (any read plan) gives the target rows' primary key and the values of SET
expressions that read other tables. With one key column and nothing per row, the DML
runs once with the keys bound as a list (routed to the shards that hold them);
otherwise once per row. Every statement goes through the session's VCursor, so inside
a transaction all of it commits or rolls back together."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Result, decode_value
from proxy.engine.vcursor import VCursor
from rewriter.nodes import DMLWithInput


async def execute(node: DMLWithInput, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    rows = await dispatch.execute(node.input, vcursor, bindvars)
    fields = rows.fields
    decoded = [[v if f.is_binary else decode_value(f, v) for f, v in zip(fields, row, strict=True)]
               for row in rows.rows]
    out = Result()
    if not decoded:
        return out
    if node.keys_var:
        keys = sorted({r[0] for r in decoded if r[0] is not None}, key=lambda v: (str(type(v)), v))
        if not keys:
            return out
        bv = dict(bindvars)
        bv[node.keys_var] = keys
        return await dispatch.execute(node.dml, vcursor, bv)
    seen: set[tuple[Any, ...]] = set()
    for r in decoded:
        key = tuple(r[: node.key_count])
        if key in seen:
            continue  # a row joined several times changes once, as in MySQL
        seen.add(key)
        bv = dict(bindvars)
        bv.update(zip(node.row_vars, r, strict=True))
        res = await dispatch.execute(node.dml, vcursor, bv)
        out.affected_rows += res.affected_rows
        out.warnings += res.warnings
    return out


async def stream(node: DMLWithInput, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    yield await execute(node, vcursor, bindvars)
