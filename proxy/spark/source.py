"""The `shardgate` PySpark data source (Spark 4.x `pyspark.sql.datasource`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
)

from proxy.spark.column_types import ColumnSpec, column_spec, spark_schema
from proxy.spark.connect import connect
from proxy.spark.options import OptionError, SourceOptions
from proxy.spark.shard_pruning import VindexRoute
from proxy.spark.topology import load_vschema, proxy_shards
from sqltext.quoting import quote_identifier


class ShardgateDataSource(DataSource):
    """`spark.read.format("shardgate")`, `df.write.format("shardgate")` and
    `spark.readStream.format("shardgate")` over a shardgate proxy."""

    @classmethod
    def name(cls) -> str:
        return "shardgate"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(options)
        self._columns: list[ColumnSpec] | None = None

    # -- batch ------------------------------------------------------------------------------

    def columns(self) -> list[ColumnSpec]:
        """The table's (or topic view's) columns as its shards define them (`SHOW FULL COLUMNS`,
        via the proxy)."""
        if self._columns is None and self.parsed.topic is not None:
            from proxy.spark.topic_reader import topic_columns

            self._columns = topic_columns(self.parsed)
        if self._columns is None:
            keyspace, table = self.parsed.require_table()
            conn = connect(self.parsed.proxy, keyspace)
            try:
                cur = conn.cursor()
                cur.execute(f"SHOW FULL COLUMNS FROM {quote_identifier(table)}")
                self._columns = [column_spec(row) for row in cur.fetchall()]
            finally:
                conn.close()
        return self._columns

    def schema(self) -> Any:
        if self.parsed.stream_tables and self.parsed.topic is None:
            from proxy.spark.change_rows import CHANGE_SCHEMA

            return CHANGE_SCHEMA
        return spark_schema(self.columns())

    def _route(self, for_write: bool) -> VindexRoute | None:
        if self.parsed.config is None:
            return None
        keyspace, table = self.parsed.require_table()
        vschema = load_vschema(self.parsed.config)
        if for_write:
            found = vschema.find_table(table, keyspace)
            # The proxy must see these rows: it fills sequences and writes lookup vindex rows.
            if found.owned_vindexes or found.auto_increment is not None:
                return None
        return VindexRoute.of_table(vschema, keyspace, table)

    def reader(self, schema: Any) -> DataSourceReader:
        from proxy.spark.batch_reader import PruningShardTableReader, ShardTableReader

        wanted = self._wanted(schema)
        if self.parsed.topic is not None:
            from proxy.spark.topic_reader import TopicBatchReader

            return TopicBatchReader(self.parsed, wanted)
        keyspace, _ = self.parsed.require_table()
        shards = proxy_shards(self.parsed.proxy, keyspace)
        route = self._route(for_write=False)
        reader_type = ShardTableReader if self.options.get("filterPushdown", "true").lower() == "false" else PruningShardTableReader
        return reader_type(self.parsed, wanted, shards, route)

    def _wanted(self, schema: Any) -> list[ColumnSpec]:
        """A user-given schema selects (and orders) columns by name."""
        by_name = {c.name.lower(): c for c in self.columns()}
        return [by_name[f.name.lower()] for f in schema.fields] if schema is not None else self.columns()

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        from proxy.spark.batch_writer import ShardTableWriter, clear_table

        if self.parsed.topic is not None:
            # Publishing: each task's rows go in one transaction through the keyspace session
            # (the proxy routes INSERTs into a topic), so a task's messages appear together.
            if overwrite:
                raise OptionError("a topic is append-only: write it with mode('append')")
            as_table = dataclasses.replace(self.parsed, table=self.parsed.topic)
            return ShardTableWriter(as_table, [f.name for f in schema.fields], None)
        keyspace, _ = self.parsed.require_table()
        if overwrite:
            clear_table(self.parsed, proxy_shards(self.parsed.proxy, keyspace))
        return ShardTableWriter(self.parsed, [f.name for f in schema.fields], self._route(for_write=True))

    # -- streaming --------------------------------------------------------------------------

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        if self.parsed.topic is not None:
            from proxy.spark.topic_reader import TopicStreamReader

            return TopicStreamReader(self.parsed, self._wanted(schema))
        from proxy.spark.stream_reader import ChangeStreamReader

        return ChangeStreamReader(self.parsed)
