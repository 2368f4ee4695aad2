"""The row decides who sends: two managers (two proxies) racing to claim the same messages."""

from __future__ import annotations

import asyncio

import pytest

from proxy.errors import ShardError
from proxy.messaging.manager import MessageManager
from proxy.messaging.schema import load_message_tables
from tests.messaging.conftest import run_sql


async def manager_for(pool, name: str) -> MessageManager:
    async with pool.connection() as sc:
        spec = (await load_message_tables(sc))[name].spec
    # Not opened: no background poller or send loop; the test drives poll and claim itself.
    return MessageManager("lookup", "0", spec, pool)


async def test_racing_claims_split_every_message_between_the_claimers(tables, lookup_pool):
    name = await tables.create(comment="vitess_message,vt_ack_wait=5,vt_purge_after=60,vt_batch_size=40,"
                               "vt_cache_size=100,vt_poller_interval=5")  # fmt: skip
    values = ", ".join(f"({i})" for i in range(1, 41))
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES {values}")
    first, second = await manager_for(lookup_pool, name), await manager_for(lookup_pool, name)
    try:
        for m in (first, second):
            await m.poll()
        batch_a, batch_b = first.cache.pop(40), second.cache.pop(40)
        (won_a, _), (won_b, _) = await asyncio.gather(first._claim(batch_a), second._claim(batch_b))
        ids_a, ids_b = {r[0] for r in won_a}, {r[0] for r in won_b}
        assert not ids_a & ids_b
        assert len(ids_a | ids_b) == 40
    finally:
        await first.close()
        await second.close()


async def test_claim_of_a_message_acked_meanwhile_sends_nothing(tables, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    m = await manager_for(lookup_pool, name)
    try:
        await m.poll()
        batch = m.cache.pop(1)
        await run_sql(lookup_pool, f"UPDATE {name} SET time_acked = 1, time_next = NULL WHERE id = 1")
        won, _ = await m._claim(batch)
        assert won == []
    finally:
        await m.close()


async def test_claim_parking_a_message_uses_the_locking_path_and_parks_it(tables, lookup_pool):
    name = await tables.create(comment="vitess_message,vt_ack_wait=5,vt_purge_after=60,vt_batch_size=2,"
                               "vt_cache_size=10,vt_poller_interval=5,vt_max_attempts=1")  # fmt: skip
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    m = await manager_for(lookup_pool, name)
    try:
        await m.poll()
        won, epochs = await m._claim(m.cache.pop(1))
        assert ([r[0] for r in won], epochs) == ([b"1"], [0])
        res = await run_sql(lookup_pool, f"SELECT epoch, time_next FROM {name} WHERE id = 1")
        assert res.rows == [(b"1", None)]
    finally:
        await m.close()


async def test_claims_run_on_the_managers_own_link_and_a_link_the_shard_closed_is_not_reused(tables, lookup_pool):
    name = await tables.create(comment="vitess_message,vt_ack_wait=5,vt_purge_after=60,vt_batch_size=10,"
                               "vt_cache_size=100,vt_poller_interval=5")  # fmt: skip
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2)")
    m = await manager_for(lookup_pool, name)
    try:
        await m.poll()
        assert await m._claim_or_all(m.cache.pop(10)) is None  # both won, on a link of the manager
        (link,) = m._claim_links.idle
        await run_sql(lookup_pool, f"KILL {link.thread_id}")
        for _ in range(100):  # the event loop reads the shard's end of the connection
            if link.transport is None:
                break
            await asyncio.sleep(0.01)
        await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (3)")
        await m.poll()
        batch = m.cache.pop(10)
        assert [msg.id for msg in batch] == [b"3"]
        assert await m._claim_or_all(batch) is None  # a new link claimed it
        res = await run_sql(lookup_pool, f"SELECT id, epoch FROM {name} ORDER BY id")
        assert res.rows == [(b"1", b"1"), (b"2", b"1"), (b"3", b"1")]
        assert m._claim_links.idle and m._claim_links.idle[0] is not link
    finally:
        await m.close()
    assert not m._claim_links.idle  # closed with the manager


async def test_claim_on_a_link_reports_the_shards_error_as_the_pool_does(tables, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    m = await manager_for(lookup_pool, name)
    try:
        await m.poll()
        batch = m.cache.pop(1)
        await run_sql(lookup_pool, f"DROP TABLE {name}")
        with pytest.raises(ShardError) as caught:
            await m._claim(batch)
        assert caught.value.code == 1146  # ER_NO_SUCH_TABLE, named by the shard
        assert f"{name}' doesn't exist" in caught.value.message
    finally:
        await m.close()
