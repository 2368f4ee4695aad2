"""Structured Streaming source over the CDC stream: offsets are VGTIDs.

    initialOffset   where the query starts (`startingPosition`: current, beginning or a VGTID)
    latestOffset    every shard's binlog position now (`@@gtid_binlog_pos`)
    partitions      one per shard that moved between the two offsets
    read            that shard's changes in (start, end], from its binlog (shard_changes)

Spark stores both offsets of a batch in its checkpoint before running it; a restarted query
re-runs the last unfinished batch with the same offsets and the same (binlog-fixed) rows, and
its file sinks then keep each change exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from proxy.cdc import GtidPosition, Vgtid
from proxy.cdc.start_positions import current_position, resolve_start
from proxy.cdc.table_filter import TableFilter
from proxy.spark.options import OptionError, SourceOptions
from proxy.spark.shard_changes import ShardRange, read_shard_range
from proxy.spark.topology import ShardEndpointSpec, shard_endpoints

logger = logging.getLogger(__name__)


class ShardRangePartition(InputPartition):
    def __init__(self, rng: ShardRange, vgtid_base: str) -> None:
        super().__init__(f"{rng.keyspace}/{rng.shard}")
        self.rng = rng
        self.vgtid_base = vgtid_base


def offset_of(vgtid: Vgtid) -> dict[str, Any]:
    return {"vgtid": vgtid.to_json_obj()}


def vgtid_of(offset: dict[str, Any]) -> Vgtid:
    return Vgtid.from_json(offset["vgtid"])


class ChangeStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        if not options.stream_tables:
            raise OptionError("the tables option (keyspace.table, ...) is required for a stream")
        if options.config is None:
            raise OptionError("the config option (the proxy's cluster YAML) is required for a stream")
        self.options = options
        self.tables = list(options.stream_tables)
        table_filter = TableFilter(self.tables)
        self.endpoints: dict[tuple[str, str], ShardEndpointSpec] = {
            key: e for key, e in shard_endpoints(options.config).items() if table_filter.includes_keyspace(key[0])
        }
        if not self.endpoints:
            raise OptionError(f"no shard of the cluster holds {self.tables}")

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        resolved = asyncio.run(
            resolve_start(self.endpoints, TableFilter(self.tables), self.options.starting_position)
        )
        vgtid = Vgtid.from_positions(resolved.positions)
        logger.info("change stream initial offset", extra={"vgtid": vgtid.to_json()})
        return offset_of(vgtid)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:  # noqa: N802
        positions = {key: current_position(endpoint) for key, endpoint in sorted(self.endpoints.items())}
        return offset_of(Vgtid.from_positions(positions))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        start_vgtid, end_vgtid = vgtid_of(start), vgtid_of(end)
        out: list[InputPartition] = []
        for entry in end_vgtid.shard_gtids:
            begin = start_vgtid.position_of(entry.keyspace, entry.shard) or ""
            if GtidPosition.parse(begin) == GtidPosition.parse(entry.gtid):
                continue
            rng = ShardRange(entry.keyspace, entry.shard, begin, entry.gtid)
            out.append(ShardRangePartition(rng, start_vgtid.to_json()))
        return out

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, ShardRangePartition)
        rng = partition.rng
        endpoint = self.endpoints[(rng.keyspace, rng.shard)]
        rows = asyncio.run(read_shard_range(endpoint, self.tables, rng, Vgtid.from_json(partition.vgtid_base)))
        yield from rows

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing to release: positions live in Spark's checkpoint, binlogs on the shards.
        logger.info("change stream batch committed", extra={"vgtid": vgtid_of(end).to_json()})


__all__ = ["ChangeStreamReader"]
