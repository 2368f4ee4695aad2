"""SemiJoin: keep the outer rows a correlated ``[NOT] EXISTS`` / ``[NOT] IN`` admits.

The subquery's keys are read once (one scatter) and hashed as HashJoin hashes its right
side (proxy.engine.join_keys: numbers by value, ``*_general_ci`` text by its weights);
the outer rows then stream through, in their order, their key in the last column:

- ``EXISTS`` / ``IN``: kept when the key matches (a NULL key matches nothing);
- ``NOT EXISTS``: kept when it does not (a NULL key included);
- ``NOT IN``: with no inner rows every row is kept (NULL keys too); otherwise a row is
  kept only when its key is not NULL, matches nothing and the keys hold no NULL
  (``x NOT IN (..., NULL)`` is never true).

Batched (``node.batch_var``: a small outer side, a large inner one): the outer rows are
taken in batches, and the subquery runs once per batch for just the batch's distinct
keys (``IN`` list), as BatchedJoin looks its right side up. A batch's keys decide
EXISTS, IN and NOT EXISTS alone; NOT IN's rules depend on the whole set (is it empty?
does it hold a NULL?), which no batch shows: ``node.probe`` asks the subquery that once,
before any batch, and the batches only find the matches.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine.join_keys import RowKey, key_functions
from proxy.engine.result import Field, Result, Row, decode_value
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


def _batch_admits(kind: str, outer_key: RowKey, keys: set[Any]) -> Callable[[Row], bool]:
    """Which rows of a batch pass, given the subquery's keys matching the batch's keys
    (for NOT IN: a set known to be neither empty nor holding a NULL)."""
    if kind in ("exists", "in"):
        return lambda row: (k := outer_key(row)) is not None and k in keys
    if kind == "not_exists":
        return lambda row: (k := outer_key(row)) is None or k not in keys
    return lambda row: (k := outer_key(row)) is not None and k not in keys


async def _outer_fields(node: SemiJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> list[Field]:
    return (await dispatch.field_result(node.outer, vcursor, bindvars)).fields


async def _stream_batched(node: SemiJoin, vcursor: VCursor,
                          bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    everything = False  # NOT IN over an empty set: every outer row passes
    if node.kind == "not_in":
        assert node.probe is not None
        flags = {r[0] for r in (await dispatch.execute(node.probe, vcursor, bindvars)).rows}
        if any(f is not None and f != b"0" for f in flags):
            # the set holds a NULL: NOT IN is never true, no outer row is read
            yield Result(fields=(await _outer_fields(node, vcursor, bindvars))[:-1])
            return
        everything = not flags
    bv = dict(bindvars)
    bv[node.batch_var] = [None]
    inner_fields = (await dispatch.field_result(node.inner, vcursor, bv)).fields
    source = dispatch.stream(node.outer, vcursor, bindvars)
    outer_fields: list[Field] | None = None
    outer_key: RowKey | None = None
    inner_key: RowKey | None = None
    pending: list[Row] = []
    sent_fields = False

    async def admitted(rows: list[Row]) -> list[Row]:
        assert outer_fields is not None and outer_key is not None and inner_key is not None
        if everything:
            return [r[:-1] for r in rows]
        key_col = len(outer_fields) - 1
        values: dict[Any, None] = {}
        for r in rows:
            raw = r[key_col]
            if raw is not None:
                values.setdefault(decode_value(outer_fields[key_col], raw))
        keys: set[Any] = set()
        if values:
            batch_bv = dict(bindvars)
            batch_bv[node.batch_var] = list(values)
            for r in (await dispatch.execute(node.inner, vcursor, batch_bv)).rows:
                k = inner_key(r)
                if k is not None:
                    keys.add(k)
        admits = _batch_admits(node.kind, outer_key, keys)
        return [r[:-1] for r in rows if admits(r)]

    try:
        async for chunk in source:
            if outer_fields is None:
                outer_fields = chunk.fields
                outer_key, inner_key = key_functions(outer_fields, inner_fields, [len(outer_fields) - 1], [0])
            pending.extend(chunk.rows)
            while len(pending) >= node.batch_size:
                batch, pending = pending[:node.batch_size], pending[node.batch_size:]
                rows = await admitted(batch)
                if not sent_fields or rows:
                    yield Result(fields=[] if sent_fields else outer_fields[:-1], rows=rows)
                    sent_fields = True
    finally:
        await source.aclose()
    if outer_fields is None:
        yield Result(fields=(await _outer_fields(node, vcursor, bindvars))[:-1])
        return
    rows = await admitted(pending) if pending else []
    if not sent_fields or rows:
        yield Result(fields=[] if sent_fields else outer_fields[:-1], rows=rows)


async def stream(node: SemiJoin, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    if node.batch_var:
        batched = _stream_batched(node, vcursor, bindvars)
        try:
            async for chunk in batched:
                yield chunk
        finally:
            await batched.aclose()
        return
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
