"""Batch writes: each Spark task groups its rows by the shard their primary vindex picks and
sends multi-row INSERTs through shard-targeted proxy sessions, one transaction per shard and task.

Tables whose rows the proxy must route itself are written through the keyspace session instead
(the proxy then maintains owned lookup vindexes and fills sequence columns): tables with an
owned vindex, an auto-increment sequence, or a primary vindex that is not functional; and every
table when no vschema (`config`) was given.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage

from proxy.spark.connect import connect, shard_target
from proxy.spark.options import SourceOptions
from proxy.spark.shard_pruning import VindexRoute
from proxy.spark.sql_literals import sql_literal
from sqltext.quoting import quote_identifier

logger = logging.getLogger(__name__)

KEYSPACE_SESSION = ""  # the batch key of rows the proxy routes itself


@dataclass
class ShardWriteReport(WriterCommitMessage):
    rows_by_shard: dict[str, int]


class ShardTableWriter(DataSourceWriter):
    def __init__(self, options: SourceOptions, columns: Sequence[str], route: VindexRoute | None) -> None:
        self.options = options
        self.columns = list(columns)
        self.route = route
        self.vindex_position = (
            [c.lower() for c in self.columns].index(route.column.lower())
            if route is not None and route.column.lower() in (c.lower() for c in self.columns)
            else None
        )

    def insert_prefix(self) -> str:
        _, table = self.options.require_table()
        return f"INSERT INTO {quote_identifier(table)} ({', '.join(quote_identifier(c) for c in self.columns)}) VALUES "

    def target_of(self, row: Sequence[Any]) -> str:
        if self.route is None or self.vindex_position is None:
            return KEYSPACE_SESSION
        value = row[self.vindex_position]
        shard = self.route.shard_of(value) if value is not None else None
        return KEYSPACE_SESSION if shard is None else shard

    def write(self, iterator: Iterator[Any]) -> ShardWriteReport:
        keyspace, _ = self.options.require_table()
        prefix = self.insert_prefix()
        pending: dict[str, list[str]] = {}
        written: dict[str, int] = {}
        conns: dict[str, Any] = {}

        def flush(target: str) -> None:
            values = pending.pop(target, [])
            if not values:
                return
            conn = conns.get(target)
            if conn is None:
                database = shard_target(keyspace, target or None)
                conn = conns[target] = connect(self.options.proxy, database, autocommit=False)
            cur = conn.cursor()
            cur.execute(prefix + ",".join(values))
            cur.close()
            written[target] = written.get(target, 0) + len(values)

        try:
            for row in iterator:
                values = tuple(row)
                target = self.target_of(values)
                batch = pending.setdefault(target, [])
                batch.append("(" + ",".join(sql_literal(v) for v in values) + ")")
                if len(batch) >= self.options.batch_size:
                    flush(target)
            for target in list(pending):
                flush(target)
            for conn in conns.values():
                conn.commit()
        except BaseException:
            for conn in conns.values():
                conn.rollback()
            raise
        finally:
            for conn in conns.values():
                conn.close()
        report = {target or keyspace: n for target, n in written.items()}
        logger.info("shard write", extra={"keyspace": keyspace, "rows_by_shard": report})
        return ShardWriteReport(rows_by_shard=report)


def clear_table(options: SourceOptions, shards: Sequence[str]) -> None:
    """Overwrite mode: empty the table on every shard before the tasks write (as Spark's JDBC
    sink with truncate=true does; the table definition stays)."""
    keyspace, table = options.require_table()
    for shard in shards:
        conn = connect(options.proxy, shard_target(keyspace, shard))
        try:
            cur = conn.cursor()
            cur.execute(f"TRUNCATE TABLE {quote_identifier(table)}")
            cur.close()
        finally:
            conn.close()
    logger.info("table truncated for overwrite", extra={"keyspace": keyspace, "table": table, "shards": list(shards)})
