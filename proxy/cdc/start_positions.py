"""Turn a start request (``current``, ``beginning``, a VGTID, a time) into one GTID
position per shard, asking the shards where needed."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import pymysql

from proxy.cdc.binlog_decoder import ShardEndpointLike, connect_shard, connection_kwargs
from proxy.cdc.errors import InvalidPositionError, ShardUnavailableError
from proxy.cdc.positions import GTID_BEGINNING, GTID_CURRENT, GtidPosition, Vgtid
from proxy.cdc.table_filter import TableFilter

ShardKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class ResolvedStart:
    positions: dict[ShardKey, GtidPosition]
    skip_before_timestamp: int | None = None


def _query_one(endpoint: ShardEndpointLike, sql: str) -> tuple:
    conn = connect_shard(**connection_kwargs(endpoint))
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()
    finally:
        conn.close()


def current_position(endpoint: ShardEndpointLike) -> GtidPosition:
    """The shard's binlog position now (``@@GLOBAL.gtid_binlog_pos``)."""
    rows = _query_one(endpoint, "SELECT @@GLOBAL.gtid_binlog_pos")
    return GtidPosition.parse(rows[0][0] or "")


def _earliest_position(endpoint: ShardEndpointLike) -> GtidPosition:
    """The GTID position at the start of the oldest binlog the shard still holds (an empty
    position is refused by the server once anything was purged)."""
    logs = _query_one(endpoint, "SHOW BINARY LOGS")
    if not logs:
        raise InvalidPositionError("binary logging is off on the shard")
    first = str(logs[0][0]).replace("'", "''")
    rows = _query_one(endpoint, f"SELECT BINLOG_GTID_POS('{first}', 4)")
    return GtidPosition.parse(rows[0][0] or "")


async def _resolve_one(
    key: ShardKey, endpoint: ShardEndpointLike, gtid: str
) -> tuple[ShardKey, GtidPosition]:
    try:
        if gtid == GTID_CURRENT:
            return key, await asyncio.to_thread(current_position, endpoint)
        if gtid in (GTID_BEGINNING, ""):
            return key, await asyncio.to_thread(_earliest_position, endpoint)
    except pymysql.OperationalError as exc:
        raise ShardUnavailableError(
            key[0], key[1], f"cannot read the shard's binlog position: {exc.args}"
        ) from exc
    return key, GtidPosition.parse(gtid)


def to_epoch_seconds(since: float | datetime) -> int:
    """Binlog times are whole seconds: start at the second containing ``since`` (events
    of that second committed just before ``since`` are included)."""
    value = since.timestamp() if isinstance(since, datetime) else float(since)
    return math.floor(value)


async def resolve_start(
    endpoints: Mapping[ShardKey, ShardEndpointLike],
    table_filter: TableFilter,
    start: str | Vgtid,
    since: float | datetime | None = None,
) -> ResolvedStart:
    if since is not None:
        if start not in (GTID_CURRENT, GTID_BEGINNING):
            raise InvalidPositionError("give either a start position or since=, not both")
        start = GTID_BEGINNING
    if isinstance(start, str) and start in (GTID_CURRENT, GTID_BEGINNING):
        wanted = {key: start for key in endpoints if table_filter.includes_keyspace(key[0])}
    else:
        vgtid = start if isinstance(start, Vgtid) else Vgtid.from_json(start)
        wanted = {}
        for entry in vgtid.shard_gtids:
            if entry.shard:
                key = (entry.keyspace, entry.shard)
                if key not in endpoints:
                    raise InvalidPositionError(
                        f"VGTID names unknown shard {entry.keyspace}/{entry.shard}"
                    )
                wanted[key] = entry.gtid
                continue
            if entry.gtid not in (GTID_CURRENT, GTID_BEGINNING, ""):
                raise InvalidPositionError(
                    f"VGTID entry for all shards of {entry.keyspace!r} needs gtid 'current'"
                    f" or 'beginning', not {entry.gtid!r}"
                )
            shards = [key for key in endpoints if key[0] == entry.keyspace]
            if not shards:
                raise InvalidPositionError(f"VGTID names unknown keyspace {entry.keyspace!r}")
            for key in shards:
                wanted[key] = entry.gtid or GTID_BEGINNING
    if not wanted:
        raise InvalidPositionError("the table filter selects no keyspace of this cluster")
    resolved = await asyncio.gather(
        *(_resolve_one(key, endpoints[key], gtid) for key, gtid in wanted.items())
    )
    return ResolvedStart(
        positions=dict(resolved),
        skip_before_timestamp=to_epoch_seconds(since) if since is not None else None,
    )
