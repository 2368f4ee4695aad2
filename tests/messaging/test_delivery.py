"""Delivery through the messaging service over a real shard (unsharded `lookup/0`)."""

from __future__ import annotations

import asyncio
import time

from proxy.messaging import service as service_module
from proxy.messaging.dml import MessageDml
from tests.messaging.conftest import FAST, now_ns, run_sql


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


async def test_unacked_message_is_resent_with_epoch_two_inside_backoff_window(tables, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1)")
    await s.rows(1)
    await s.rows(1, within=3)  # after ack_wait 0.5 + backoff [0.5, 0.67)
    sent_again = now_ns()
    res = await run_sql(lookup_pool, f"SELECT epoch, time_next FROM {name} WHERE id = 1")
    epoch, time_next = (int(v) for v in res.rows[0])
    assert epoch == 2
    # epoch 1 -> ack_wait 0.5 s + clamp(0.5 * 2 * jitter) in [0.666, 1.333) s
    assert sent_again + 1_100_000_000 <= time_next <= sent_again + 1_850_000_000


async def test_ack_counts_once_and_second_ack_counts_zero(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1)")
    await s.rows(1)
    manager = service.managers[("lookup", "0", name)]
    assert await manager.ack([b"1"]) == 1
    assert await manager.ack([b"1", b"404"]) == 0


async def test_acked_message_is_not_resent(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1)")
    await s.rows(1)
    await service.managers[("lookup", "0", name)].ack([b"1"])
    await s.nothing_for(1.5)


async def test_acked_rows_are_purged_after_purge_after(tables, subscribe, lookup_pool):
    name = await tables.create()
    await run_sql(
        lookup_pool,
        f"INSERT INTO {name} (id, time_acked, time_next) VALUES (1, {now_ns() - 2_000_000_000}, NULL), (2, {now_ns()}, NULL)",
    )
    await subscribe("lookup", name)
    await asyncio.sleep(0.6)
    res = await run_sql(lookup_pool, f"SELECT id FROM {name} ORDER BY id")
    assert res.rows == [(b"2",)]


async def test_batches_hold_at_most_batch_size_rows(tables, subscribe, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3), (4), (5)")
    s = await subscribe("lookup", name)
    sizes = []
    while sum(sizes) < 5:
        sizes.append(len(await s.batch()))
    assert max(sizes) == 2


async def test_lower_priority_value_is_delivered_first(tables, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{FAST.replace('vt_batch_size=2', 'vt_batch_size=1')}")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, priority) VALUES (1, 50), (2, 10), (3, 30)")
    s = await subscribe("lookup", name)
    got = [(await s.batch())[0][0] for _ in range(3)]
    assert got == ["2", "3", "1"]


async def test_never_sent_row_with_null_time_next_is_delivered(tables, subscribe, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, time_next, epoch) VALUES (1, NULL, 0)")
    s = await subscribe("lookup", name)
    assert (await s.rows(1))[0][0] == "1"


async def test_parked_row_with_null_time_next_and_epoch_is_not_delivered(tables, subscribe, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, time_next, epoch) VALUES (1, NULL, 3)")
    s = await subscribe("lookup", name)
    await s.nothing_for(0.6)


async def test_rescheduling_by_sql_rearms_a_parked_message(tables, subscribe, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, time_next, epoch) VALUES (1, NULL, 3)")
    s = await subscribe("lookup", name)
    await run_sql(
        lookup_pool, f"UPDATE {name} SET priority = 5, time_next = 0, epoch = 0 WHERE id IN (1) AND time_acked IS NULL"
    )
    assert (await s.rows(1))[0][0] == "1"


async def test_future_message_is_delivered_at_its_time_not_at_next_poll(tables, service, subscribe, lookup_pool):
    slow_poll = FAST.replace("vt_poller_interval=0.2", "vt_poller_interval=30")
    name = await tables.create(comment=f"vitess_message,{slow_poll}")
    s = await subscribe("lookup", name)
    due = now_ns() + 700_000_000
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, time_next) VALUES (1, {due})")
    service.notify("lookup", "0", name)
    got = await s.rows(1, within=3)
    arrived = now_ns()
    assert got[0][0] == "1"
    assert due <= arrived <= due + 300_000_000


async def test_notify_delivers_a_commit_before_the_next_poll(tables, service, subscribe, lookup_pool):
    slow_poll = FAST.replace("vt_poller_interval=0.2", "vt_poller_interval=30")
    name = await tables.create(comment=f"vitess_message,{slow_poll}")
    s = await subscribe("lookup", name)
    await asyncio.sleep(0.1)  # the subscriber's initial poll is done
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    service.notify("lookup", "0", name)
    assert (await s.rows(1, within=1))[0][0] == "1"


async def test_row_inserted_without_notify_is_delivered_by_the_poller(tables, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await asyncio.sleep(0.1)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    assert (await s.rows(1, within=1))[0][0] == "1"



async def _held_tail(service, subscribe, lookup_pool, name: str, hold: float):
    """A subscriber that got messages 1 and 2 of three (vt_batch_size=2) while an own INSERT
    into the table is in flight: message 3 is a backlog's tail."""
    s = await subscribe("lookup", name)
    service.managers[("lookup", "0", name)].tail_hold = hold
    assert service.own_mark("lookup", name) is not None  # an own INSERT starts
    assert service.insert_in_flight("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.batch()] == ["1", "2"]
    return s


async def test_backlog_tail_waits_for_the_own_insert_in_flight_and_goes_out_with_its_rows(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create()
    s = await _held_tail(service, subscribe, lookup_pool, name, hold=5.0)
    await s.nothing_for(0.3)
    insert = f"INSERT INTO {name} (id) VALUES (4)"
    await run_sql(lookup_pool, insert)
    service.inserted("lookup", MessageDml("insert", "lookup", name, statements=(("0", insert),)))
    assert not service.insert_in_flight("lookup", name)
    assert [r[0] for r in await s.batch(within=2)] == ["3", "4"]


async def test_backlog_tail_goes_out_at_once_when_the_insert_in_flight_fails(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create()
    s = await _held_tail(service, subscribe, lookup_pool, name, hold=5.0)
    service.in_doubt("lookup", name, ["0"])
    assert [r[0] for r in await s.batch(within=1)] == ["3"]


async def test_backlog_tail_goes_out_alone_when_its_hold_ends(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await _held_tail(service, subscribe, lookup_pool, name, hold=0.5)
    first = time.monotonic()
    assert [r[0] for r in await s.batch(within=3)] == ["3"]
    assert time.monotonic() - first >= 0.4  # held from before the first batch was handed over


async def test_backlog_tail_without_an_insert_in_flight_is_not_held(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    service.managers[("lookup", "0", name)].tail_hold = 5.0
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.rows(3, within=1)] == ["1", "2", "3"]


async def test_message_without_backlog_is_not_held(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    service.managers[("lookup", "0", name)].tail_hold = 5.0
    service.own_mark("lookup", name)
    await asyncio.sleep(0.1)  # the subscriber's initial poll is done
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.batch(within=1)] == ["1"]


async def test_filtered_subscriber_gets_the_tail_at_once(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name, where="tenant_id = 1")
    service.managers[("lookup", "0", name)].tail_hold = 5.0
    service.own_mark("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1), (2, 1), (3, 1)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.rows(3, within=1)] == ["1", "2", "3"]


async def test_an_own_insert_never_ended_stops_counting_as_in_flight(tables, service, monkeypatch):
    monkeypatch.setattr(service_module, "INSERT_IN_FLIGHT_SECONDS", 0.2)
    name = await tables.create()
    await service.reload("lookup")  # the service knows the new message table
    service.own_mark("lookup", name)  # an INSERT in a transaction that is then rolled back
    assert service.insert_in_flight("lookup", name)
    await asyncio.sleep(0.3)
    assert not service.insert_in_flight("lookup", name)
    assert not service.insert_in_flight("lookup", "not_a_message_table")
