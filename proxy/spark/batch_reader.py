"""Batch reads: one Spark input partition per shard, each a shard-targeted query through the proxy."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from proxy.spark.column_types import ColumnSpec
from proxy.spark.connect import connect_for_rows, shard_target
from proxy.spark.options import SourceOptions
from proxy.spark.shard_pruning import ShardSelection, VindexRoute, select_shards
from proxy.spark.text_rows import query_record_batches
from sqltext.quoting import quote_identifier

logger = logging.getLogger(__name__)


class ShardPartition(InputPartition):
    """Read one shard's rows of the table (with the pushed-down condition, if any)."""

    def __init__(self, shard: str, where_sql: str) -> None:
        super().__init__(shard)
        self.shard = shard
        self.where_sql = where_sql


class ShardTableReader(DataSourceReader):
    """Reads every shard of `options.table` in parallel, each shard's rows exactly once."""

    def __init__(
        self,
        options: SourceOptions,
        columns: Sequence[ColumnSpec],
        shards: Sequence[str],
        route: VindexRoute | None,
    ) -> None:
        self.options = options
        self.columns = list(columns)
        self.route = route
        self.selection = ShardSelection(list(shards))

    def partitions(self) -> Sequence[InputPartition]:
        return [ShardPartition(shard, self.selection.where_sql) for shard in self.selection.shards]

    def select_sql(self, where_sql: str) -> str:
        keyspace, table = self.options.require_table()
        cols = ", ".join(quote_identifier(c.name) for c in self.columns)
        sql = f"SELECT {cols} FROM {quote_identifier(table)}"
        return f"{sql} WHERE {where_sql}" if where_sql else sql

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, ShardPartition)
        keyspace, _ = self.options.require_table()
        sql = self.select_sql(partition.where_sql)
        conn = connect_for_rows(self.options.proxy, shard_target(keyspace, partition.shard))
        rows_read = 0
        try:
            batches = query_record_batches(conn, sql, self.columns, self.options.fetch_size)
            for batch in batches:
                rows_read += batch.num_rows
                yield batch
        finally:
            conn.close()
        logger.info("shard read", extra={"keyspace": keyspace, "shard": partition.shard, "rows": rows_read})


class PruningShardTableReader(ShardTableReader):
    """ShardTableReader that also takes Spark's pushed filters to skip shards (needs
    `spark.sql.python.filterPushdown.enabled=true`, which `register` sets)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:  # noqa: N802 - Spark's name
        self.selection = select_shards(self.route, self.selection.shards, filters)
        logger.info(
            "shards selected",
            extra={"shards": self.selection.shards, "where": self.selection.where_sql},
        )
        # Spark re-checks every filter: the shard query only narrows what it reads.
        yield from filters
