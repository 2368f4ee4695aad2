"""SemiJoin: keep the outer rows a correlated ``[NOT] EXISTS`` / ``[NOT] IN`` admits.

The subquery's keys are read once (one scatter) and hashed as HashJoin hashes its right
side (proxy.engine.join_keys: numbers by value, ``*_general_ci`` text by its weights);
the outer rows then stream through, in their order, their key in the last column:

- ``EXISTS`` / ``IN``: kept when the key matches (a NULL key matches nothing);
- ``NOT EXISTS``: kept when it does not (a NULL key included);
- ``NOT IN``: with no inner rows every row is kept (NULL keys too); otherwise a row is
  kept only when its key is not NULL, matches nothing and the keys hold no NULL
  (``x NOT IN (..., NULL)`` is never true).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.join_keys import RowKey, key_functions
from proxy.engine.result import Field, Result, Row
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from rewriter.nodes import SemiJoin


async def execute(node: SemiJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


def _admits(kind: str, outer_key: RowKey, inner_rows: list[Row], inner_key: RowKey) -> Callable[[Row], bool]:
    keys = set()
    inner_null = False
    for r in inner_rows:
        k = inner_key(r)
        if k is None:
            inner_null = True
        else:
            keys.add(k)
    if kind in ("exists", "in"):
        return lambda row: (k := outer_key(row)) is not None and k in keys
    if kind == "not_exists":
        return lambda row: (k := outer_key(row)) is None or k not in keys
    if not inner_rows:
        return lambda row: True
    if inner_null:
        return lambda row: False
    return lambda row: (k := outer_key(row)) is not None and k not in keys


async def stream(node: SemiJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    inner = await dispatch.execute(node.inner, vcursor, bindvars)
    inner_fields = inner.fields or (await dispatch.field_result(node.inner, vcursor, bindvars)).fields
    source = dispatch.stream(node.outer, vcursor, bindvars)
    outer_fields: list[Field] | None = None
    admits: Callable[[Row], bool] | None = None
    try:
        async for chunk in source:
            if outer_fields is None:
                outer_fields = chunk.fields
                key_col = len(outer_fields) - 1
                outer_key, inner_key = key_functions(outer_fields, inner_fields, [key_col], [0])
                admits = _admits(node.kind, outer_key, inner.rows, inner_key)
                inner.rows = []  # the key set holds them now
                yield Result(fields=outer_fields[:-1], rows=[r[:-1] for r in chunk.rows if admits(r)])
                continue
            assert admits is not None
            rows = [r[:-1] for r in chunk.rows if admits(r)]
            if rows:
                yield Result(rows=rows)
    finally:
        await source.aclose()
    if outer_fields is None:
        fields = (await dispatch.field_result(node.outer, vcursor, bindvars)).fields
        yield Result(fields=fields[:-1])
