"""BatchedJoin: a nested loop that looks the right side up for many left rows at once.

Vitess's nested loop sends one right-side query per left row; here the left rows are
taken in batches and the right side runs once per batch with the batch's distinct key
values bound as a list (``right_key IN ::batch_var``, which routes to the shards
holding them when the key is the right table's vindex column). The right rows are then
matched to the batch's rows at the proxy on every key pair (proxy.engine.join_keys).
Left order is kept, each left row followed by its matches in the right input's order.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.join_keys import RowKey, build_table, combine_fields, key_functions, probe
from proxy.engine.result import Field, Result, Row, decode_value
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from rewriter.nodes import BatchedJoin


async def execute(node: BatchedJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


class _Batches:
    """The right side's fields, and the key functions once both sides' fields are known."""

    def __init__(self, node: BatchedJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> None:
        self.node = node
        self.vcursor = vcursor
        self.bindvars = bindvars
        self.right_fields: list[Field] | None = None
        self.left_key: RowKey | None = None
        self.right_key: RowKey | None = None

    async def fields(self) -> list[Field]:
        if self.right_fields is None:
            bv = dict(self.bindvars)
            bv[self.node.batch_var] = [None]
            self.right_fields = (await dispatch.field_result(self.node.right, self.vcursor, bv)).fields
        return self.right_fields

    async def join(self, left_fields: list[Field], rows: list[Row]) -> list[Row]:
        node = self.node
        key_col = node.left_keys[0]
        values: dict[Any, None] = {}
        for r in rows:
            raw = r[key_col]
            if raw is not None:
                values.setdefault(decode_value(left_fields[key_col], raw))
        right_rows: list[Row] = []
        if values:
            bv = dict(self.bindvars)
            bv[node.batch_var] = list(values)
            res = await dispatch.execute(node.right, self.vcursor, bv)
            if self.right_fields is None and res.fields:
                self.right_fields = res.fields
            right_rows = res.rows
        right_fields = await self.fields()
        if self.left_key is None:
            self.left_key, self.right_key = key_functions(left_fields, right_fields, node.left_keys,
                                                          node.right_keys)
        assert self.right_key is not None
        table = build_table(right_rows, self.right_key)
        return probe(node.cols, rows, self.left_key, table, node.left_join, len(right_fields))


async def stream(node: BatchedJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    batches = _Batches(node, vcursor, bindvars)
    source = dispatch.stream(node.left, vcursor, bindvars)
    left_fields: list[Field] | None = None
    pending: list[Row] = []
    sent_fields = False

    async def emit(rows: list[Row]) -> AsyncGenerator[Result, None]:
        nonlocal sent_fields
        assert left_fields is not None
        out = await batches.join(left_fields, rows)
        if not sent_fields:
            sent_fields = True
            yield Result(fields=combine_fields(node.cols, left_fields, await batches.fields()), rows=out)
        elif out:
            yield Result(rows=out)

    try:
        async for chunk in source:
            if left_fields is None:
                left_fields = chunk.fields
            pending.extend(chunk.rows)
            while len(pending) >= node.batch_size:
                batch, pending = pending[:node.batch_size], pending[node.batch_size:]
                async for out in emit(batch):
                    yield out
    finally:
        await source.aclose()
    if left_fields is None:
        left_fields = (await dispatch.field_result(node.left, vcursor, bindvars)).fields
    if pending or not sent_fields:
        async for out in emit(pending):
            yield out
