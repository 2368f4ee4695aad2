"""PySpark data source `shardgate`: read a sharded table one Spark partition per shard, write rows
to the shards their vindex picks, follow the CDC stream as a Structured Streaming source, and read
or follow a topic (`proxy.spark.topic_reader`).

Install with ``pip install shardgate[spark]`` (pyspark >= 4.0 and pyarrow: the readers hand Spark
Arrow record batches). Spark runs the data source in Python worker processes, so they must use
an interpreter where shardgate is installed: set ``PYSPARK_PYTHON`` (and
``PYSPARK_DRIVER_PYTHON``) to that interpreter, e.g. ``export PYSPARK_PYTHON=$PWD/.venv/bin/python``.
mysqlclient, when installed, makes reads several times faster than the PyMySQL fallback.

::

    from proxy.spark import register
    register(spark)                      # also enables Python filter pushdown (shard pruning)
    df = (spark.read.format("shardgate")
          .option("url", "mysql://root@127.0.0.1:15306")
          .option("table", "commerce.customer")
          .option("config", "examples/local/cluster.yaml")   # vschema: prune shards, route writes
          .load())
    df.write.format("shardgate").option("table", "commerce.customer").mode("append").save()
    changes = (spark.readStream.format("shardgate")
               .option("tables", "commerce.customer")
               .option("config", "examples/local/cluster.yaml")  # shard endpoints (binlogs)
               .load())
    events = (spark.readStream.format("shardgate")      # a topic: offsets are message ids
              .option("topic", "commerce.order_events")
              .option("startingPosition", "earliest")     # latest (default) | earliest | an id
              .load())                                    # spark.read...: the topic in batch

Options: see ``proxy.spark.options.SourceOptions``.
"""

from __future__ import annotations

from typing import Any

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the `shardgate` format with a SparkSession and enable filter pushdown, which
    the reader needs to prune shards (Spark refuses a Python reader with pushFilters otherwise)."""
    from proxy.spark.source import ShardgateDataSource

    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(ShardgateDataSource)


__all__ = ["FILTER_PUSHDOWN_CONF", "register"]
