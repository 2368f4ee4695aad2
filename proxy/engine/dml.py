"""Update and Delete: run the statement on the shards the WHERE clause picks.

Vindex equality -> one shard, IN -> those shards (each with its part of the list),
otherwise every shard. A DELETE on a table with owned lookup vindexes first reads the
rows it will delete (``SELECT ... FOR UPDATE`` with the same WHERE) and deletes their
lookup rows, as Vitess does."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine.destinations import map_values, targets
from proxy.engine.lookup import create_rows, delete_rows, lookup_shards
from proxy.engine.result import Result, decode_value
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Delete, ReferenceWrite, Update


async def _owned_rows(node: Update | Delete, vcursor: VCursor,
                      tg: list[tuple[str, Mapping[str, Any]]]) -> tuple[list[dict[str, Any]], list[bytes | None]]:
    """The rows the statement will touch (locked) and their keyspace ids."""
    assert node.owned_select is not None
    primary = vcursor.vschema.find_table(node.table, node.keyspace).column_vindexes[0]
    results = await vcursor.execute_multi(node.keyspace, [(s, node.owned_select.render(bv)) for s, bv in tg])
    rows: list[dict[str, Any]] = []
    for r in results:
        names = [f.name.lower() for f in r.fields]
        for row in r.rows:
            rows.append({n: (v if f.is_binary else decode_value(f, v))
                         for n, f, v in zip(names, r.fields, row, strict=True)})
    ksids = map_values(primary.vindex, [row[primary.columns[0].lower()] for row in rows]) if rows else []
    return rows, ksids


async def _delete_owned_lookups(node: Delete, vcursor: VCursor, tg: list[tuple[str, Mapping[str, Any]]]) -> None:
    rows, ksids = await _owned_rows(node, vcursor, tg)
    for cv in node.owned_lookups:
        from_values = [tuple(row[c.lower()] for c in cv.columns) for row in rows]
        await delete_rows(vcursor, cv.vindex, node.keyspace, from_values, ksids)  # type: ignore[arg-type]


async def _update_owned_lookups(node: Update, vcursor: VCursor, tg: list[tuple[str, Mapping[str, Any]]],
                                bindvars: Mapping[str, Any]) -> None:
    """For each row whose lookup columns change: delete the old lookup row, create the new."""
    rows, ksids = await _owned_rows(node, vcursor, tg)
    for cv, new_vals in node.owned_lookups:
        old_from, new_from, row_ksids = [], [], []
        for row, ksid in zip(rows, ksids, strict=True):
            old = tuple(row[c.lower()] for c in cv.columns)
            new = tuple(old[i] if v is None else v.resolve(bindvars) for i, v in enumerate(new_vals))
            if old == new:
                continue
            old_from.append(old)
            new_from.append(new)
            row_ksids.append(ksid)
        if not row_ksids:
            continue
        await delete_rows(vcursor, cv.vindex, node.keyspace, old_from, row_ksids)  # type: ignore[arg-type]  # owned rows always carry their keyspace id
        await create_rows(vcursor, cv.vindex, node.keyspace, new_from, row_ksids)  # type: ignore[arg-type]  # owned rows always carry their keyspace id


async def _targets(node: Update | Delete | ReferenceWrite, vcursor: VCursor,
                   bindvars: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    if getattr(node.vindex, "needs_lookup", False):
        # routed by a lookup vindex (as Vitess does): the shards its lookup rows name;
        # each runs the whole statement, whose WHERE still picks the rows
        values = [v.resolve(bindvars) for v in node.values]
        return [(s, bindvars) for s in await lookup_shards(vcursor, node.vindex, node.keyspace, values)]
    return targets(vcursor.vschema, node.opcode, node.keyspace, node.vindex, node.values, node.in_var,
                   bindvars, node.target_ksid, node.target_shard)


async def execute(node: Update | Delete | ReferenceWrite, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    tg = await _targets(node, vcursor, bindvars)
    if not tg:
        return Result()
    if isinstance(node, Delete) and node.owned_lookups:
        await _delete_owned_lookups(node, vcursor, tg)
    elif isinstance(node, Update) and node.owned_lookups:
        await _update_owned_lookups(node, vcursor, tg, bindvars)
    if len(tg) == 1:
        shard, bv = tg[0]
        return await vcursor.execute_shard(node.keyspace, shard, node.query.render(bv))
    results = await vcursor.execute_multi(node.keyspace, [(s, node.query.render(bv)) for s, bv in tg])
    if isinstance(node, ReferenceWrite):
        return results[0]  # every shard changed its own full copy the same way
    out = Result()
    for r in results:
        out.affected_rows += r.affected_rows
        out.warnings += r.warnings
    return out


async def stream(node: Update | Delete, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    yield await execute(node, vcursor, bindvars)
