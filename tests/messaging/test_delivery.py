"""Delivery through the messaging service over a real shard (unsharded `lookup/0`)."""

from __future__ import annotations

import time

from proxy.messaging import service as service_module
from proxy.messaging.dml import MessageDml
from tests.messaging.conftest import FAST, first_poll_over, now_ns, run_sql, until


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
    res = await run_sql(lookup_pool, f"SELECT time_next FROM {name} WHERE id = 1")
    due_again = int(res.rows[0][0])  # the resend's claim comes no earlier (it claims due rows only)
    await s.rows(1, within=3)  # after ack_wait 0.5 + backoff [0.5, 0.67)
    sent_again = now_ns()  # no earlier than the claim
    res = await run_sql(lookup_pool, f"SELECT epoch, time_next FROM {name} WHERE id = 1")
    epoch, time_next = (int(v) for v in res.rows[0])
    assert epoch == 2
    # epoch 1 -> ack_wait 0.5 s + clamp(0.5 * 2 * jitter) in [0.666, 1.333) s after the claim,
    # which lies between due_again and sent_again. (The lower bound once counted from
    # sent_again: a resend handed over more than 66 ms after its claim failed it.)
    assert due_again + 1_100_000_000 <= time_next <= sent_again + 1_850_000_000


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


async def test_acked_rows_are_purged_after_purge_after(tables, service, subscribe, lookup_pool):
    # vt_purge_after=10: row 2, acked now, stays for 10 s however late the purge passes run
    # (with 1 s, a purge pass 1 s late took it too); row 1 was acked 20 s ago.
    name = await tables.create(comment=f"vitess_message,{FAST.replace('vt_purge_after=1', 'vt_purge_after=10')}")
    await run_sql(
        lookup_pool,
        f"INSERT INTO {name} (id, time_acked, time_next) VALUES (1, {now_ns() - 20_000_000_000}, NULL), (2, {now_ns()}, NULL)",
    )
    await subscribe("lookup", name)
    manager = service.managers[("lookup", "0", name)]
    # Purge passes run every poller interval (0.2 s): wait for the one that purges, not 0.6 s.
    await until(lambda: manager.counters.purged >= 1, what="a purge")
    res = await run_sql(lookup_pool, f"SELECT id FROM {name} ORDER BY id")
    assert res.rows == [(b"2",)]
    assert manager.counters.purged == 1


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
    got = await s.rows(1, within=10)
    arrived = now_ns()
    assert got[0][0] == "1"
    # The next poll is 30 s away: arriving within 10 s of its time shows the timer sent it (a
    # 0.3 s bound failed when the machine was busy).
    assert due <= arrived <= due + 10_000_000_000


async def test_notify_delivers_a_commit_before_the_next_poll(tables, service, subscribe, lookup_pool):
    slow_poll = FAST.replace("vt_poller_interval=0.2", "vt_poller_interval=30")
    name = await tables.create(comment=f"vitess_message,{slow_poll}")
    s = await subscribe("lookup", name)
    await first_poll_over(service.managers[("lookup", "0", name)])
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    service.notify("lookup", "0", name)
    assert (await s.rows(1, within=10))[0][0] == "1"  # the next poll is 30 s away


async def test_row_inserted_without_notify_is_delivered_by_the_poller(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    await first_poll_over(service.managers[("lookup", "0", name)])
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    assert (await s.rows(1, within=5))[0][0] == "1"  # nothing but the poller can send it



async def _held_tail(service, subscribe, lookup_pool, monkeypatch, name: str, hold: float):
    """A subscriber that got messages 1 and 2 of three (vt_batch_size=2) while an own INSERT
    into the table is in flight: message 3 is a backlog's tail."""
    # The own INSERT stays in flight for the whole test: by default it stops counting after
    # 1 s, which a slow poll and claim took up (the tail then went out alone).
    monkeypatch.setattr(service_module, "INSERT_IN_FLIGHT_SECONDS", 30.0)
    s = await subscribe("lookup", name)
    service.managers[("lookup", "0", name)].tail_hold = hold
    assert service.own_mark("lookup", name) is not None  # an own INSERT starts
    assert service.insert_in_flight("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.batch()] == ["1", "2"]
    return s


async def test_backlog_tail_waits_for_the_own_insert_in_flight_and_goes_out_with_its_rows(
    tables, service, subscribe, lookup_pool, monkeypatch
):
    name = await tables.create()
    s = await _held_tail(service, subscribe, lookup_pool, monkeypatch, name, hold=30.0)
    await s.nothing_for(0.3)
    insert = f"INSERT INTO {name} (id) VALUES (4)"
    await run_sql(lookup_pool, insert)
    service.inserted("lookup", MessageDml("insert", "lookup", name, statements=(("0", insert),)))
    assert not service.insert_in_flight("lookup", name)
    assert [r[0] for r in await s.batch(within=10)] == ["3", "4"]  # well before the 30 s hold


async def test_backlog_tail_goes_out_at_once_when_the_insert_in_flight_fails(
    tables, service, subscribe, lookup_pool, monkeypatch
):
    name = await tables.create()
    s = await _held_tail(service, subscribe, lookup_pool, monkeypatch, name, hold=30.0)
    service.in_doubt("lookup", name, ["0"])
    assert [r[0] for r in await s.batch(within=10)] == ["3"]  # well before the 30 s hold


async def test_backlog_tail_goes_out_alone_when_its_hold_ends(tables, service, subscribe, lookup_pool, monkeypatch):
    name = await tables.create()
    s = await _held_tail(service, subscribe, lookup_pool, monkeypatch, name, hold=0.5)
    first = time.monotonic()
    assert [r[0] for r in await s.batch(within=3)] == ["3"]
    assert time.monotonic() - first >= 0.4  # held from before the first batch was handed over


async def test_backlog_tail_without_an_insert_in_flight_is_not_held(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    service.managers[("lookup", "0", name)].tail_hold = 30.0
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.rows(3, within=10)] == ["1", "2", "3"]  # well before the 30 s hold


async def test_message_without_backlog_is_not_held(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name)
    service.managers[("lookup", "0", name)].tail_hold = 30.0
    service.own_mark("lookup", name)
    await first_poll_over(service.managers[("lookup", "0", name)])
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.batch(within=10)] == ["1"]  # well before the 30 s hold


async def test_filtered_subscriber_gets_the_tail_at_once(tables, service, subscribe, lookup_pool):
    name = await tables.create()
    s = await subscribe("lookup", name, where="tenant_id = 1")
    service.managers[("lookup", "0", name)].tail_hold = 30.0
    service.own_mark("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1), (2, 1), (3, 1)")
    service.notify("lookup", "0", name)
    assert [r[0] for r in await s.rows(3, within=10)] == ["1", "2", "3"]  # well before the 30 s hold


async def test_an_own_insert_never_ended_stops_counting_as_in_flight(tables, service, monkeypatch):
    monkeypatch.setattr(service_module, "INSERT_IN_FLIGHT_SECONDS", 1.0)
    name = await tables.create()
    await service.reload("lookup")  # the service knows the new message table
    service.own_mark("lookup", name)  # an INSERT in a transaction that is then rolled back
    assert service.insert_in_flight("lookup", name)
    await until(lambda: not service.insert_in_flight("lookup", name), what="the mark's expiry")
    assert not service.insert_in_flight("lookup", "not_a_message_table")
