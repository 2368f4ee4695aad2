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
