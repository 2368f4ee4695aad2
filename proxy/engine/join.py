"""Join: nested loop at the proxy (inner and LEFT).

For each left row the right side runs with the join variables bound to that row's
values (Vitess's ``JoinVars``); inner joins drop left rows without a match, LEFT
joins pad them with NULLs. Streams over the left input; slow but exact."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Field, Result, Row, decode_value
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Join


async def execute(node: Join, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


def _combine(node: Join, left: Row, right: Row) -> Row:
    return tuple(left[-c - 1] if c < 0 else right[c - 1] for c in node.cols)


def _combine_fields(node: Join, lf: list[Field], rf: list[Field]) -> list[Field]:
    return [lf[-c - 1] if c < 0 else rf[c - 1] for c in node.cols]


async def _right_fields(node: Join, vcursor: VCursor, bindvars: Mapping[str, Any]) -> list[Field]:
    bv = dict(bindvars)
    for name in node.vars:
        bv[name] = None
    res = await dispatch.field_result(node.right, vcursor, bv)
    return res.fields


async def stream(node: Join, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    source = dispatch.stream(node.left, vcursor, bindvars)
    left_fields: list[Field] | None = None
    right_fields: list[Field] | None = None
    sent_fields = False
    try:
        async for chunk in source:
            if left_fields is None and chunk.fields:
                left_fields = chunk.fields
            out: list[Row] = []
            for lrow in chunk.rows:
                bv = dict(bindvars)
                for name, idx in node.vars.items():
                    bv[name] = decode_value(left_fields[idx], lrow[idx])  # type: ignore[index]
                right = await dispatch.execute(node.right, vcursor, bv)
                if right_fields is None and right.fields:
                    right_fields = right.fields
                if right.rows:
                    out.extend(_combine(node, lrow, r) for r in right.rows)
                elif node.left_join:
                    if right_fields is None:
                        right_fields = await _right_fields(node, vcursor, bindvars)
                    out.append(_combine(node, lrow, (None,) * len(right_fields)))
            if out or not sent_fields:
                if not sent_fields:
                    if right_fields is None:
                        right_fields = await _right_fields(node, vcursor, bindvars)
                    yield Result(fields=_combine_fields(node, left_fields or [], right_fields), rows=out)
                    sent_fields = True
                else:
                    yield Result(rows=out)
    finally:
        await source.aclose()
    if not sent_fields:
        rf = await _right_fields(node, vcursor, bindvars)
        yield Result(fields=_combine_fields(node, left_fields or [], rf))
