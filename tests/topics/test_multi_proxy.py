"""Several proxy processes on the same shards: one order, no id used twice, and kill -9 of a
proxy loses no message whose publish returned OK."""

from __future__ import annotations

import asyncio

import pymysql

from tests.proxy_process import stop_proxy
from tests.topics.conftest import TopicProxy, connect, eventually, launch, read_all, topic_events


async def _publish(p: TopicProxy, topic: str, tag: str, count: int) -> list[bytes]:
    conn = await connect(p, "commerce")
    sent = []
    try:
        async with conn.cursor() as cur:
            for k in range(count):
                await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES (%s)", (f"{tag}-{k}",))
                sent.append(f"{tag}-{k}".encode())
    finally:
        conn.close()
    return sent


async def test_publishing_through_two_proxies_gives_one_order_seen_through_both(topic_proxy, other_proxy, topics, follow):
    topic = await topics.create("commerce")  # through proxy A; B learns of it on first use
    fa = await follow("commerce", f"STREAM * FROM `{topic}`", topic_proxy)
    results = await asyncio.gather(
        *(_publish(topic_proxy, topic, f"a{i}", 25) for i in range(3)),
        *(_publish(other_proxy, topic, f"b{i}", 25) for i in range(3)),
    )
    sent = sorted(m for r in results for m in r)
    fb = await follow("commerce", f"STREAM * FROM `{topic}`", other_proxy)
    await fa.wait_for(len(sent))
    await fb.wait_for(len(sent))
    via_a = await read_all(topic_proxy, "commerce", topic)
    via_b = await read_all(other_proxy, "commerce", topic)
    assert via_a == via_b
    ids = [r[0] for r in via_a]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == len(sent)
    assert sorted(bytes(r[2]) for r in via_a) == sent
    assert [(r[0], r[2]) for r in fa.rows] == [(r[0], bytes(r[2])) for r in via_a]
    assert [(r[0], r[2]) for r in fb.rows] == [(r[0], bytes(r[2])) for r in via_a]


def _publish_until_dead(port: int, topic: str, acked: list[bytes], tag: str) -> None:
    """Autocommit publishes through one proxy until it dies; records those that returned OK."""
    try:
        conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="", database="commerce",
                               autocommit=True)
        with conn.cursor() as cur:
            for k in range(100000):
                text = f"{tag}-{k}".encode()
                cur.execute(f"INSERT INTO `{topic}` (payload) VALUES (%s), (%s)", (text, text + b"-2"))
                acked.extend([text, text + b"-2"])
    except (pymysql.err.MySQLError, OSError):
        return


async def test_kill_9_of_a_proxy_mid_publish_loses_no_acknowledged_message(topic_proxy, local_cluster, topics,
                                                                          tmp_path_factory):
    """Four publishers at once: the proxy's direct publishes of the topic go in batches
    (proxy/topics/batch.py), cut mid-way by the kill too."""
    topic = await topics.create("commerce")
    doomed = launch(local_cluster, tmp_path_factory.mktemp("topics-proxy-killed"), "killed")
    acked: list[bytes] = []
    try:
        writers = [asyncio.ensure_future(asyncio.to_thread(_publish_until_dead, doomed.port, topic, acked, f"w{i}"))
                   for i in range(4)]
        await eventually(lambda: asyncio.sleep(0, len(acked) > 400), what="publishing under way")
        await eventually(lambda: asyncio.sleep(0, topic_events(doomed, topic).get("batches", 0) >= 1),
                         what="batches under way")
        doomed.process.proc.kill()  # SIGKILL: no shutdown, passes and batches cut mid-way
        await asyncio.wait_for(asyncio.gather(*writers), 10)
    finally:
        stop_proxy(doomed.process)
    assert acked

    async def all_there() -> bool:
        got = {bytes(r[2]) for r in await read_all(topic_proxy, "commerce", topic)}
        return set(acked) <= got

    await eventually(all_there, within=10, what="every acknowledged message visible through the surviving proxy")
    rows = await read_all(topic_proxy, "commerce", topic)
    ids = [r[0] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    payloads = [bytes(r[2]) for r in rows]
    assert len(payloads) == len(set(payloads)), "nothing twice"
    # at most the statement each publisher had in flight at the kill may have committed without its OK
    assert len(set(payloads) - set(acked)) <= 2 * len(writers)


async def test_a_follower_through_another_proxy_never_gets_the_next_generations_messages(
        topic_proxy, other_proxy, topics, follow):
    """DROP TOPIC + CREATE TOPIC + publish through proxy A, while a follower streams through B:
    B learns of the drop at its next refresh, and until then the view of that name shows the new
    generation; the follower ends (1051) with the old generation's messages only. (B follows
    the topic on first use: it was created through A a moment before.)"""
    topic = await topics.create("commerce")
    await _publish(topic_proxy, topic, "g1", 2)
    follower = await follow("commerce", f"STREAM * FROM `{topic}`", other_proxy)
    await follower.wait_for(2)
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"DROP TOPIC `{topic}`")
            await cur.execute(f"CREATE TOPIC `{topic}`")
            await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES ('g2-0'), ('g2-1')")
    finally:
        conn.close()

    async def ended() -> bool:
        return follower.error is not None

    await eventually(ended, within=15, what="the follower of the dropped generation ends")
    assert isinstance(follower.error, pymysql.err.MySQLError) and follower.error.args[0] == 1051
    assert [bytes(r[2]) for r in follower.rows] == [b"g1-0", b"g1-1"]
    # The new generation is whole for its readers, through either proxy.
    assert [bytes(r[2]) for r in await read_all(other_proxy, "commerce", topic)] == [b"g2-0", b"g2-1"]
    fresh = await follow("commerce", f"STREAM * FROM `{topic}`", other_proxy)
    assert [bytes(r[2]) for r in await fresh.wait_for(2)] == [b"g2-0", b"g2-1"]
