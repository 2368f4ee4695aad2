"""Behaviour beyond Vitess: parking, in-flight cap, rate limit, per-key FIFO, filters, ack drop."""

from __future__ import annotations

import time

from tests.messaging.conftest import now_ns, run_sql

NO_RETRY_SOON = "vt_ack_wait=30,vt_purge_after=60,vt_batch_size=1,vt_cache_size=100,vt_poller_interval=0.1"


async def test_message_is_parked_after_max_attempts_and_counted(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment="vitess_message,vt_ack_wait=0.2,vt_purge_after=60,vt_batch_size=1,"
                               "vt_cache_size=10,vt_poller_interval=0.1,vt_min_backoff=0.05,vt_max_attempts=2")  # fmt: skip
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    await s.rows(1)
    await s.rows(1, within=3)
    await s.nothing_for(0.8)
    res = await run_sql(lookup_pool, f"SELECT epoch, time_next FROM {name} WHERE id = 1")
    assert res.rows == [(b"2", None)]
    assert service.managers[("lookup", "0", name)].counters.parked == 1


async def test_sending_pauses_at_max_inflight(tables, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{NO_RETRY_SOON},vt_max_inflight=2")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3)")
    s = await subscribe("lookup", name)
    await s.rows(2)
    await s.nothing_for(0.5)


async def test_ack_through_the_service_frees_an_inflight_slot(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{NO_RETRY_SOON},vt_max_inflight=1")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2)")
    s = await subscribe("lookup", name)
    first = (await s.rows(1))[0][0]
    await service.managers[("lookup", "0", name)].ack([first.encode()])
    second = (await s.rows(1, within=2))[0][0]
    assert {first, second} == {"1", "2"}


async def test_max_rate_limits_messages_per_second(tables, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{NO_RETRY_SOON},vt_max_rate=5")
    values = ", ".join(f"({i})" for i in range(1, 9))
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES {values}")
    s = await subscribe("lookup", name)
    start = time.monotonic()
    await s.rows(8, within=5)
    # 5 in the first second, the other 3 only once the first ones leave the 1 s window.
    assert time.monotonic() - start >= 0.9


async def test_ordering_column_keeps_one_message_per_key_in_flight_until_acked(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{NO_RETRY_SOON},vt_ordering_col=tenant_id")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 7), (2, 7), (3, 8)")
    s = await subscribe("lookup", name)
    first = await s.rows(2)
    assert sorted(r[0] for r in first) == ["1", "3"]
    await s.nothing_for(0.4)
    await service.managers[("lookup", "0", name)].ack([b"1"])
    assert (await s.rows(1, within=2))[0][0] == "2"


async def test_where_filter_delivers_only_matching_messages(tables, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name, where="tenant_id = 7")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 8), (2, 7), (3, 9)")
    assert [r[0] for r in await s.rows(1)] == ["2"]
    await s.nothing_for(0.5)


async def test_filtered_and_unfiltered_subscribers_split_by_predicate(tables, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{NO_RETRY_SOON.replace('vt_batch_size=1', 'vt_batch_size=10')}")
    tenant7 = await subscribe("lookup", name, where="tenant_id = 7")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 7)")
    assert [r[0] for r in await tenant7.rows(1)] == ["1"]
    everyone = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (2, 8)")
    assert [r[0] for r in await everyone.rows(1)] == ["2"]


async def test_message_acked_while_cached_is_not_sent(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{NO_RETRY_SOON}")
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2)")
    first = (await s.rows(1))[0][0]
    # The other message waits in the cache (the subscriber has not asked for its next batch).
    other = "2" if first == "1" else "1"
    manager = service.managers[("lookup", "0", name)]
    await run_sql(lookup_pool, f"UPDATE {name} SET time_acked = {now_ns()}, time_next = NULL WHERE id = {other}")
    service.acked("lookup", name, [int(other)])
    assert not manager.cache.contains(other.encode())
    await s.nothing_for(0.4)
