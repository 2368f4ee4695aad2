"""TTL: expired messages are never returned (even before the purge), then purged physically
in the background; per topic and per message; ALTER TOPIC changes it at once."""

from __future__ import annotations

import asyncio

import aiomysql

from tests.topics.conftest import eventually, read_all, run


async def _log_rows(local_cluster, keyspace: str, shard: str, topic: str) -> int:
    """Rows physically in the topic's log table, read directly on its shard."""
    e = local_cluster.endpoints[(keyspace, shard)]
    conn = await aiomysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, db=e.database,
                                  autocommit=True)
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"SELECT COUNT(*) FROM `_tms_{topic}`")
            return int((await cur.fetchone())[0])
    finally:
        conn.close()


async def _shard_of(p, keyspace: str, topic: str) -> str:
    rows = await run(p, keyspace, f"SHOW TOPICS FROM {keyspace} LIKE '{topic}'")
    return rows[0][2]


async def test_messages_past_the_topic_ttl_are_never_returned_then_purged(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce", spec="WITH (ttl_seconds = 1)")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('short-lived'), ('too')")

    async def visible() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 2

    await eventually(visible)
    await asyncio.sleep(1.1)
    assert await read_all(topic_proxy, "commerce", name) == []
    assert await read_all(topic_proxy, "commerce", name, "publish_time >= 0") == []
    shard = await _shard_of(topic_proxy, "commerce", name)

    async def purged() -> bool:
        return await _log_rows(local_cluster, "commerce", shard, name) == 0

    await eventually(purged, what="expired rows purged")
    row = (await run(topic_proxy, "commerce", f"SHOW TOPICS LIKE '{name}'"))[0]
    assert (row[5], row[6]) == (0, 0), "messages and bytes counters follow the purge"


async def test_a_message_ttl_shorter_than_the_topics_expires_alone(topic_proxy, topics, local_cluster):
    name = await topics.create("lookup", spec="WITH (ttl_seconds = 3600)")
    await run(topic_proxy, "lookup", f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES ('brief', 1)")
    await run(topic_proxy, "lookup", f"INSERT INTO `{name}` (payload) VALUES ('lasting')")

    async def both() -> bool:
        return len(await read_all(topic_proxy, "lookup", name)) == 2

    await eventually(both)
    await asyncio.sleep(1.1)
    assert [bytes(r[2]) for r in await read_all(topic_proxy, "lookup", name)] == [b"lasting"]

    async def purged() -> bool:
        return await _log_rows(local_cluster, "lookup", "0", name) == 1

    await eventually(purged, what="the expired message purged, the other kept")


async def test_alter_topic_ttl_applies_at_once(topic_proxy, topics):
    name = await topics.create("commerce")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('x')")

    async def one() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 1

    await eventually(one)
    await asyncio.sleep(1.1)
    assert len(await read_all(topic_proxy, "commerce", name)) == 1
    await run(topic_proxy, "commerce", f"ALTER TOPIC `{name}` SET ttl_seconds = 1")
    assert await read_all(topic_proxy, "commerce", name) == []
    assert (await run(topic_proxy, "commerce", f"SHOW TOPICS LIKE '{name}'"))[0][4] == 1
