"""The log table's layout (``proxy.topics.schema``): a row waiting for its pass has no id and
no expiry (its ``publish_time``/``seq`` hold ``UNSEQUENCED_*`` so the pass updates it in place),
ids stay unique, readers reach rows through the id index, and a log laid out by an earlier
version (NULL defaults, a stored ``message_id``) keeps working."""

from __future__ import annotations

import asyncio

import aiomysql
import pymysql
import pytest

from proxy.topics.schema import UNSEQUENCED_MS, UNSEQUENCED_SEQ, first_id_at_sql
from tests.topics.conftest import EARLIER_LOG_DDL, eventually, read_all, run, shard_conn, shard_rows


async def test_a_row_waiting_for_its_pass_has_no_id_no_expiry_and_is_never_purged(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce", spec="WITH (ttl_seconds = 1)")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    try:
        # Stored under a REST write pointer, not yet published: the sequencer skips it, and it
        # has a TTL of its own that must count from its pass, not from UNSEQUENCED_MS (epoch 0).
        await shard_rows(shard, f"INSERT INTO `_tms_{name}` (payload, ttl_seconds, tx_pointer, pending, stored_ms)"
                           " VALUES ('stored', 1, 7, 1, ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000))")
        await asyncio.sleep(1.5)  # several purges (purge_seconds 0.3) and sequencer polls
        rows = await shard_rows(shard, f"SELECT publish_time, seq, message_id, expire_ms FROM `_tms_{name}`")
        assert rows == [(UNSEQUENCED_MS, UNSEQUENCED_SEQ, None, None)]
        assert await read_all(topic_proxy, "commerce", name, "publish_time >= 0") == []

        await shard_rows(shard, f"UPDATE `_tms_{name}` SET pending = 0 WHERE tx_pointer = 7")  # its commit marker

        async def sequenced() -> bool:
            return [bytes(r[2]) for r in await read_all(topic_proxy, "commerce", name)] == [b"stored"]

        await eventually(sequenced, what="the published row sequenced")
        (pt, seq, mid, expire), = await shard_rows(shard, f"SELECT publish_time, seq, message_id, expire_ms FROM `_tms_{name}`")
        assert pt > 0 and expire == pt + 1000 and mid == f"{pt:016x}{seq:04x}"

        async def purged() -> bool:
            return await shard_rows(shard, f"SELECT COUNT(*) FROM `_tms_{name}`") == [(0,)]

        await eventually(purged, what="the message purged after its own TTL")
    finally:
        shard.close()


async def test_ids_stay_unique_and_readers_reach_messages_through_the_id_index(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce")
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('one')")

    async def visible() -> bool:
        return len(await read_all(topic_proxy, "commerce", name)) == 1

    await eventually(visible)
    shard = await shard_conn(local_cluster, topic_proxy, name)
    try:
        (pt, seq), = await shard_rows(shard, f"SELECT publish_time, seq FROM `_tms_{name}`")
        with pytest.raises(pymysql.err.IntegrityError) as dup:
            await shard_rows(shard, f"INSERT INTO `_tms_{name}` (payload, publish_time, seq) VALUES ('again', {pt}, {seq})")
        assert dup.value.args[0] == 1062
        # Rows waiting for a pass all have a NULL id: the unique index takes any number of them.
        async with shard.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `_tms_{name}` (payload) VALUES ('w1'), ('w2')")
            await cur.execute(f"SELECT COUNT(*) FROM `_tms_{name}` FORCE INDEX (message_id) WHERE message_id IS NULL")
            assert (await cur.fetchone())[0] == 2
            await cur.execute("ROLLBACK")
        plan = await shard_rows(shard, f"EXPLAIN SELECT * FROM `{name}` WHERE message_id > '{pt - 1:016x}0000'"
                                  " ORDER BY message_id LIMIT 10")
        assert [(r[3], r[5]) for r in plan] == [("range", "message_id")], plan  # the view's read: the id index
        # A time is a range of ids: the purge's and stats' reads.
        cutoff = first_id_at_sql("ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) - 1000")
        plan = await shard_rows(shard, f"EXPLAIN SELECT _pk FROM `_tms_{name}` FORCE INDEX (message_id)"
                                  f" WHERE message_id < {cutoff} ORDER BY message_id LIMIT 10")
        assert [(r[3], r[5]) for r in plan] == [("range", "message_id")], plan
    finally:
        shard.close()


async def test_a_topic_whose_log_has_the_earlier_layout_keeps_working(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce", spec="WITH (ttl_seconds = 3600)")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    try:
        await shard_rows(shard, f"DROP TABLE `_tms_{name}`")
        await shard_rows(shard, EARLIER_LOG_DDL.format(name=name))
        conn = await aiomysql.connect(host="127.0.0.1", port=topic_proxy.port, user="root", password="",
                                      db="commerce", autocommit=True)
        try:
            async with conn.cursor() as cur:
                await cur.execute("BEGIN")  # kept to the COMMIT (proxy.topics.kept): ids in the write
                await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('t1'), ('t2'), ('t3')")
                await cur.execute("COMMIT")
                await cur.execute("BEGIN")
                await cur.execute("SAVEPOINT s")  # not kept: deferred, the pass gives the ids
                await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('u1'), ('u2')")
                await cur.execute("COMMIT")
                await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('d1'), ('d2')")  # direct: ids in the write
                await cur.execute(f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES ('brief', 1)")
        finally:
            conn.close()

        async def all_in_order() -> bool:
            return [bytes(r[2]) for r in await read_all(topic_proxy, "commerce", name)] == [
                b"t1", b"t2", b"t3", b"u1", b"u2", b"d1", b"d2", b"brief"]

        await eventually(all_in_order, what="every message sequenced, in commit order")
        assert await shard_rows(shard, f"SELECT COUNT(*) FROM `_tms_{name}` WHERE publish_time IS NULL") == [(0,)]

        async def brief_purged() -> bool:
            return await shard_rows(shard, f"SELECT COUNT(*) FROM `_tms_{name}`") == [(7,)]

        await eventually(brief_purged, what="the message with its own TTL purged")
    finally:
        shard.close()
