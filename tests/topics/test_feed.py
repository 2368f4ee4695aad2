"""Followers of one topic share one reader of its log (proxy/topics/feed.py): followers starting
at different positions, a slow one, one that disconnects, all through a real proxy process, each
getting exactly the log from its own start, in order."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.topics.conftest import Follower, connect, eventually, read_all, run

PAYLOAD = 16 * 1024  # big enough that a reader who pauses fills the socket and falls behind the buffer


async def _publish(p: Any, topic: str, first: int, count: int, per_tx: int = 5) -> None:
    conn = await connect(p, "commerce")
    try:
        async with conn.cursor() as cur:
            for k in range(first, first + count, per_tx):
                values = ", ".join(["(%s)"] * per_tx)
                await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES {values}",
                                  [f"m{j:05d}".ljust(PAYLOAD, ".") for j in range(k, k + per_tx)])
                await asyncio.sleep(0.002)
    finally:
        conn.close()


async def test_followers_at_different_positions_and_a_slow_one_each_get_the_log_from_their_start(
    topic_proxy, topics, follow,
):
    topic = await topics.create("commerce")
    await _publish(topic_proxy, topic, 0, 100)

    async def hundred() -> bool:
        return len(await read_all(topic_proxy, "commerce", topic)) == 100

    await eventually(hundred)
    history = await read_all(topic_proxy, "commerce", topic)
    mid_id = history[39][0]

    from_start = await follow("commerce", f"STREAM * FROM `{topic}`")
    from_mid = await follow("commerce", f"STREAM * FROM `{topic}` WHERE message_id > '{mid_id}'")
    from_now = await follow("commerce", f"STREAM * FROM `{topic}` WHERE publish_time >= {int(time.time() * 1000) + 1}")
    leaving = await follow("commerce", f"STREAM * FROM `{topic}` WHERE message_id > '{history[69][0]}'")
    # a slow reader: its socket fills while it sleeps, and the proxy's buffered chunks are gone
    # by the time it reads again (the others must not wait for it; it catches up on its own reads)
    slow = await follow("commerce", f"STREAM * FROM `{topic}` WHERE message_id >= '{mid_id}'",
                        pause_after=20, pause_seconds=2.5)
    try:
        await asyncio.sleep(0.01)
        publishers = [asyncio.ensure_future(_publish(topic_proxy, topic, 100 + 200 * i, 200)) for i in range(2)]
        await leaving.wait_for(10)
        await leaving.close()  # dropped: the others go on
        await asyncio.gather(*publishers)

        log = await read_all(topic_proxy, "commerce", topic)
        assert len(log) == 500
        ids = [r[0] for r in log]

        def check(f: Follower, expected: list[str]) -> None:
            got = [r[0] for r in f.rows]
            assert got == expected, f"{len(got)} rows, expected {len(expected)}"

        # The fast followers keep up while the slow one is still far behind.
        await from_start.wait_for(500, within=20)
        await from_mid.wait_for(460, within=20)
        assert len(slow.rows) < 400, "the slow follower was meant to fall behind"
        check(from_start, ids)
        check(from_mid, ids[40:])
        from_now_ids = [r[0] for r in from_now.rows]
        assert from_now_ids == ids[len(ids) - len(from_now_ids):] and from_now_ids, "from now: a suffix of the log"

        async def slow_done() -> bool:
            if slow.error is not None:
                raise slow.error
            return len(slow.rows) >= 461

        await eventually(slow_done, within=30, what="the slow follower's rows")
        check(slow, ids[39:])
    finally:
        await slow.close()

    # Still following after all that: one more message reaches every follower once.
    await run(topic_proxy, "commerce", f"INSERT INTO `{topic}` (payload) VALUES ('last')")
    await from_start.wait_for(501)
    await from_mid.wait_for(461)
    assert from_start.rows[-1][2] == b"last" and from_mid.rows[-1][2] == b"last"
    assert len({r[0] for r in from_start.rows}) == 501
