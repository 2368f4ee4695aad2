"""The service's table handling: errors, live reload, shards, SHOW VITESS_MESSAGES."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from proxy.cluster_state import ClusterState
from proxy.config import MessagingConfig
from proxy.errors import ProxyError
from proxy.executor import Executor
from proxy.messaging.errors import MessageTableError, MessageTableNotFound, NotAMessageTable
from proxy.messaging.manager import MessageManager
from proxy.messaging.service import MessagingService
from proxy.session import ProxySession
from tests.messaging.conftest import FAST, SHARDS, Stream, first_poll_over, run_sql, until


async def test_unknown_table_is_not_found_in_schema(service):
    with pytest.raises(MessageTableNotFound) as e:
        await Stream(service.subscribe("lookup", "no_such_table")).open()
    assert (e.value.code, e.value.message) == (1146, "table no_such_table not found in schema")


async def test_plain_table_is_not_a_message_table(service):
    with pytest.raises(NotAMessageTable) as e:
        await Stream(service.subscribe("lookup", "product")).open()
    assert e.value.message == "'product' is not a message table"


async def test_invalid_message_table_fails_alone_with_its_error(tables, service, subscribe, lookup_pool):
    broken = await tables.create(comment="vitess_message,vt_ack_wait=1", suffix="_bad")
    good = await tables.create(suffix="_good")
    with pytest.raises(MessageTableError) as e:
        await Stream(service.subscribe("lookup", broken)).open()
    assert e.value.message == "attribute vt_purge_after not specified for message table"
    s = await subscribe("lookup", good)
    await run_sql(lookup_pool, f"INSERT INTO {good} (id) VALUES (1)")
    assert (await s.rows(1))[0][0] == "1"


async def test_extra_columns_are_streamed_with_their_types(tables, subscribe, lookup_pool):
    name = await tables.create(extra=",\n  msg1 VARCHAR(128),\n  msg2 BIGINT")
    s = await subscribe("lookup", name)
    assert [f.name for f in s.fields] == ["id", "tenant_id", "message", "msg1", "msg2"]
    assert [f.type for f in s.fields][3:] == [253, 8]
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id, message, msg1, msg2) VALUES (1, 3, '{{}}', 'hello world', 3)")
    assert await s.rows(1) == [("1", "3", "{}", "hello world", "3")]


async def test_message_cols_shape_the_stream(tables, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,vt_message_cols=id|msg1,{FAST}", extra=",\n  msg1 VARCHAR(128),\n  msg2 BIGINT")
    s = await subscribe("lookup", name)
    assert [f.name for f in s.fields] == ["id", "msg1"]
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, msg1, msg2) VALUES (1, 'hello world', 3)")
    assert await s.rows(1) == [("1", "hello world")]


async def test_changed_comment_takes_effect_without_disconnecting(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    slow = FAST.replace("vt_batch_size=2", "vt_batch_size=5")
    await run_sql(lookup_pool, f"ALTER TABLE {name} COMMENT 'vitess_message,{slow}'")
    await service.reload("lookup")
    assert service.managers[("lookup", "0", name)].spec.batch_size == 5
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3), (4), (5)")
    assert len(await s.batch()) > 2


async def test_dropped_table_ends_its_streams_with_an_error(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"DROP TABLE {name}")
    await service.reload("lookup")
    with pytest.raises(ProxyError) as e:
        await s.batch()
    assert "was dropped" in e.value.message


async def test_sharded_stream_covers_every_shard(tables, subscribe, shard_pools):
    name = await tables.create(keyspace="commerce")
    s = await subscribe("commerce", name)
    await run_sql(shard_pools.get("commerce", "-80"), f"INSERT INTO {name} (id) VALUES (1)")
    await run_sql(shard_pools.get("commerce", "80-"), f"INSERT INTO {name} (id) VALUES (2)")
    assert sorted(r[0] for r in await s.rows(2)) == ["1", "2"]


async def test_shard_targeted_stream_covers_only_that_shard(tables, subscribe, shard_pools):
    name = await tables.create(keyspace="commerce")
    s = await subscribe("commerce", name, shards=["80-"])
    await run_sql(shard_pools.get("commerce", "-80"), f"INSERT INTO {name} (id) VALUES (1)")
    await run_sql(shard_pools.get("commerce", "80-"), f"INSERT INTO {name} (id) VALUES (2)")
    assert [r[0] for r in await s.rows(1)] == ["2"]
    await s.nothing_for(0.5)


async def test_stream_statement_resolves_keyspace_and_target_shard(tables, service, shard_pools):
    name = await tables.create(keyspace="commerce")
    s = await Stream(service.stream(f"stream * from {name}", "commerce", "-80")).open()
    try:
        await run_sql(shard_pools.get("commerce", "80-"), f"INSERT INTO {name} (id) VALUES (2)")
        await run_sql(shard_pools.get("commerce", "-80"), f"INSERT INTO {name} (id) VALUES (1)")
        assert [r[0] for r in await s.rows(1)] == ["1"]
    finally:
        await s.close()


async def test_show_rows_report_counters_per_table_and_shard(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    await s.rows(1)
    await service.managers[("lookup", "0", name)].ack([b"1"])
    result = service.show_rows()
    names = [f.name for f in result.fields]
    row = next(dict(zip(names, r, strict=True)) for r in result.rows if r[2] == name.encode())
    assert (row["Shard"], row["Sent"], row["Acked"], row["Subscribers"], row["InFlight"]) == (b"0", b"1", b"1", b"1", b"0")


async def test_subscriber_count_follows_streams(tables, service, subscribe):
    name = await tables.create(keyspace="commerce")
    first = await subscribe("commerce", name)
    await subscribe("commerce", name)
    assert [len(service.managers[("commerce", s, name)].receivers) for s in ("-80", "80-")] == [2, 2]
    await first.close()
    assert [len(service.managers[("commerce", s, name)].receivers) for s in ("-80", "80-")] == [1, 1]


async def test_change_watch_delivers_a_row_written_directly_on_the_shard_at_once(tables, shard_pools, watch_opened):
    slow_poll = FAST.replace("vt_poller_interval=0.2", "vt_poller_interval=30")
    name = await tables.create(comment=f"vitess_message,{slow_poll}")
    svc = MessagingService(shard_pools, SHARDS, watch_changes=True)
    await svc.start()
    try:
        s = await Stream(svc.subscribe("lookup", name)).open()
        await first_poll_over(svc.managers[("lookup", "0", name)])
        await watch_opened(name)
        await run_sql(shard_pools.get("lookup", "0"), f"INSERT INTO {name} (id) VALUES (1)")
        assert [r[0] for r in await s.rows(1, within=10)] == ["1"]  # the next poll is 30 s away
        await s.close()
    finally:
        await svc.stop()


async def test_change_watch_wakes_a_manager_only_for_inserts_no_poll_has_covered(tables, shard_pools, watch_opened):
    slow_poll = FAST.replace("vt_poller_interval=0.2", "vt_poller_interval=30")
    name = await tables.create(comment=f"vitess_message,{slow_poll}")
    svc = MessagingService(shard_pools, SHARDS, watch_changes=True)
    await svc.start()
    try:
        s = await Stream(svc.subscribe("lookup", name)).open()
        manager = svc.managers[("lookup", "0", name)]
        await first_poll_over(manager)
        await watch_opened(name)
        pool = shard_pools.get("lookup", "0")
        # Written around the proxy: the watch wakes the manager, which delivers.
        await run_sql(pool, f"INSERT INTO {name} (id) VALUES (1)")
        assert [r[0] for r in await s.rows(1, within=10)] == ["1"]  # the next poll is 30 s away
        assert manager.counters.binlog_wakeups == 1
        # Acks and postpones are updates: the watch does not even read them.
        await run_sql(pool, f"UPDATE {name} SET time_acked = 1, time_next = NULL WHERE id = 1")
        await asyncio.sleep(0.3)
        assert manager.counters.binlog_wakeups == 1
        # A commit read before the latest poll started wakes nobody; one read after it wakes
        # the poller.
        manager.binlog_insert(manager._poll_started_at - 0.001)
        assert (manager.counters.binlog_covered, manager._poll_requested.is_set()) == (1, False)
        polls = manager.counters.polls
        manager.binlog_insert(time.time())  # (after a moment's wait for a commit of our own to match it)
        await until(lambda: manager.counters.polls > polls, what="the poll it wakes")
        assert (manager.counters.binlog_wakeups, manager.counters.polls) == (2, polls + 1)
        await s.close()
    finally:
        await svc.stop()


def test_stream_without_keyspace_is_no_database_selected(service):
    with pytest.raises(ProxyError) as e:
        service.stream("stream * from t", None)
    assert e.value.code == 1046


def test_stream_of_unknown_keyspace_is_unknown_database(service):
    with pytest.raises(ProxyError) as e:
        service.stream("stream * from nope.t", "lookup")
    assert (e.value.code, e.value.message) == (1049, "Unknown database 'nope'")


async def test_stopping_the_service_ends_open_streams_with_an_error(tables, shard_pools):
    name = await tables.create()
    svc = MessagingService(shard_pools, SHARDS)
    await svc.start()
    s = await Stream(svc.subscribe("lookup", name)).open()
    await svc.stop()
    with pytest.raises(ProxyError) as e:
        await s.batch(within=2)
    assert "messager engine is closed" in e.value.message


async def test_insert_through_the_proxy_wakes_only_the_shards_its_rows_went_to(local_cluster, shard_pools):
    slow_poll = "vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=100,vt_poller_interval=30"
    pools = [shard_pools.get("commerce", s) for s in ("-80", "80-")]
    original = (await run_sql(pools[0], "SELECT TABLE_COMMENT FROM information_schema.TABLES"
                              " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'customer_events'")).rows[0][0]
    for pool in pools:
        await run_sql(pool, f"ALTER TABLE customer_events COMMENT '{slow_poll}'")
    config = dataclasses.replace(local_cluster.config, messaging=MessagingConfig(binlog_watch=False))
    proxy = ClusterState(config, local_cluster.endpoints)
    try:
        await proxy.start()
        s = await Stream(proxy.messaging.subscribe("commerce", "customer_events")).open()
        managers = [proxy.messaging.managers[("commerce", shard, "customer_events")] for shard in ("-80", "80-")]
        await first_poll_over(*managers)
        def woken(m: MessageManager) -> int:  # polled, or cached the row from the INSERT's values
            return m.counters.polls + m.counters.inserts_cached

        before = [woken(m) for m in managers]
        session = ProxySession(proxy)
        session.use_target("commerce")
        await Executor(proxy).execute(session, "INSERT INTO customer_events (id, tenant_id, message) VALUES (4242, 1, '{}')")
        assert [r[0] for r in await s.rows(1)] == ["4242"]
        await asyncio.sleep(0.3)  # a poll of the other shard, had it been woken, is over too
        polled = [woken(m) - b for m, b in zip(managers, before, strict=True)]
        assert sorted(polled) == [0, 1]  # the other shard was not woken
        await s.close()
    finally:
        await proxy.close()
        for pool in pools:
            await run_sql(pool, "DELETE FROM customer_events WHERE id = 4242")
            await run_sql(pool, f"ALTER TABLE customer_events COMMENT '{original.decode()}'")
