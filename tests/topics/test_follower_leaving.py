"""A STREAM follower waiting for messages is stopped the way every statement is: a client that hangs
up without a word is noticed within the connection's poll period (proxy/connection.py,
``_SilentClientWatch``), a KILL QUERY answers 1317 and leaves its session working, and the followers
that stay get every message after either."""

from __future__ import annotations

import asyncio

import pymysql

from tests.topics.conftest import Follower, eventually, run


async def _stream_ids(p, db: str) -> set[int]:
    rows = await run(p, db, "SHOW PROCESSLIST")
    return {int(r[0]) for r in rows if r[7] and "STREAM" in str(r[7]).upper()}


async def test_a_follower_that_hangs_up_while_waiting_leaves_the_processlist_and_the_others_go_on(
    topic_proxy, topics, follow,
):
    topic = await topics.create("commerce")
    stays = await follow("commerce", f"STREAM * FROM `{topic}`")
    leaving = await follow("commerce", f"STREAM * FROM `{topic}`")
    leaving_id = leaving.conn.server_thread_id[0]

    async def both_streaming() -> bool:
        return {leaving_id, stays.conn.server_thread_id[0]} <= await _stream_ids(topic_proxy, "commerce")

    await eventually(both_streaming, what="both STREAMs in the process list")
    await asyncio.sleep(0.5)  # both wait for messages: nothing flows to notice the hang-up by
    assert leaving.task is not None
    leaving.task.cancel()
    leaving.conn.close()  # the socket closed, no COM_QUIT

    async def gone() -> bool:
        return leaving_id not in await _stream_ids(topic_proxy, "commerce")

    await eventually(gone, within=1.5, what="the hung-up follower's STREAM gone from the process list")
    await run(topic_proxy, "commerce", f"INSERT INTO `{topic}` (payload) VALUES ('after'), ('the hang-up')")
    rows = await stays.wait_for(2)
    assert [r[2] for r in rows] == [b"after", b"the hang-up"]


async def test_kill_query_of_a_waiting_follower_answers_1317_and_its_session_goes_on(topic_proxy, topics, follow):
    topic = await topics.create("commerce")
    await run(topic_proxy, "commerce", f"INSERT INTO `{topic}` (payload) VALUES ('first')")
    victim: Follower = await follow("commerce", f"STREAM * FROM `{topic}`")
    await victim.wait_for(1)
    await asyncio.sleep(0.5)  # waiting for the next message
    await run(topic_proxy, "commerce", f"KILL QUERY {victim.conn.server_thread_id[0]}")

    async def interrupted() -> bool:
        return victim.error is not None

    await eventually(interrupted, within=3, what="the follower's STREAM interrupted")
    assert isinstance(victim.error, pymysql.err.OperationalError)
    assert victim.error.args == (1317, "Query execution was interrupted")
    async with victim.conn.cursor() as cur:
        await cur.execute(f"SELECT payload FROM `{topic}`")
        assert await cur.fetchall() == ((b"first",),)
