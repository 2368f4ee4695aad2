"""Running a lookup vindex's SQL (built by ``vschema.vindexes.lookup``) against the
lookup table's keyspace: reading keyspace ids for values, and creating / deleting
lookup rows for owned vindexes (with ``consistent_lookup``'s repair of stale rows
on a duplicate key).

Known difference from Vitess: lookup rows are written through the session's own
VCursor (inside its transaction when one is open), not on a separate pre-commit
connection."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from proxy.engine.result import Field, Result, decode_value
from proxy.engine.vcursor import VCursor
from proxy.errors import (
    ER_DUP_ENTRY,
    ER_NOT_SUPPORTED_YET,
    ER_UNKNOWN_ERROR,
    ProxyError,
    ShardError,
)
from sqltext.quoting import sql_literal

logger = logging.getLogger(__name__)


def render_params(sql: str, params: Sequence[Any]) -> str:
    """Substitute ``%s`` placeholders (the vindex builders' paramstyle) with literals."""
    parts = sql.split("%s")
    if len(parts) != len(params) + 1:
        raise ProxyError(ER_UNKNOWN_ERROR, f"lookup query expects {len(parts) - 1} values, got {len(params)}")
    out = [parts[0]]
    for p, rest in zip(params, parts[1:], strict=True):
        out.append(sql_literal(p))
        out.append(rest)
    return "".join(out)


def lookup_keyspace(vindex: Any, owner_keyspace: str) -> str:
    return getattr(vindex, "table_keyspace", None) or owner_keyspace


async def _run(vcursor: VCursor, keyspace: str, sql: str) -> list[Result]:
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


async def keyspace_ids(vcursor: VCursor, vindex: Any, owner_keyspace: str, values: Sequence[Any]) -> list[list[bytes] | None]:
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


async def lookup_shards(vcursor: VCursor, vindex: Any, keyspace: str, values: Sequence[Any]) -> list[str]:
    """The shards of ``keyspace`` holding the keyspace ids the lookup table maps
    ``values`` to (list values flattened, NULLs skipped), in first-seen order."""
    flat: list[Any] = []
    for x in values:
        flat.extend(x if isinstance(x, list | tuple) else [x])
    per_value = await keyspace_ids(vcursor, vindex, keyspace, [v for v in flat if v is not None])
    vs = vcursor.vschema
    shards: dict[str, None] = {}
    for ksids in per_value:
        for k in ksids or []:
            shards[vs.shard_for(keyspace, k)] = None
    return list(shards)


async def create_rows(vcursor: VCursor, vindex: Any, owner_keyspace: str,
                      from_values: Sequence[Sequence[Any]], ksids: Sequence[bytes], ignore: bool = False) -> None:
    params = vindex.insert_rows(from_values, ksids)
    if not params:
        return
    flat = [p for row in params for p in row]
    sql = render_params(vindex.insert_query(len(params), ignore=ignore), flat)
    try:
        await _run_write(vcursor, lookup_keyspace(vindex, owner_keyspace), sql)
    except ShardError as e:
        if e.code != ER_DUP_ENTRY or not getattr(vindex, "consistent", False):
            raise
        # consistent lookups repair stale rows: retry row by row (the failed statement
        # inserted nothing)
        for row in params:
            await _create_consistent_row(vcursor, vindex, owner_keyspace, tuple(row))


async def _create_consistent_row(vcursor: VCursor, vindex: Any, owner_keyspace: str, row: tuple[Any, ...]) -> None:
    """Vitess's consistent_lookup on a duplicate: if the existing lookup row already
    points to this keyspace id, keep it; if its owner row is gone (stale lookup row),
    repoint it; if the owner row exists, it is a real duplicate (the MySQL error)."""
    ks = lookup_keyspace(vindex, owner_keyspace)
    from_values, to_value = row[:-1], row[-1]
    try:
        await _run_write(vcursor, ks, render_params(vindex.insert_query(1), list(row)))
        return
    except ShardError as e:
        if e.code != ER_DUP_ENTRY:
            raise
        duplicate = e
    locked = await _run(vcursor, ks, render_params(vindex.lock_lookup_query(), list(from_values)))
    existing = [r[0] for res in locked for r in res.rows]
    if not existing:
        raise duplicate  # the conflicting row vanished meanwhile: report what MySQL said
    new_ksid = vindex.ksid_from_row_value(to_value)
    old_ksid = vindex.ksid_from_row_value(existing[0])
    if old_ksid == new_ksid:
        return
    owner_ks = getattr(vindex, "owner_keyspace", None) or owner_keyspace
    shard = vcursor.vschema.shard_for(owner_ks, old_ksid)
    owner = await vcursor.execute_shard(owner_ks, shard, render_params(vindex.lock_owner_query(), list(from_values)))
    if owner.rows:
        raise duplicate
    await _run_write(vcursor, ks, render_params(vindex.update_lookup_query(), [to_value, *from_values]))
    logger.info("stale consistent lookup row repointed",
                extra={"vindex": vindex.name, "table": vindex.table, "from": repr(from_values)})


async def delete_rows(vcursor: VCursor, vindex: Any, owner_keyspace: str,
                      from_values: Sequence[Sequence[Any]], ksids: Sequence[bytes]) -> None:
    if not getattr(vindex, "deletes_rows", True):
        return
    for row, ksid in zip(from_values, ksids, strict=True):
        if any(v is None for v in row):
            continue
        sql = render_params(vindex.delete_query(), [*row, vindex.row_value_for_ksid(ksid)])
        await _run_write(vcursor, lookup_keyspace(vindex, owner_keyspace), sql)


async def _run_write(vcursor: VCursor, keyspace: str, sql: str) -> None:
    shards = vcursor.vschema.shards(keyspace)
    if len(shards) != 1:
        raise ProxyError(ER_NOT_SUPPORTED_YET, f"VT12001: unsupported: lookup table in sharded keyspace {keyspace}")
    await vcursor.execute_shard(keyspace, shards[0], sql)
