"""Limit: skip ``offset`` rows, pass ``count`` rows, then close the input early.

The route below received ``LIMIT offset+count`` (bind variable ``__upper_limit``), so
each shard sends at most that many rows; closing the stream stops the shards."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.result import Result
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_WRONG_ARGUMENTS, ProxyError
from rewriter.nodes import UPPER_LIMIT, Limit


def _bounds(node: Limit, bindvars: Mapping[str, Any]) -> tuple[int, int]:
    try:
        count = int(node.count.resolve(bindvars))
        offset = int(node.offset.resolve(bindvars)) if node.offset is not None else 0
    except (TypeError, ValueError) as e:
        raise ProxyError(ER_WRONG_ARGUMENTS, "Incorrect arguments to LIMIT") from e
    if count < 0 or offset < 0:
        raise ProxyError(ER_WRONG_ARGUMENTS, "Incorrect arguments to LIMIT")
    return count, offset


async def execute(node: Limit, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Limit, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    count, offset = _bounds(node, bindvars)
    bv = dict(bindvars)
    bv[UPPER_LIMIT] = count + offset
    source = dispatch.stream(node.input, vcursor, bv)
    to_skip, left = offset, count
    sent_fields = False
    try:
        async for chunk in source:
            rows = chunk.rows
            if to_skip:
                skipped = min(to_skip, len(rows))
                rows = rows[skipped:]
                to_skip -= skipped
            rows = rows[:left]
            left -= len(rows)
            if not sent_fields:
                yield Result(fields=chunk.fields, rows=rows)
                sent_fields = True
            elif rows:
                yield Result(rows=rows)
            if left == 0:
                break
    finally:
        await source.aclose()
