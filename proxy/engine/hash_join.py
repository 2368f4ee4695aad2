"""HashJoin: an equi-join the proxy matches in memory (beyond Vitess's nested loops).

The right input runs once (one scatter instead of a query per left row) and its rows
are hashed on the join keys; the left input then streams and probes, so the output
keeps the left input's order (each left row followed by its matches in the right
input's order), as the nested loop's does. Chosen by the planner when the row
estimates say reading the right table whole costs less than looking it up for every
batch of left rows (rewriter.join_planner).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.join_keys import build_table, combine_fields, key_functions, probe
from proxy.engine.result import Field, Result
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from rewriter.nodes import HashJoin


async def execute(node: HashJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: HashJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    right = await dispatch.execute(node.right, vcursor, bindvars)
    right_fields = right.fields or (await dispatch.field_result(node.right, vcursor, bindvars)).fields
    source = dispatch.stream(node.left, vcursor, bindvars)
    left_fields: list[Field] | None = None
    table = None
    left_key = None
    try:
        async for chunk in source:
            if left_fields is None:
                left_fields = chunk.fields
                left_key, right_key = key_functions(left_fields, right_fields, node.left_keys, node.right_keys)
                table = build_table(right.rows, right_key)
                right.rows = []  # the table holds them now
                yield Result(fields=combine_fields(node.cols, left_fields, right_fields),
                             rows=probe(node.cols, chunk.rows, left_key, table, node.left_join, len(right_fields)))
                continue
            assert left_key is not None and table is not None
            rows = probe(node.cols, chunk.rows, left_key, table, node.left_join, len(right_fields))
            if rows:
                yield Result(rows=rows)
    finally:
        await source.aclose()
    if left_fields is None:
        lf = (await dispatch.field_result(node.left, vcursor, bindvars)).fields
        yield Result(fields=combine_fields(node.cols, lf, right_fields))
