"""Topics in the ``shardgate`` Spark data source (``option("topic", ...)``): batch reads, and a
Structured Streaming query that, restarted from its checkpoint, gives every message exactly once
(no duplicate, no gap)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from proxy.spark import register
from tests.topics.conftest import eventually, read_all, run

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator:
    from tests.spark.session import spark_session_builder

    session = spark_session_builder("shardgate-topics-tests").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def _reader(spark, topic_proxy, topic: str, stream: bool = False, **options: str):
    r = (spark.readStream if stream else spark.read).format("shardgate")
    r = r.option("url", f"mysql://root@127.0.0.1:{topic_proxy.port}").option("topic", f"commerce.{topic}")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


async def _publish(topic_proxy, topic: str, payloads: list[str]) -> None:
    values = ", ".join(f"('{p}')" for p in payloads)
    await run(topic_proxy, "commerce", f"INSERT INTO `{topic}` (payload) VALUES {values}")
    total = None

    async def sequenced() -> bool:
        nonlocal total
        rows = await read_all(topic_proxy, "commerce", topic)
        total = len(rows)
        return bytes(rows[-1][2]) == payloads[-1].encode() if rows else False

    await eventually(sequenced)


async def test_a_topic_reads_in_batch_in_id_order_from_a_time_or_an_id(spark, topic_proxy, topics):
    topic = await topics.create("commerce", spec="(order_id BIGINT, status VARCHAR(20))")
    await _publish(topic_proxy, topic, ["b1", "b2", "b3"])
    await asyncio.sleep(0.05)
    after_ms = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    await _publish(topic_proxy, topic, ["b4"])
    await run(topic_proxy, "commerce", f"INSERT INTO `{topic}` (order_id, status) VALUES (5, 'paid')")
    await eventually(lambda: _count(topic_proxy, topic, 5))
    df = _reader(spark, topic_proxy, topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("message_id", "string"), ("publish_time", "bigint"), ("payload", "binary"), ("order_id", "bigint"),
        ("status", "string"), ("ttl_seconds", "bigint")]  # the view's columns, typed as the shard has them
    rows = df.collect()
    assert [bytes(r.payload) for r in rows] == [b"b1", b"b2", b"b3", b"b4", b""]
    assert (rows[-1].order_id, rows[-1].status) == (5, "paid")
    assert [r.message_id for r in rows] == sorted(r.message_id for r in rows)
    later = _reader(spark, topic_proxy, topic, startingTimestamp=str(after_ms)).collect()
    assert [bytes(r.payload) for r in later] == [b"b4", b""]
    after_second = _reader(spark, topic_proxy, topic, startingPosition=rows[1].message_id).select("payload").collect()
    assert [bytes(r.payload) for r in after_second] == [b"b3", b"b4", b""]
    assert _reader(spark, topic_proxy, topic, startingPosition="latest").count() == 0

    # Publishing from Spark: rows become messages (one transaction per task).
    published = spark.createDataFrame([(bytearray(b"w1"), 11), (bytearray(b"w2"), 12)], "payload binary, order_id bigint")
    (published.write.format("shardgate").option("url", f"mysql://root@127.0.0.1:{topic_proxy.port}")
     .option("topic", f"commerce.{topic}").mode("append").save())
    await eventually(lambda: _count(topic_proxy, topic, 7))
    tail = _reader(spark, topic_proxy, topic, startingPosition=rows[-1].message_id).collect()
    assert sorted((bytes(r.payload), r.order_id) for r in tail) == [(b"w1", 11), (b"w2", 12)]


async def _count(topic_proxy, topic: str, n: int) -> bool:
    return len(await read_all(topic_proxy, "commerce", topic)) == n


async def test_a_streaming_query_restarted_from_its_checkpoint_has_no_duplicate_and_no_gap(
        spark, topic_proxy, topics, tmp_path):
    topic = await topics.create("commerce")
    await _publish(topic_proxy, topic, [f"s{i}" for i in range(10)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_until_caught_up() -> list[int]:
        df = _reader(spark, topic_proxy, topic, stream=True, maxMessagesPerTrigger="4", startingPosition="earliest")
        query = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint).start()
        try:
            query.processAllAvailable()
            return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        finally:
            query.stop()

    assert await asyncio.to_thread(run_until_caught_up) == [4, 4, 2]  # maxMessagesPerTrigger
    await _publish(topic_proxy, topic, [f"s{i}" for i in range(10, 17)])
    assert sum(await asyncio.to_thread(run_until_caught_up)) == 7
    got = spark.read.parquet(out).collect()
    ids = [r.message_id for r in got]
    assert len(ids) == len(set(ids)) == 17
    expected = await read_all(topic_proxy, "commerce", topic)
    assert sorted(ids) == [r[0] for r in expected]
    assert sorted(bytes(r.payload) for r in got) == sorted(f"s{i}".encode() for i in range(17))


async def test_a_stream_starts_at_the_latest_message_by_default(spark, topic_proxy, topics):
    topic = await topics.create("commerce")
    await _publish(topic_proxy, topic, ["old1", "old2"])
    df = _reader(spark, topic_proxy, topic, stream=True)
    query = df.writeStream.format("memory").queryName("topic_latest").start()
    try:
        await asyncio.to_thread(query.processAllAvailable)
        await _publish(topic_proxy, topic, ["new1"])
        await asyncio.to_thread(query.processAllAvailable)
        got = spark.sql("SELECT payload FROM topic_latest").collect()
    finally:
        query.stop()
    assert [bytes(r.payload) for r in got] == [b"new1"]


def test_topic_options_are_parsed_and_bad_ones_named():
    from proxy.spark.options import OptionError, SourceOptions

    o = SourceOptions.parse({"topic": "commerce.`orders`", "startingTimestamp": "1795464764121",
                             "maxMessagesPerTrigger": "50"})
    assert (o.topic, o.starting_timestamp, o.max_messages_per_trigger, o.starting_position_given) == (
        ("commerce", "orders"), 1795464764121, 50, False)
    assert SourceOptions.parse({"topic": "commerce.t", "startingPosition": "earliest"}).starting_position_given
    for bad, said in (({"topic": "orders"}, "topic must be keyspace.topic"),
                      ({"topic": "commerce.t", "table": "commerce.customer"}, "not both"),
                      ({"topic": "commerce.t", "maxMessagesPerTrigger": "0"}, "maxmessagespertrigger")):
        with pytest.raises(OptionError, match=said):
            SourceOptions.parse(bad)
