"""A client transaction's topic rows kept by the proxy to its COMMIT (``proxy.topics.kept``):
written once, with ids, as one direct publish — or, once the transaction does anything else,
sent as the INSERTs they were, in order, as before. Real shards, real clients."""

from __future__ import annotations

import asyncio

import pymysql
import pytest

from tests.topics.conftest import (
    connect,
    eventually,
    read_all,
    run,
    shard_conn,
    shard_rows,
    topic_events,
)


async def _payloads(p, topic: str) -> list[bytes]:
    return [bytes(r[2]) for r in await read_all(p, "commerce", topic)]


async def _nonempty(p, topic: str) -> bool:
    return bool(await _payloads(p, topic))


async def _log(shard, topic: str) -> list[tuple]:
    """The log's rows on the shard, by key: payload and whether the row has its id."""
    return [(bytes(r[0]), r[1] is not None)
            for r in await shard_rows(shard, f"SELECT payload, publish_time FROM `_tms_{topic}` ORDER BY _pk")]


@pytest.mark.parametrize("path", ["fast", "normal"])
async def test_a_committed_transactions_rows_are_written_at_commit_with_ids_in_insert_order(
    topic_proxy, topics, local_cluster, path
):
    name = await topics.create("commerce", suffix=path)
    await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('before1'), ('before2')")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            if path == "fast":
                await cur.execute(f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES ('t1', NULL), (\"t2\", 60), (0x7433, null)")
            else:  # a user variable: the normal path substitutes it, then keeps the rows alike
                await cur.execute("SET @p = 't1'")
                await cur.execute(f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES (@p, NULL), ('t2', 60), (0x7433, null)")
            assert cur.rowcount == 3
            await cur.execute(f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES ('t4', NULL), (X'7435', 3600)")
            assert cur.rowcount == 2
            assert len(await _log(shard, name)) == 2  # nothing of the transaction on the shard yet
            passes = topic_events(topic_proxy, name).get("passes", 0)
            await cur.execute("COMMIT" if path == "fast" else "/* the normal path's */ COMMIT")
        # Written at the COMMIT, with their ids (no pass), after what committed before.
        assert await _log(shard, name) == [(b"before1", True), (b"before2", True), (b"t1", True), (b"t2", True),
                                           (b"t3", True), (b"t4", True), (b"t5", True)]
        assert await _payloads(topic_proxy, name) == [b"before1", b"before2", b"t1", b"t2", b"t3", b"t4", b"t5"]
        assert await shard_rows(shard, f"SELECT ttl_seconds FROM `_tms_{name}` WHERE _pk > 2 ORDER BY _pk") == [
            (None,), (60,), (None,), (None,), (3600,)]
        assert topic_events(topic_proxy, name).get("passes", 0) == passes  # no pass gave them ids
    finally:
        conn.close()
        shard.close()


async def test_a_rolled_back_or_abandoned_transactions_rows_are_never_seen(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    try:
        conn = await connect(topic_proxy, "commerce")
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('rolled back')")
            await cur.execute("ROLLBACK")
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('abandoned'), ('too')")
        conn.close()  # the client leaves mid-transaction
        await asyncio.sleep(0.3)
        await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('after')")
        # A one-row publish is visible at the pass its OK wakes, not at the OK.
        await eventually(lambda: _nonempty(topic_proxy, name), what="the pass of 'after'")
        assert await _payloads(topic_proxy, name) == [b"after"]
        assert [r[0] for r in await _log(shard, name)] == [b"after"]
    finally:
        shard.close()


async def test_an_open_transactions_kept_rows_stay_invisible_while_others_flow_then_follow_them(topic_proxy, topics):
    name = await topics.create("commerce")
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('open1'), ('open2')")
            for i in range(3):
                await run(topic_proxy, "commerce", f"INSERT INTO `{name}` (payload) VALUES ('other{i}'), ('x{i}')")
            assert await _payloads(topic_proxy, name) == [b"other0", b"x0", b"other1", b"x1", b"other2", b"x2"]
            await cur.execute("COMMIT")
        assert (await _payloads(topic_proxy, name))[-2:] == [b"open1", b"open2"]
    finally:
        conn.close()


async def test_a_transaction_with_messages_and_a_table_row_commits_both_or_neither(topic_proxy, topics):
    topic = await topics.create("lookup")
    sku = f"sku-{topic}"[:100]
    conn = await connect(topic_proxy, "lookup")
    try:
        async with conn.cursor() as cur:
            for outcome in ("ROLLBACK", "COMMIT"):
                await cur.execute("BEGIN")
                await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES ('{outcome} 1'), ('{outcome} 1b')")  # kept ...
                # ... then flushed, as written, before the table's row: the deferred path.
                await cur.execute("INSERT INTO product (sku, description, price) VALUES (%s, %s, 1)", (sku, outcome))
                await cur.execute(f"INSERT INTO `{topic}` (payload) VALUES ('{outcome} 2')")
                await cur.execute(outcome)
            await cur.execute("SELECT description FROM product WHERE sku = %s", (sku,))
            assert await cur.fetchall() == (("COMMIT",),)
            await cur.execute("DELETE FROM product WHERE sku = %s", (sku,))
    finally:
        conn.close()

    async def visible() -> bool:
        return len(await read_all(topic_proxy, "lookup", topic)) >= 2

    await eventually(visible)
    await asyncio.sleep(0.3)
    assert [bytes(r[2]) for r in await read_all(topic_proxy, "lookup", topic)] == [b"COMMIT 1", b"COMMIT 1b", b"COMMIT 2"]


async def test_an_invalid_insert_fails_at_its_statement_and_the_transaction_goes_on(topic_proxy, topics):
    name = await topics.create("commerce")
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('k1'), ('k1b')")
            with pytest.raises(pymysql.err.IntegrityError) as null_payload:  # NULL: not kept, sent (after k1)
                await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('bad'), (NULL)")
            assert null_payload.value.args[0] == 1048
            with pytest.raises(pymysql.err.OperationalError) as no_column:
                await cur.execute(f"INSERT INTO `{name}` (payload, nope) VALUES ('bad', 1)")
            assert no_column.value.args[0] == 1054
            with pytest.raises(pymysql.err.DataError) as out_of_range:
                await cur.execute(f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES ('bad', -1)")
            assert out_of_range.value.args[0] == 1264
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('k2')")
            await cur.execute("COMMIT")
        await eventually(lambda: _has(topic_proxy, name, 3), what="the good rows sequenced")
        assert await _payloads(topic_proxy, name) == [b"k1", b"k1b", b"k2"]
    finally:
        conn.close()


async def _has(p, topic: str, n: int) -> bool:
    return len(await _payloads(p, topic)) >= n


async def test_savepoints_see_every_row_and_rollback_to_drops_the_later_ones(topic_proxy, topics):
    name = await topics.create("commerce")
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('a'), ('a2')")
            await cur.execute("SAVEPOINT s1")  # the kept row is sent first
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('b')")
            await cur.execute("ROLLBACK TO SAVEPOINT s1")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('c')")
            await cur.execute("COMMIT")
        await eventually(lambda: _has(topic_proxy, name, 3), what="the rows sequenced")
        await asyncio.sleep(0.3)
        assert await _payloads(topic_proxy, name) == [b"a", b"a2", b"c"]
    finally:
        conn.close()


async def test_an_autocommit_0_session_keeps_its_rows_to_each_commit(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("SET autocommit = 0")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('x1'), ('x2')")
            assert await _log(shard, name) == []
            passes = topic_events(topic_proxy, name).get("passes", 0)
            await cur.execute("COMMIT")
            assert await _log(shard, name) == [(b"x1", True), (b"x2", True)]
            assert topic_events(topic_proxy, name).get("passes", 0) == passes  # ids in the write
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('gone')")
            await cur.execute("ROLLBACK")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('x3')")
            await cur.execute("COMMIT")
        assert await _log(shard, name) == [(b"x1", True), (b"x2", True), (b"x3", True)]
    finally:
        conn.close()
        shard.close()


async def test_a_twopc_transactions_rows_go_as_written(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("SET transaction_mode = 'twopc'")
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('2pc')")
            assert len(await _log(shard, name)) == 0  # sent, not committed (its own row is invisible here)
            await cur.execute("COMMIT")
        await eventually(lambda: _has(topic_proxy, name, 1), what="the twopc row sequenced")
        assert await _payloads(topic_proxy, name) == [b"2pc"]
    finally:
        conn.close()
        shard.close()


async def test_an_insert_with_another_column_list_sends_the_kept_rows_first_in_order(topic_proxy, topics):
    name = await topics.create("commerce")
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('p1'), ('p2')")
            await cur.execute(f"INSERT INTO `{name}` (payload, ttl_seconds) VALUES ('p3', 60)")  # not joined: flushed
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('p4')")  # as written, after them
            await cur.execute("COMMIT")
        await eventually(lambda: _has(topic_proxy, name, 4), what="the rows sequenced")
        assert await _payloads(topic_proxy, name) == [b"p1", b"p2", b"p3", b"p4"]
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["fast", "normal"])
async def test_a_failed_publish_fails_the_commit_with_the_shards_error_and_writes_nothing(
    topic_proxy, topics, local_cluster, path
):
    name = await topics.create("commerce", suffix=path)
    shard = await shard_conn(local_cluster, topic_proxy, name)
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('lost1'), ('lost2')")
            await shard_rows(shard, f"RENAME TABLE `_tms_{name}` TO `_tms_{name}_away`")
            with pytest.raises(pymysql.err.ProgrammingError) as failed:
                # A comment: the normal path's COMMIT (the fast path reads none).
                await cur.execute("COMMIT" if path == "fast" else "/* normal */ COMMIT")
            assert failed.value.args[0] == 1146
            await shard_rows(shard, f"RENAME TABLE `_tms_{name}_away` TO `_tms_{name}`")
            await cur.execute("SELECT @@in_transaction")  # the session goes on, out of the transaction
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('next1'), ('next2')")
        assert await _log(shard, name) == [(b"next1", True), (b"next2", True)]
    finally:
        conn.close()
        shard.close()


async def test_rows_beyond_one_publishs_cap_are_sent_as_written_in_order(topic_proxy, topics):
    name = await topics.create("commerce")
    half = 33_000  # two of them pass direct.MAX_ROWS (65,536): the second is not kept, the first flushed
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("BEGIN")
            for part in ("a", "b"):
                await cur.execute(f"INSERT INTO `{name}` (payload) VALUES "
                                  + ", ".join(f"('{part}{i}')" for i in range(half)))
                assert cur.rowcount == half
            await cur.execute("COMMIT")

        async def all_visible() -> bool:
            return len(await read_all(topic_proxy, "commerce", name)) == 2 * half

        await eventually(all_visible, within=60, what="both INSERTs' rows sequenced")
        assert await _payloads(topic_proxy, name) == [f"{p}{i}".encode() for p in ("a", "b") for i in range(half)]
    finally:
        conn.close()


async def test_a_killed_connections_kept_rows_are_never_written(topic_proxy, topics, local_cluster):
    name = await topics.create("commerce")
    shard = await shard_conn(local_cluster, topic_proxy, name)
    conn = await connect(topic_proxy, "commerce")
    try:
        async with conn.cursor() as cur:
            await cur.execute("SELECT CONNECTION_ID()")
            (cid,), = await cur.fetchall()
            await cur.execute("BEGIN")
            await cur.execute(f"INSERT INTO `{name}` (payload) VALUES ('killed1'), ('killed2')")
        await run(topic_proxy, "commerce", f"KILL {cid}")
        with pytest.raises(pymysql.err.OperationalError):
            async with conn.cursor() as cur:
                await cur.execute("COMMIT")
        await asyncio.sleep(0.3)
        assert await _log(shard, name) == []
    finally:
        conn.close()
        shard.close()
