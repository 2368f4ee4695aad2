"""InsertSelect: ``INSERT INTO t (cols) SELECT ...`` whose rows the proxy must route.

The SELECT (any plan) runs first; its rows become the rows of a multi-row Insert
(per-row vindex routing, auto_increment from the sequence, owned lookup rows)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from proxy.engine import dispatch
from proxy.engine import insert as insert_mod
from proxy.engine.result import Result, decode_value
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_WRONG_VALUE_COUNT_ON_ROW, ProxyError
from rewriter.nodes import AutoIncrement, DMLOpcode, Insert, InsertSelect, Val, VindexValues
from rewriter.sqltemplate import SqlTemplate


async def execute(node: InsertSelect, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    rows = await dispatch.execute(node.source, vcursor, bindvars)
    n_given = len(node.columns) - (1 if node.auto_appended else 0)
    if rows.fields and len(rows.fields) != n_given:
        raise ProxyError(ER_WRONG_VALUE_COUNT_ON_ROW, "Column count doesn't match value count at row 1")
    if not rows.rows:
        return Result()
    bv: dict[str, Any] = dict(bindvars)
    fields = rows.fields
    row_tpls: list[SqlTemplate] = []
    for i, raw in enumerate(rows.rows):
        names = []
        for j, (f, v) in enumerate(zip(fields, raw, strict=True)):
            name = f"__r{i}c{j}"
            bv[name] = v if f.is_binary else decode_value(f, v)
            names.append(name)
        if node.auto_appended:
            name = f"__r{i}c{n_given}"
            bv[name] = None
            names.append(name)
        row_tpls.append(SqlTemplate(("(",) + (", ",) * (len(names) - 1) + (")",), tuple(names)))
    n = len(rows.rows)
    auto = None
    if node.auto_column is not None and node.sequence is not None:
        var_names = tuple(f"__r{i}c{node.auto_column}" for i in range(n))
        auto = AutoIncrement(node.columns[node.auto_column], node.sequence[0], node.sequence[1],
                             var_names, tuple(Val(name=v) for v in var_names))
    vindex_values = [
        VindexValues(name, vindex, tuple(node.columns[p] for p in positions),
                     tuple(tuple(Val(name=f"__r{i}c{p}") for p in positions) for i in range(n)), owned)
        for name, vindex, positions, owned in node.vindex_columns
    ]
    opcode = DMLOpcode.Sharded if node.sharded else DMLOpcode.Unsharded
    insert = Insert(opcode, node.keyspace, node.table, node.prefix, row_tpls, node.suffix, node.columns,
                    vindex_values=vindex_values, auto_increment=auto, ignore=node.ignore,
                    target_ksid=node.target_ksid)
    return await insert_mod.execute(insert, vcursor, bv)


async def stream(node: InsertSelect, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    yield await execute(node, vcursor, bindvars)
