"""A topic in the `shardgate` data source: read in batch, or followed as a Structured Streaming
source whose offsets are message ids (``option("topic", "keyspace.topic")``).

    initialOffset   ``{"after": <id>}``: the id the query starts after (``startingPosition`` /
                    ``startingTimestamp``)
    latestOffset    the id of the last visible message, at most ``maxMessagesPerTrigger`` on
    partitions      one range ``(start, end]`` of ids per micro-batch
    read            that range's messages, in id order, through the proxy (the topic's view:
                    visible, unexpired messages only), cut into Arrow batches like table reads

Ids only ever appear above every id already visible (no late arrivals), so a range read twice
gives the same messages (unless the TTL purged them meanwhile): a query restarted from its
checkpoint re-reads its last unfinished range and produces no duplicate and no gap.

The columns are the view's (``message_id``, ``publish_time``, ``payload``, the topic's user
columns, ``ttl_seconds``), typed from the topic shard's ``SHOW FULL COLUMNS``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from proxy.spark.column_types import ColumnSpec, column_spec
from proxy.spark.connect import connect, connect_for_rows, shard_target
from proxy.spark.options import OptionError, SourceOptions
from proxy.spark.text_rows import query_record_batches
from proxy.topics.ids import MAX_SEQ, is_id, make_id
from sqltext.quoting import quote_identifier, sql_literal

logger = logging.getLogger(__name__)

EARLIEST = ("earliest", "beginning")
LATEST = ("latest", "current")


def _scalar(options: SourceOptions, sql: str) -> Any:
    keyspace, _ = options.require_topic()
    conn = connect(options.proxy, keyspace)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        row = cur.fetchone()
        return None if row is None else row[0]
    finally:
        conn.close()


def topic_columns(options: SourceOptions) -> list[ColumnSpec]:
    """The topic view's columns, as its shard defines them (the shard from ``SHOW TOPICS``)."""
    keyspace, topic = options.require_topic()
    conn = connect(options.proxy, keyspace)
    try:
        cur = conn.cursor()
        cur.execute(f"SHOW TOPICS FROM {quote_identifier(keyspace)} LIKE {sql_literal(topic)}")
        shards = [str(r[2]) for r in cur.fetchall() if str(r[1]) == topic]
    finally:
        conn.close()
    if not shards:
        raise OptionError(f"no topic {topic!r} in keyspace {keyspace!r}")
    conn = connect(options.proxy, shard_target(keyspace, shards[0]))
    try:
        cur = conn.cursor()
        cur.execute(f"SHOW FULL COLUMNS FROM {quote_identifier(topic)}")
        return [column_spec(row) for row in cur.fetchall()]
    finally:
        conn.close()


def last_id(options: SourceOptions, after: str, limit: int | None = None) -> str | None:
    """The last visible id after ``after`` (at most ``limit`` messages on)."""
    _, topic = options.require_topic()
    inner = f"SELECT message_id FROM {quote_identifier(topic)} WHERE message_id > {sql_literal(after)} ORDER BY message_id"
    if limit is not None:
        inner += f" LIMIT {int(limit)}"
    found = _scalar(options, f"SELECT MAX(message_id) FROM ({inner}) s")
    return None if found is None else str(found)


def start_after(options: SourceOptions, default: str) -> str:
    """The id the first read starts after ('' = before every id). ``startingTimestamp`` (ms)
    wins over ``startingPosition`` (earliest | latest | a message id, read after it), whose
    ``default`` is earliest for a batch read, latest for a stream (as Kafka's source)."""
    if options.starting_timestamp is not None:
        ms = options.starting_timestamp
        return make_id(ms - 1, MAX_SEQ) if ms > 0 else ""
    position = (options.starting_position if options.starting_position_given else default).strip()
    if position.lower() in EARLIEST:
        return ""
    if position.lower() in LATEST:
        return last_id(options, "") or ""
    if is_id(position):
        return position.lower()
    raise OptionError(f"startingPosition for a topic must be earliest, latest or a message id, got {position!r}")


class TopicRange(InputPartition):
    """The messages with ids in ``(after, upto]`` (``upto`` None: to the last visible one)."""

    def __init__(self, after: str, upto: str | None) -> None:
        super().__init__(f"{after}..{upto or ''}")
        self.after = after
        self.upto = upto


def read_range(options: SourceOptions, columns: Sequence[ColumnSpec], rng: TopicRange) -> Iterator[Any]:
    keyspace, topic = options.require_topic()
    cond = f"message_id > {sql_literal(rng.after)}"
    if rng.upto is not None:
        cond += f" AND message_id <= {sql_literal(rng.upto)}"
    cols = ", ".join(quote_identifier(c.name) for c in columns)
    sql = f"SELECT {cols} FROM {quote_identifier(topic)} WHERE {cond} ORDER BY message_id"
    conn = connect_for_rows(options.proxy, keyspace)
    rows = 0
    try:
        for batch in query_record_batches(conn, sql, columns, options.fetch_size):
            rows += batch.num_rows
            yield batch
    finally:
        conn.close()
    logger.info("topic range read", extra={"keyspace": keyspace, "topic": topic, "after": rng.after,
                                           "upto": rng.upto, "rows": rows})


class TopicBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, columns: Sequence[ColumnSpec]) -> None:
        self.options = options
        self.columns = list(columns)

    def partitions(self) -> Sequence[InputPartition]:
        return [TopicRange(start_after(self.options, "earliest"), None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicRange)
        yield from read_range(self.options, self.columns, partition)


class TopicStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions, columns: Sequence[ColumnSpec]) -> None:
        self.options = options
        self.columns = list(columns)

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        return {"after": start_after(self.options, "latest")}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:  # noqa: N802
        after = (start or self.initialOffset())["after"]
        last = last_id(self.options, after, self.options.max_messages_per_trigger)
        return {"after": last or after}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if end["after"] <= start["after"]:
            return []
        return [TopicRange(start["after"], end["after"])]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicRange)
        yield from read_range(self.options, self.columns, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: topics keep no consumer state (as CDAP's)."""


__all__ = ["TopicBatchReader", "TopicStreamReader", "topic_columns"]
