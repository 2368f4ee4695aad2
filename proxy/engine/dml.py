"""Update and Delete: run the statement on the shards the WHERE clause picks.

Vindex equality -> one shard, IN -> those shards (each with its part of the list),
otherwise every shard. A DELETE on a table with owned lookup vindexes first reads the
rows it will delete (``SELECT ... FOR UPDATE`` with the same WHERE) and deletes their
lookup rows, as Vitess does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from proxy.engine.destinations import map_values, targets
from proxy.engine.lookup import delete_rows
from proxy.engine.result import Result, decode_value
from rewriter.nodes import Delete, Update


async def _delete_owned_lookups(node: Delete, vcursor: Any, tg: list[tuple[str, Mapping[str, Any]]]) -> None:
    assert node.owned_select is not None
    vs = vcursor.vschema
    table = vs.find_table(node.table, node.keyspace)
    primary = table.column_vindexes[0]
    queries = [(shard, node.owned_select.render(bv)) for shard, bv in tg]
    results = await vcursor.execute_multi(node.keyspace, queries)
    rows: list[dict[str, Any]] = []
    for r in results:
        names = [f.name.lower() for f in r.fields]
        for row in r.rows:
            rows.append({n: (v if f.is_binary else decode_value(f, v))
                         for n, f, v in zip(names, r.fields, row, strict=True)})
    if not rows:
        return
    ksids = map_values(primary.vindex, [row[primary.columns[0].lower()] for row in rows])
    for cv in node.owned_lookups:
        from_values = [tuple(row[c.lower()] for c in cv.columns) for row in rows]
        await delete_rows(vcursor, cv.vindex, node.keyspace, from_values, ksids)  # type: ignore[arg-type]


async def execute(node: Update | Delete, vcursor: Any, bindvars: Mapping[str, Any]) -> Result:
    tg = targets(vcursor.vschema, node.opcode, node.keyspace, node.vindex, node.values, node.in_var,
                 bindvars, node.target_ksid, node.target_shard)
    if not tg:
        return Result()
    if isinstance(node, Delete) and node.owned_lookups:
        await _delete_owned_lookups(node, vcursor, tg)
    if len(tg) == 1:
        shard, bv = tg[0]
        return await vcursor.execute_shard(node.keyspace, shard, node.query.render(bv))
    results = await vcursor.execute_multi(node.keyspace, [(s, node.query.render(bv)) for s, bv in tg])
    out = Result()
    for r in results:
        out.affected_rows += r.affected_rows
        out.warnings += r.warnings
    return out


async def stream(node: Update | Delete, vcursor: Any, bindvars: Mapping[str, Any]) -> AsyncIterator[Result]:
    yield await execute(node, vcursor, bindvars)
