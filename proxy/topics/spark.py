"""PySpark data source ``shardgate_topic``: a topic read in batch, or followed as a Structured
Streaming source whose offsets are message ids.

::

    from proxy.topics.spark import register_topics
    register_topics(spark)
    messages = (spark.readStream.format("shardgate_topic")
                .option("url", "mysql://root@127.0.0.1:15306")
                .option("topic", "commerce.orders_events")
                .option("startingPosition", "earliest")     # latest | earliest | a message id (after it)
                # .option("startingTimestamp", "1795464764121")  # or: from this publish time (ms)
                .load())                                      # message_id STRING, publish_time BIGINT, payload BINARY

An offset is ``{"after": "<message id>"}``; a micro-batch reads the ids in ``(start, end]``.
Because ids only ever appear above every id already visible (no late arrivals), a range read
twice gives the same messages (unless the TTL purged them meanwhile), so a query restarted from
its checkpoint produces no duplicate and no gap. Spark runs this in Python workers: set
``PYSPARK_PYTHON`` to an interpreter with shardgate installed (``pip install shardgate[spark]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

from proxy.addresses import is_loopback
from proxy.spark.options import ProxyAddress
from proxy.topics.ids import MAX_SEQ, is_id, make_id
from sqltext.quoting import quote_identifier

SCHEMA = "message_id STRING, publish_time BIGINT, payload BINARY"
DEFAULT_MAX_PER_BATCH = 10000


class TopicOptionError(ValueError):
    pass


def _topic(value: str | None) -> tuple[str, str]:
    keyspace, dot, name = (value or "").strip().partition(".")
    if not dot or not keyspace or not name:
        raise TopicOptionError(f"option 'topic' must be keyspace.topic, got {value!r}")
    return keyspace.strip("`"), name.strip("`")


class _Topic:
    """The topic named by the options, read through the proxy with PyMySQL."""

    def __init__(self, options: dict[str, str]) -> None:
        self.address = ProxyAddress.parse(options.get("url", "mysql://root@127.0.0.1:15306"))
        self.keyspace, self.name = _topic(options.get("topic"))
        self.max_per_batch = int(options.get("maxmessagespertrigger", DEFAULT_MAX_PER_BATCH))

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        a = self.address
        conn = pymysql.connect(host=a.host, port=a.port, user=a.user, password=a.password, database=self.keyspace,
                               autocommit=True, ssl_disabled=is_loopback(a.host))
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def messages(self, after: str, upto: str | None = None) -> Iterator[tuple[str, int, bytes]]:
        cond = f"message_id > '{after}'" + (f" AND message_id <= '{upto}'" if upto is not None else "")
        for r in self.query(f"SELECT message_id, publish_time, payload FROM {quote_identifier(self.name)} WHERE {cond}"
                            " ORDER BY message_id"):
            yield str(r[0]), int(r[1]), bytes(r[2])

    def last_id(self, after: str, limit: int | None = None) -> str | None:
        inner = f"SELECT message_id FROM {quote_identifier(self.name)} WHERE message_id > '{after}' ORDER BY message_id"
        if limit is not None:
            inner += f" LIMIT {int(limit)}"
        rows = self.query(f"SELECT MAX(message_id) FROM ({inner}) s")
        return str(rows[0][0]) if rows and rows[0][0] is not None else None


def _start_after(options: dict[str, str], topic: _Topic) -> str:
    """The id the first batch starts after ('' = before every id)."""
    if options.get("startingtimestamp"):
        ms = int(options["startingtimestamp"])
        return make_id(ms - 1, MAX_SEQ) if ms > 0 else ""
    position = options.get("startingposition", "earliest").strip()
    if position == "earliest":
        return ""
    if position == "latest":
        return topic.last_id("") or ""
    if is_id(position):
        return position.lower()
    raise TopicOptionError(f"startingPosition must be earliest, latest or a message id, got {position!r}")


class TopicRange(InputPartition):
    def __init__(self, after: str, upto: str | None) -> None:
        self.after = after
        self.upto = upto


class TopicBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        topic = _Topic(self.options)
        return [TopicRange(_start_after(self.options, topic), None)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, TopicRange)
        yield from _Topic(self.options).messages(partition.after, partition.upto)


class TopicStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.topic = _Topic(options)

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        return {"after": _start_after(self.options, self.topic)}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:  # noqa: N802
        after = (start or self.initialOffset())["after"]
        last = self.topic.last_id(after, self.topic.max_per_batch)
        return {"after": last or after}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if end["after"] <= start["after"]:
            return []
        return [TopicRange(start["after"], end["after"])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, TopicRange)
        yield from _Topic(self.options).messages(partition.after, partition.upto)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: topics keep no consumer state (as CDAP's)."""


class TopicDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "shardgate_topic"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return TopicBatchReader(_lower(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        return TopicStreamReader(_lower(self.options))


def _lower(options: Any) -> dict[str, str]:
    """Spark's option names are case-insensitive: look them up in lower case."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def register_topics(spark: Any) -> None:
    """Register the ``shardgate_topic`` format with a SparkSession."""
    spark.dataSource.register(TopicDataSource)
