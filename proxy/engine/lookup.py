"""Running a lookup vindex's SQL (built by ``vschema.vindexes.lookup``) against the
lookup table's keyspace: reading keyspace ids for values, and creating / deleting
lookup rows for owned vindexes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.engine.result import Field, Result, decode_value
from proxy.errors import ProxyError
from rewriter.sqltemplate import sql_literal


def render_params(sql: str, params: Sequence[Any]) -> str:
    """Substitute ``%s`` placeholders (the vindex builders' paramstyle) with literals."""
    parts = sql.split("%s")
    if len(parts) != len(params) + 1:
        raise ProxyError(1105, f"lookup query expects {len(parts) - 1} values, got {len(params)}")
    out = [parts[0]]
    for p, rest in zip(params, parts[1:], strict=True):
        out.append(sql_literal(p))
        out.append(rest)
    return "".join(out)


def lookup_keyspace(vindex: Any, owner_keyspace: str) -> str:
    return getattr(vindex, "table_keyspace", None) or owner_keyspace


async def _run(vcursor: Any, keyspace: str, sql: str) -> list[Result]:
    vs = vcursor.vschema
    shards = vs.shards(keyspace)
    if len(shards) == 1:
        return [await vcursor.execute_shard(keyspace, shards[0], sql)]
    # a lookup table in a sharded keyspace: ask every shard (correct, if slower)
    return await vcursor.execute_multi(keyspace, [(s, sql) for s in shards])


def _decoded_rows(results: list[Result]) -> list[tuple[Any, ...]]:
    rows = []
    for r in results:
        fields: list[Field] = r.fields
        for row in r.rows:
            rows.append(tuple(decode_value(f, v) if not f.is_binary else v
                              for f, v in zip(fields, row, strict=True)))
    return rows


async def keyspace_ids(vcursor: Any, vindex: Any, owner_keyspace: str, values: Sequence[Any]) -> list[list[bytes] | None]:
    """Per value, the keyspace ids the lookup table holds (None: not found)."""
    ks = lookup_keyspace(vindex, owner_keyspace)
    values = list(values)
    if not values:
        return []
    if vindex.batchable(values):
        rows = _decoded_rows(await _run(vcursor, ks, render_params(vindex.lookup_query(len(values)), values)))
        per_value = vindex.ksids_from_rows(values, rows)
    else:
        per_value = []
        for v in values:
            rows = _decoded_rows(await _run(vcursor, ks, render_params(vindex.lookup_query(1), [v])))
            per_value.extend(vindex.ksids_from_rows([v], rows))
    return vindex.destinations(per_value)


async def create_rows(vcursor: Any, vindex: Any, owner_keyspace: str,
                      from_values: Sequence[Sequence[Any]], ksids: Sequence[bytes], ignore: bool = False) -> None:
    params = vindex.insert_rows(from_values, ksids)
    if not params:
        return
    flat = [p for row in params for p in row]
    sql = render_params(vindex.insert_query(len(params), ignore=ignore), flat)
    await _run_write(vcursor, lookup_keyspace(vindex, owner_keyspace), sql)


async def delete_rows(vcursor: Any, vindex: Any, owner_keyspace: str,
                      from_values: Sequence[Sequence[Any]], ksids: Sequence[bytes]) -> None:
    if not getattr(vindex, "deletes_rows", True):
        return
    for row, ksid in zip(from_values, ksids, strict=True):
        if any(v is None for v in row):
            continue
        sql = render_params(vindex.delete_query(), [*row, vindex.row_value_for_ksid(ksid)])
        await _run_write(vcursor, lookup_keyspace(vindex, owner_keyspace), sql)


async def _run_write(vcursor: Any, keyspace: str, sql: str) -> None:
    shards = vcursor.vschema.shards(keyspace)
    if len(shards) != 1:
        raise ProxyError(1235, f"VT12001: unsupported: lookup table in sharded keyspace {keyspace}")
    await vcursor.execute_shard(keyspace, shards[0], sql)
