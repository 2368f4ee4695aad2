"""Group commit of concurrent direct publishes (proxy/topics/batch.py): while one direct publish
of a topic is in flight from a proxy, the next ones (any session, fast path or normal path,
REST) queue and go as one script; each publisher still gets its own INSERT's OK (or its own
error), after the COMMIT that includes its rows, and the rows keep one order every reader sees."""

from __future__ import annotations

import asyncio
import base64

import aiomysql
import pymysql

from tests.topics.conftest import (
    TopicProxy,
    connect,
    eventually,
    read_all,
    shard_conn,
    shard_rows,
    topic_events,
)


async def _publisher(
    p: TopicProxy, topic: str, tag: str, count: int, olap: bool
) -> list[tuple[list[bytes], int, int]]:
    """``count`` autocommit INSERTs of 2-4 messages: each one's messages, its affected rows and
    its last insert id as the client read them from the OK."""
    conn = await connect(p, "commerce")
    out: list[tuple[list[bytes], int, int]] = []
    try:
        async with conn.cursor() as cur:
            if olap:
                await cur.execute("SET WORKLOAD = OLAP")  # the normal path
            for k in range(count):
                batch = [f"{tag}-{k}-{j}" for j in range(2 + k % 3)]
                await cur.execute(
                    f"INSERT INTO `{topic}` (payload) VALUES " + ", ".join(["(%s)"] * len(batch)),
                    batch,
                )
                out.append(([m.encode() for m in batch], cur.rowcount, cur.lastrowid))
    finally:
        conn.close()
    return out


async def test_concurrent_direct_publishes_share_scripts_and_each_gets_its_own_ok(
    topic_proxy, topics, local_cluster, follow
):
    """8 sessions x 25 publishes through one proxy (fast path and normal path): scripts carried
    several publishes (the proxy's counters), every client read its own INSERT's affected rows
    and last insert id (the first row's key, as MariaDB answers the INSERT alone), ids strictly
    increase, each INSERT's rows are contiguous and each publisher's in its order, and a
    follower saw that same sequence."""
    topic = await topics.create("commerce")
    follower = await follow("commerce", f"STREAM * FROM `{topic}`")
    shard = await shard_conn(local_cluster, topic_proxy, topic)
    try:
        results = await asyncio.gather(
            *(_publisher(topic_proxy, topic, f"p{i}", 25, olap=i % 4 == 3) for i in range(8))
        )
        publishes = [pub for r in results for pub in r]
        sent = [m for msgs, _, _ in publishes for m in msgs]
        final = await read_all(topic_proxy, "commerce", topic)
        ids = [r[0] for r in final]
        assert ids == sorted(ids) and len(set(ids)) == len(ids) == len(sent)
        order = [bytes(r[2]) for r in final]
        assert sorted(order) == sorted(sent)
        at = {m: i for i, m in enumerate(order)}
        for r in results:  # each publisher's messages in its order, each INSERT's contiguous
            mine = [m for msgs, _, _ in r for m in msgs]
            assert [m for m in order if m in set(mine)] == mine
            for msgs, _, _ in r:
                assert [at[m] for m in msgs] == list(range(at[msgs[0]], at[msgs[0]] + len(msgs)))
        keys = {
            bytes(p): int(k)
            for k, p in await shard_rows(shard, f"SELECT _pk, payload FROM `_tms_{topic}`")
        }
        for msgs, affected, last_id in publishes:
            assert affected == len(msgs)
            assert last_id == keys[msgs[0]]  # the INSERT's own LAST_INSERT_ID()
        await follower.wait_for(len(sent), within=20)
        assert [r[0] for r in follower.rows] == ids
        await eventually(
            lambda: asyncio.sleep(0, topic_events(topic_proxy, topic).get("batches", 0) >= 1),
            what="a batch counted",
        )
        events = topic_events(topic_proxy, topic)
        assert events["batched"] > events["batches"] and events["direct"] == len(publishes), events
    finally:
        shard.close()


async def test_one_publishers_bad_row_fails_only_that_publisher_in_its_batch(
    topic_proxy, topics, local_cluster, http
):
    """The topic's mark held on the shard: a first publish waits in flight, four more queue
    behind it (fast path, normal path, REST) and go as one script, one of them with a value too
    long under strict mode. That script fails (1406) and rolls back; each publish runs again
    alone: only that publisher gets 1406, the others their own OKs, their rows in queue order."""
    topic = await topics.create("commerce", spec="(tag VARCHAR(4))")
    shard = await shard_conn(local_cluster, topic_proxy, topic)
    conns = [await connect(topic_proxy, "commerce") for _ in range(4)]
    try:
        async with conns[2].cursor() as cur:
            await cur.execute("SET WORKLOAD = OLAP")
        before = topic_events(topic_proxy, topic).get("batches", 0)
        await shard_rows(shard, "BEGIN")
        await shard_rows(
            shard, f"SELECT last_seq FROM _tms_topics WHERE name = '{topic}' FOR UPDATE"
        )

        async def insert(
            conn: aiomysql.Connection, rows: list[tuple[str, str]]
        ) -> tuple[int, int] | int:
            try:
                async with conn.cursor() as cur:
                    await cur.execute(
                        f"INSERT INTO `{topic}` (payload, tag) VALUES "
                        + ", ".join(["(%s, %s)"] * len(rows)),
                        [v for r in rows for v in r],
                    )
                    return cur.rowcount, cur.lastrowid
            except pymysql.err.MySQLError as e:
                return int(e.args[0])

        async def rest(messages: list[bytes]) -> int:
            async with http.post(
                f"{topic_proxy.rest}/commerce/topics/{topic}/publish",
                json={"messages": [base64.b64encode(m).decode() for m in messages]},
            ) as r:
                return r.status

        first = asyncio.ensure_future(insert(conns[0], [("first-0", "a"), ("first-1", "a")]))
        await asyncio.sleep(0.3)  # in flight: waiting for the mark's lock
        queued = []
        for task in (
            insert(conns[1], [("q1-0", "b"), ("q1-1", "b")]),
            insert(conns[2], [("q2-0", "c"), ("q2-1", "too long")]),
            rest([b"q3-0", b"q3-1"]),
            insert(conns[3], [("q4-0", "d"), ("q4-1", "d"), ("q4-2", "d")]),
        ):
            queued.append(asyncio.ensure_future(task))
            await asyncio.sleep(0.1)
        assert not first.done() and not any(q.done() for q in queued)
        await shard_rows(shard, "COMMIT")
        answers = await asyncio.gather(first, *queued)
        assert answers[2] == 1406  # Data too long for column 'tag': that publisher's own error
        assert answers[3] == 200
        for a, n in zip((answers[0], answers[1], answers[4]), (2, 2, 3), strict=True):
            assert isinstance(a, tuple) and a[0] == n
        final = [bytes(r[2]) for r in await read_all(topic_proxy, "commerce", topic)]
        assert final == [
            b"first-0",
            b"first-1",
            b"q1-0",
            b"q1-1",
            b"q3-0",
            b"q3-1",
            b"q4-0",
            b"q4-1",
            b"q4-2",
        ]
        keys = {
            bytes(p): int(k)
            for k, p in await shard_rows(shard, f"SELECT _pk, payload FROM `_tms_{topic}`")
        }
        assert (answers[1][1], answers[4][1]) == (keys[b"q1-0"], keys[b"q4-0"])  # type: ignore[index]
        await eventually(
            lambda: asyncio.sleep(0, topic_events(topic_proxy, topic).get("batches", 0) > before),
            what="the batch counted",
        )
    finally:
        for c in conns:
            c.close()
        shard.close()


async def test_queued_publishes_keep_their_sessions_sql_mode(topic_proxy, topics, local_cluster):
    """Publishes share a script only with publishes of the same session settings: queued
    together, a session with ``sql_mode = ''`` gets its too-long value truncated with a
    warning (its OK says 1 warning), a strict session the 1406 error, as each would alone."""
    topic = await topics.create("commerce", spec="(tag VARCHAR(4))")
    shard = await shard_conn(local_cluster, topic_proxy, topic)
    lenient, strict, first = [await connect(topic_proxy, "commerce") for _ in range(3)]
    try:
        async with lenient.cursor() as cur:
            await cur.execute("SET sql_mode = ''")
        await shard_rows(shard, "BEGIN")
        await shard_rows(
            shard, f"SELECT last_seq FROM _tms_topics WHERE name = '{topic}' FOR UPDATE"
        )

        async def insert(conn: aiomysql.Connection, tag: str) -> tuple[int, int] | int:
            try:
                async with conn.cursor() as cur:
                    await cur.execute(
                        f"INSERT INTO `{topic}` (payload, tag) VALUES ('{tag}', %s), ('{tag}', %s)",
                        ("ok", "too long"),
                    )
                    return cur.rowcount, cur._result.warning_count
            except pymysql.err.MySQLError as e:
                return int(e.args[0])

        head = asyncio.ensure_future(insert(first, "first"))
        await asyncio.sleep(0.3)  # in flight, waiting for the mark's lock: the next two queue
        queued = [asyncio.ensure_future(insert(lenient, "lenient"))]
        await asyncio.sleep(0.1)
        queued.append(asyncio.ensure_future(insert(strict, "strict")))
        await asyncio.sleep(0.1)
        assert not head.done() and not any(q.done() for q in queued)
        await shard_rows(shard, "COMMIT")
        assert await asyncio.gather(head, *queued) == [1406, (2, 1), 1406]
        rows = await shard_rows(
            shard, f"SELECT payload, tag FROM `_tms_{topic}` ORDER BY message_id"
        )
        assert [(bytes(p), t) for p, t in rows] == [(b"lenient", "ok"), (b"lenient", "too ")]
    finally:
        for c in (lenient, strict, first):
            c.close()
        shard.close()


async def test_a_batch_takes_no_more_rows_than_one_millisecond_holds():
    """A script's rows share one millisecond (direct.MAX_ROWS): queued publishes whose rows
    together pass it: those that fit go, the others wait for the next batch (no shard: the
    queue's split alone)."""
    from proxy.topics import direct
    from proxy.topics.batch import TopicBatcher, _Queued

    def insert(rows: int) -> direct.DirectInsert:
        ins = direct.read_direct(
            "INSERT INTO `_tms_t` (payload) VALUES " + ",".join(["('a')"] * rows), 12, 20, "t"
        )
        assert ins is not None
        return ins

    batcher = TopicBatcher("t", lambda: None, lambda n: None)  # type: ignore[arg-type,return-value]
    queued = [_Queued(insert(n), ()) for n in (40_000, 20_000, 10_000, 5_000)]
    batcher._queue = list(queued)
    assert batcher._take() == [queued[0], queued[1], queued[3]]  # 65,000 rows; 70,000 would not fit
    assert batcher._take() == [queued[2]]
