"""Compute: finish a statement on one shard's server over temporary copies of its inputs.

On a scratch connection to the compute shard (not the session's transaction: the
inputs are read through the session, so a transaction sees its own writes), each
input becomes a temporary table:

1. created empty with the table's own column types (``CREATE TEMPORARY TABLE ... AS
   SELECT ... WHERE FALSE``, with indexes on its join keys), or from the fetched
   column definitions when the compute shard does not hold the table;
2. the compute shard's own rows copied in place (``INSERT ... SELECT``) when no
   transaction is open, the other shards' rows fetched through the session and
   inserted in batches of literal rows;
3. an input with a reduction whose source produced at most ``REDUCTION_LIMIT``
   distinct values is fetched with those values as an ``IN`` list.

Then the statement runs there and its result streams back; the temporary tables are
dropped in a ``finally`` (a broken connection takes them with it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine import dispatch
from proxy.engine.result import BINARY_CHARSET, Field, Result, decode_value, literal_kind
from proxy.engine.route import route_targets
from proxy.engine.stream_util import collect
from proxy.engine.vcursor import VCursor
from rewriter.nodes import Compute, Opcode, Plan, Route, TempInput
from rewriter.sqltemplate import SqlTemplate
from sqltext.quoting import quote_identifier, text_value_literal

# Distinct values of a join key up to which a later input is fetched by IN list
# rather than whole (an IN list of 50k integers is ~0.4 MB of SQL; a 600k-row TPC-H
# SF 0.1 lineitem fetched whole through the proxy takes seconds).
REDUCTION_LIMIT = 50_000
# Bytes of literal rows per INSERT (well under max_allowed_packet's 16 MiB default).
INSERT_BATCH_BYTES = 1 << 20


async def execute(node: Compute, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: Compute, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    async with vcursor.scratch(node.keyspace, node.shard) as conn:
        created: list[str] = []
        try:
            values: dict[tuple[int, int], list[Any] | None] = {}
            wanted = {(r.from_input, r.from_column) for i in node.inputs for r in i.reductions}
            for pos, inp in enumerate(node.inputs):
                keep = sorted(col for (src, col) in wanted if src == pos)
                collected = await _load(inp, node, conn, vcursor, bindvars, values, keep, created)
                for col, vals in collected.items():
                    values[(pos, col)] = vals
            sql = node.query.render(bindvars)
            gen = conn.stream(sql)
            first = True
            try:
                async for chunk in gen:
                    if first and chunk.fields:
                        chunk.fields = _output_fields(node, chunk.fields, bindvars)
                        first = False
                    yield chunk
            finally:
                await gen.aclose()
        finally:
            if created and not conn.broken:
                await conn.execute("DROP TEMPORARY TABLE IF EXISTS "
                                   + ", ".join(quote_identifier(n) for n in created))


async def _load(inp: TempInput, node: Compute, conn: Any, vcursor: VCursor,
                bindvars: Mapping[str, Any], values: Mapping[tuple[int, int], list[Any] | None],
                keep: list[int], created: list[str]) -> dict[int, list[Any] | None]:
    """Fill ``inp``'s temporary table; returns the distinct values of the ``keep``
    columns (None for a column with more than REDUCTION_LIMIT of them), read back
    from the table (rows copied in place never pass through the proxy)."""
    source: Plan = inp.source
    bv: dict[str, Any] = dict(bindvars)
    available = [(red, values.get((red.from_input, red.from_column))) for red in inp.reductions]
    usable = [(red, vals) for red, vals in available if vals is not None]
    if inp.all_reduced is not None and usable and len(usable) == len(available):
        # every reduction applies: fetch rows that pass all of them
        source = inp.all_reduced
        for red, vals in usable:
            bv[red.var] = vals if vals else [None]
    elif usable:
        red, vals = min(usable, key=lambda rv: len(rv[1]))  # type: ignore[arg-type]
        source = red.source
        bv[red.var] = vals if vals else [None]
    name = quote_identifier(inp.name)
    columns = ", ".join(quote_identifier(c) for c in inp.columns) if inp.columns else ""
    into = f"INSERT INTO {name} ({columns}) " if columns else f"INSERT INTO {name} "
    if inp.create is not None:
        await conn.execute(inp.create.render(bv))
    else:
        empty = await dispatch.field_result(source, vcursor, bv)
        await conn.execute(_create_from_fields(inp, empty.fields))
    created.append(inp.name)
    chunks: list[AsyncIterator[Result]] = []
    if isinstance(source, Route):
        targets = route_targets(source, vcursor, bv)
        local = (inp.local_query is not None and inp.create is not None
                 and not vcursor.in_transaction)
        if local and source.opcode is Opcode.Reference:
            targets = [(node.shard, bv)]
        if local and any(s == node.shard for s, _ in targets):
            local_bv = next(b for s, b in targets if s == node.shard)
            # A consistent read, as the SELECT alone would be: INSERT ... SELECT under
            # REPEATABLE READ locks the rows it reads, waiting for every open transaction
            # that holds one (a topic's uncommitted messages, any uncommitted row). No
            # SESSION: the level holds for the next transaction only (this autocommit copy).
            await conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            await conn.execute(into + source.query.render(local_bv))
            targets = [(s, b) for s, b in targets if s != node.shard]
        chunks = [vcursor.stream_shard(source.keyspace, s, source.query.render(b)) for s, b in targets]
    else:
        chunks = [dispatch.stream(source, vcursor, bv)]
    batch: list[str] = []
    size = 0
    fields: list[Field] = []
    for gen in chunks:
        try:
            async for chunk in gen:
                if chunk.fields and not fields:
                    fields = chunk.fields
                if not chunk.rows:
                    continue
                kinds = [literal_kind(f) for f in fields]
                for row in chunk.rows:
                    text = "(" + ",".join(text_value_literal(v, k) for v, k in zip(row, kinds, strict=True)) + ")"
                    batch.append(text)
                    size += len(text)
                    if size >= INSERT_BATCH_BYTES:
                        await conn.execute(into + "VALUES " + ",".join(batch))
                        batch, size = [], 0
        finally:
            await gen.aclose()  # type: ignore[attr-defined]  # the shard streams are async generators
    if batch:
        await conn.execute(into + "VALUES " + ",".join(batch))
    out: dict[int, list[Any] | None] = {}
    for c in keep:
        col = quote_identifier(inp.columns[c])
        res = await conn.execute(f"SELECT DISTINCT {col} FROM {name} WHERE {col} IS NOT NULL "
                                 f"LIMIT {REDUCTION_LIMIT + 1}")
        if len(res.rows) > REDUCTION_LIMIT:
            out[c] = None
        else:
            out[c] = [decode_value(res.fields[0], r[0]) for r in res.rows]
    return out


_TYPE_DDL = {
    ColumnType.TINY: "TINYINT", ColumnType.SHORT: "SMALLINT", ColumnType.INT24: "MEDIUMINT",
    ColumnType.LONG: "INT", ColumnType.LONGLONG: "BIGINT", ColumnType.YEAR: "YEAR",
    ColumnType.FLOAT: "FLOAT", ColumnType.DOUBLE: "DOUBLE", ColumnType.DATE: "DATE",
    ColumnType.TIME: "TIME", ColumnType.JSON: "JSON",
}


# Strings whose declared length is known keep it (a VARCHAR, not a LONGTEXT: the client
# sees the column's own type, VAR_STRING, not BLOB) while the temporary table's row stays
# under MySQL's 65,535-byte row size; longer ones, and the rest, are LONGTEXT / LONGBLOB.
VARCHAR_MAX_CHARS = 1024
ROW_BYTES_BUDGET = 60_000
_BYTES_PER_CHAR = {BINARY_CHARSET: 1, 8: 1, 33: 3, 83: 3, 192: 3}  # else utf8mb4: 4


def _varchar_bytes(f: Field) -> int:
    """The bytes a VARCHAR / VARBINARY of ``f``'s declared length takes in a row, 0 when
    ``f`` is not such a string or its length is unknown or large."""
    if f.type not in (ColumnType.VAR_STRING, ColumnType.VARCHAR) or f.length <= 0:
        return 0
    per_char = _BYTES_PER_CHAR.get(f.charset, 4)
    chars = -(-f.length // per_char)
    return chars * per_char + 2 if chars <= VARCHAR_MAX_CHARS else 0


def _column_ddl(f: Field, varchar: bool = False) -> str:
    t = f.type
    if varchar:
        per_char = _BYTES_PER_CHAR.get(f.charset, 4)
        chars = -(-f.length // per_char)
        if f.charset == BINARY_CHARSET:
            return f"VARBINARY({chars})"
        collate = " COLLATE utf8mb4_bin" if f.charset == 46 else ""
        return f"VARCHAR({chars}) CHARACTER SET utf8mb4{collate}"
    unsigned = " UNSIGNED" if f.unsigned else ""
    if t in _TYPE_DDL:
        base = _TYPE_DDL[t]
        if t in (ColumnType.TIME,) and f.decimals:
            base += f"({min(f.decimals, 6)})"
        return base + (unsigned if t not in (ColumnType.DATE, ColumnType.TIME, ColumnType.YEAR, ColumnType.JSON) else "")
    if t in (ColumnType.DECIMAL, ColumnType.NEWDECIMAL):
        scale = f.decimals
        precision = max(1, f.length - (1 if scale else 0) - (0 if f.unsigned else 1))
        return f"DECIMAL({min(precision, 65)},{min(scale, 38)}){unsigned}"
    if t in (ColumnType.DATETIME, ColumnType.TIMESTAMP):
        return "DATETIME" + (f"({min(f.decimals, 6)})" if 0 < f.decimals <= 6 else "")
    if t == ColumnType.BIT:
        return f"BIT({max(1, min(f.length, 64))})"
    if f.charset == BINARY_CHARSET:
        return "LONGBLOB"
    return "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" if f.charset == 46 else "LONGTEXT CHARACTER SET utf8mb4"


def _create_from_fields(inp: TempInput, fields: list[Field]) -> str:
    budget = ROW_BYTES_BUDGET
    ddl = []
    for f in fields:
        size = _varchar_bytes(f)
        varchar = 0 < size <= budget
        budget -= size if varchar else 12  # a LONGTEXT / number takes at most 12 bytes in the row
        ddl.append(f"{quote_identifier(f.name)} {_column_ddl(f, varchar)}")
    cols = ", ".join(ddl)
    return f"CREATE TEMPORARY TABLE {quote_identifier(inp.name)} ({cols})"


def _output_fields(node: Compute, fields: list[Field], bindvars: Mapping[str, Any]) -> list[Field]:
    out = []
    for i, f in enumerate(fields):
        name = node.output_names[i] if i < len(node.output_names) else None
        org = node.original_tables.get(f.org_table)
        if name is None and org is None:
            out.append(f)
            continue
        changes: dict[str, Any] = {}
        if isinstance(name, SqlTemplate):
            changes["name"] = name.render(bindvars)
        if org is not None:
            changes["org_table"] = org
        out.append(dataclasses.replace(f, **changes))
    return out
