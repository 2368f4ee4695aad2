"""Delivery through the messaging service over a real shard (unsharded `lookup/0`)."""

from __future__ import annotations

from tests.messaging.conftest import now_ns, run_sql


async def test_fields_are_id_and_user_columns_in_table_order(tables, subscribe):
    name = await tables.create()
    s = await subscribe("lookup", name)
    assert [f.name for f in s.fields] == ["id", "tenant_id", "message"]


async def test_inserted_message_is_delivered(tables, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id, message) VALUES (1, 7, '{{\"a\": 1}}')")
    assert await s.rows(1) == [("1", "7", '{"a": 1}')]


async def test_delivered_message_is_postponed_with_epoch_one(tables, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    start = now_ns()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1)")
    await s.rows(1)
    res = await run_sql(lookup_pool, f"SELECT epoch, time_next FROM {name} WHERE id = 1")
    epoch, time_next = (int(v) for v in res.rows[0])
    assert epoch == 1
    # ack_wait 0.5 s + backoff min 0.5 s (jitter >= 0.666 but clamped up to min)
    assert start + 1_000_000_000 <= time_next <= now_ns() + 500_000_000 + 666_000_000 + 50_000_000
