"""The rows the change stream source produces: one per changed table row."""

from __future__ import annotations

from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

# before/after are the row images as JSON objects (DECIMAL as string, binary as base64, times
# ISO-8601: proxy.cdc.json_values); commit_ts is the binlog commit time (whole seconds);
# gtid is the shard transaction, vgtid the stream position just after it (a resume point);
# row_in_txn numbers the row changes of a transaction from 0 (with gtid it identifies a change).
CHANGE_SCHEMA = StructType(
    [
        StructField("op", StringType(), False),
        StructField("keyspace", StringType(), False),
        StructField("shard", StringType(), False),
        StructField("table", StringType(), False),
        StructField("before", StringType(), True),
        StructField("after", StringType(), True),
        StructField("commit_ts", TimestampType(), False),
        StructField("gtid", StringType(), False),
        StructField("row_in_txn", IntegerType(), False),
        StructField("vgtid", StringType(), False),
    ]
)
