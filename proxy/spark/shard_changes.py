"""Read one shard's change events between two binlog positions, deterministically.

A micro-batch covers, per shard, the transactions after the start position up to and including
the end position. Both are GTID positions, and the binlog between them never changes, so
reading the same range again (after a crash, from Spark's checkpoint) yields the same rows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from proxy.cdc import (
    CommitEvent,
    EventGroup,
    Gtid,
    GtidPosition,
    RowEvent,
    ShardGtid,
    Vgtid,
    VStream,
)
from proxy.cdc.json_values import dumps, json_row
from proxy.cdc.start_positions import current_position
from proxy.resharding.journal import Journal
from proxy.spark.topology import ShardEndpointSpec

logger = logging.getLogger(__name__)

# How long a range read may take to reach its end position before it gives up (a shard that
# is down or whose binlog was purged must fail the batch, never shorten it).
RANGE_READ_TIMEOUT_S = 120.0
# Idle time after which the stream reports where it is (that is how a read learns that the
# shard moved past transactions of other tables up to the end position).
IDLE_REPORT_S = 0.2


@dataclass(frozen=True)
class ShardRange:
    keyspace: str
    shard: str
    start: str  # GTID position, exclusive
    end: str  # GTID position, inclusive


def reached(position: GtidPosition, end: GtidPosition) -> bool:
    return all(position.includes(gtid) for gtid in end)


async def read_shard_range(
    endpoint: ShardEndpointSpec,
    tables: Sequence[str],
    rng: ShardRange,
    vgtid_base: Vgtid,
) -> list[tuple]:
    """The change rows of `rng`, in binlog order; `vgtid_base` gives the other shards'
    positions for the per-row `vgtid` column."""
    end = GtidPosition.parse(rng.end)
    if reached(GtidPosition.parse(rng.start), end):
        return []
    key = (rng.keyspace, rng.shard)
    others = [g for g in vgtid_base.shard_gtids if (g.keyspace, g.shard) != key]
    start = Vgtid([ShardGtid(rng.keyspace, rng.shard, rng.start)])
    rows: list[tuple] = []
    async with VStream(
        {key: endpoint},
        list(tables),
        start=start,
        heartbeat_interval=IDLE_REPORT_S,
        shard_heartbeat_period=IDLE_REPORT_S,
        end_shards_at_journal=True,  # a range never crosses a resharding journal (see journal_boundary)
    ) as stream:
        async with asyncio.timeout(RANGE_READ_TIMEOUT_S):
            async for group in stream:
                if not group.is_heartbeat:
                    commit = next((e for e in group.events if isinstance(e, CommitEvent)), None)
                    if commit is not None and not end.includes(Gtid.parse(commit.gtid)):
                        break  # committed after the range: the next batch's
                    rows.extend(_rows_of(group, commit, others, rng))
                position = stream.vgtid.position_of(rng.keyspace, rng.shard)
                if position is not None and reached(GtidPosition.parse(position), end):
                    break
    logger.info(
        "shard change range read",
        extra={"keyspace": rng.keyspace, "shard": rng.shard, "start": rng.start, "end": rng.end, "rows": len(rows)},
    )
    return rows


async def journal_boundary(
    endpoint: ShardEndpointSpec, tables: Sequence[str], keyspace: str, shard: str, begin: str
) -> tuple[str, Journal | None]:
    """How far a shard that no longer serves (a reshard's source) can be read from ``begin``:
    up to its resharding journal — (the position before the journal, the journal) — or, if its
    binlog holds none after ``begin``, up to its position now (and None). Nothing after a journal
    belongs to the stream (the targets carry on from it)."""
    key = (keyspace, shard)
    end = await asyncio.to_thread(current_position, endpoint)
    if reached(GtidPosition.parse(begin), end):
        return str(end), None
    async with VStream(
        {key: endpoint},
        list(tables),
        start=Vgtid([ShardGtid(keyspace, shard, begin)]),
        heartbeat_interval=IDLE_REPORT_S,
        shard_heartbeat_period=IDLE_REPORT_S,
        end_shards_at_journal=True,
    ) as stream:
        async with asyncio.timeout(RANGE_READ_TIMEOUT_S):
            async for _group in stream:
                position = stream.vgtid.position_of(keyspace, shard)
                if position is not None and reached(GtidPosition.parse(position), end):
                    return str(end), None
        return stream.vgtid.position_of(keyspace, shard) or begin, stream.journals.get(key)


def _rows_of(group: EventGroup, commit: CommitEvent | None, others: list[ShardGtid], rng: ShardRange) -> list[tuple]:
    position = group.vgtid.position_of(rng.keyspace, rng.shard) if group.vgtid else rng.end
    vgtid = Vgtid([*others, ShardGtid(rng.keyspace, rng.shard, position or "")]).to_json()
    gtid = commit.gtid if commit is not None else ""
    out: list[tuple] = []
    index = 0
    for event in group.events:
        if not isinstance(event, RowEvent):
            continue
        ts = dt.datetime.fromtimestamp(event.timestamp, tz=dt.UTC)
        keyspace, _, table = event.table_name.partition(".")
        for change in event.changes:
            out.append(
                (
                    str(event.op),
                    keyspace,
                    event.shard,
                    table,
                    None if change.before is None else dumps(json_row(change.before)),
                    None if change.after is None else dumps(json_row(change.after)),
                    ts,
                    gtid,
                    index,
                    vgtid,
                )
            )
            index += 1
    return out
