"""Messages inserted through the proxy are cached at commit from the INSERT's own values (no
poll), exactly as a poll would read them; any value the proxy cannot render exactly is read by
a poll as before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from proxy.messaging.dml import MessageDml
from proxy.messaging.inserted import parse_insert
from proxy.messaging.manager import MessageManager
from proxy.messaging.schema import load_message_tables
from proxy.messaging.service import MessagingService
from tests.messaging.conftest import FAST, SHARDS, Stream, first_poll_over, run_sql

SLOW_POLL = FAST.replace("vt_poller_interval=0.2", "vt_poller_interval=30").replace("vt_batch_size=2", "vt_batch_size=10")
# One column of each kind whose value an INSERT's literal determines exactly, and some that never do.
KINDS = (
    ",\n  v VARCHAR(8), vb VARBINARY(8), tx TEXT, bl BLOB, u INT UNSIGNED, sm SMALLINT NOT NULL DEFAULT 7,"
    " c CHAR(4), d DECIMAL(5,2)"
)
STREAMED = "id, tenant_id, message, v, vb, tx, bl, u, sm, c, d"


@asynccontextmanager
async def _serving(shard_pools, name: str) -> AsyncIterator[tuple[MessagingService, Stream, MessageManager]]:
    """A messaging service over the shards with one subscriber of ``name`` whose first poll is
    over (the counts tests compare are settled), stopped on exit."""
    svc = MessagingService(shard_pools, SHARDS)
    await svc.start()
    s = await Stream(svc.subscribe("lookup", name)).open()
    try:
        await first_poll_over(svc.managers[("lookup", "0", name)])
        yield svc, s, svc.managers[("lookup", "0", name)]
    finally:
        await s.close()
        await svc.stop()


async def _insert_through_proxy(svc: MessagingService, pool, name: str, sql: str) -> None:
    """What the front end does: the shard commits the INSERT, then messaging hears of it."""
    await run_sql(pool, sql)
    svc.inserted("lookup", MessageDml("insert", "lookup", name, statements=(("0", sql),)))


async def _as_polled(pool, name: str, ids: str) -> list[tuple]:
    res = await run_sql(pool, f"SELECT {STREAMED} FROM {name} WHERE id IN ({ids}) ORDER BY id")
    return [tuple(None if v is None else v.decode() for v in row) for row in res.rows]


async def test_message_inserted_through_the_proxy_is_delivered_from_its_values_with_the_polled_columns(
    tables, shard_pools, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL}", extra=KINDS)
    async with _serving(shard_pools, name) as (svc, s, manager):
        polls = manager.counters.polls
        await _insert_through_proxy(svc, lookup_pool, name, (
            f"INSERT INTO {name} (id, tenant_id, message, v, vb, tx, bl, u) VALUES"
            " (1, -5, '{\"a\": [1, 2]}', 'it''s', 'ab', 'é☃ x', '', 4294967295),"
            " (2, NULL, NULL, '', NULL, NULL, 'z', 0)"
        ))  # fmt: skip
        got = sorted(await s.rows(2, within=3))
        assert got == await _as_polled(lookup_pool, name, "1, 2")
        assert got[0] == ("1", "-5", '{"a": [1, 2]}', "it's", "ab", "é☃ x", "", "4294967295", "7", None, None)
        assert (manager.counters.inserts_cached, manager.counters.polls) == (1, polls)


@pytest.mark.parametrize(
    "values",
    [
        "(1, 1, NULL, 'ab ', NULL)",  # CHAR drops trailing spaces
        "(1, 1, 1.5, NULL, NULL)",  # DECIMAL
        "(1, 1 + 1, NULL, NULL, NULL)",  # an expression
        "(1, 1, NULL, NULL, 'a\\\\nb')",  # a backslash escape
        "(1, '7', NULL, NULL, NULL)",  # a string into an integer column
    ],
    ids=["char", "decimal", "expression", "backslash", "string-into-int"],
)
async def test_value_the_proxy_cannot_render_exactly_is_delivered_as_the_poll_reads_it(
    tables, shard_pools, lookup_pool, values
):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL}", extra=KINDS)
    async with _serving(shard_pools, name) as (svc, s, manager):
        polls = manager.counters.polls
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id, tenant_id, d, c, v) VALUES {values}")
        assert await s.rows(1, within=3) == await _as_polled(lookup_pool, name, "1")
        assert manager.counters.inserts_cached == 0
        assert manager.counters.inserts_polled == 1 and manager.counters.polls > polls


async def test_insert_leaving_out_a_column_with_a_string_default_is_polled(tables, shard_pools, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL}", extra=",\n  label VARCHAR(8) NOT NULL DEFAULT 'new'")
    async with _serving(shard_pools, name) as (svc, s, manager):
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id) VALUES (1)")
        assert await s.rows(1, within=3) == [("1", None, None, "new")]
        assert (manager.counters.inserts_cached, manager.counters.inserts_polled) == (0, 1)


async def test_priority_and_time_next_as_written_order_the_cached_messages(tables, shard_pools, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL.replace('vt_batch_size=10', 'vt_batch_size=1')}")
    async with _serving(shard_pools, name) as (svc, s, manager):
        await _insert_through_proxy(svc, lookup_pool, name, (
            f"INSERT INTO {name} (id, priority, time_next) VALUES (1, 50, 0), (2, 10, 0), (3, 50, 5)"
        ))  # fmt: skip
        order = [(await s.rows(1, within=3))[0][0] for _ in range(3)]
        assert order == ["2", "3", "1"]  # priority first, then the newest time_next
        assert manager.counters.inserts_cached == 1


async def test_message_scheduled_in_the_future_is_left_to_the_poll_and_sent_at_its_time(
    tables, shard_pools, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL}")
    async with _serving(shard_pools, name) as (svc, s, manager):
        at = time.time_ns() + 1_500_000_000
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id, time_next) VALUES (1, {at})")
        # Nothing before its time: watched until 0.2 s before it (a fixed 0.15 s after an
        # INSERT meant for 0.3 s ahead ran past it when the INSERT was slow).
        await s.nothing_for(max((at - time.time_ns()) / 1e9 - 0.2, 0.05))
        assert [r[0] for r in await s.rows(1, within=3)] == ["1"]
        assert (manager.counters.inserts_cached, manager.counters.inserts_polled) == (0, 1)


async def test_table_with_a_trigger_has_its_inserts_polled(tables, shard_pools, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL}")
    await run_sql(lookup_pool, f"CREATE TRIGGER {name}_t BEFORE INSERT ON {name} FOR EACH ROW SET NEW.tenant_id = 99")
    async with _serving(shard_pools, name) as (svc, s, manager):
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 1)")
        assert [r[:2] for r in await s.rows(1, within=3)] == [("1", "99")]
        assert (manager.counters.inserts_cached, manager.counters.inserts_polled) == (0, 1)


async def test_insert_through_the_proxy_beyond_the_cache_size_is_delivered_whole(tables, shard_pools, lookup_pool):
    comment = SLOW_POLL.replace("vt_poller_interval=30", "vt_poller_interval=1").replace("vt_ack_wait=0.5", "vt_ack_wait=30")
    name = await tables.create(comment=f"vitess_message,{comment}")
    async with _serving(shard_pools, name) as (svc, s, manager):
        values = ", ".join(f"({i})" for i in range(1, 26))  # the cache holds 10
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id) VALUES {values}")
        got = [r[0] for r in await s.rows(25, within=5)]
        assert sorted(got, key=int) == [str(i) for i in range(1, 26)]
        assert manager.counters.inserts_cached == 1


async def test_insert_through_the_proxy_with_only_filtered_subscribers_is_polled_with_their_filter(
    tables, shard_pools, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL}")
    svc = MessagingService(shard_pools, SHARDS)
    await svc.start()
    s = await Stream(svc.subscribe("lookup", name, where="tenant_id = 7")).open()
    try:
        manager = svc.managers[("lookup", "0", name)]
        await first_poll_over(manager)
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id, tenant_id) VALUES (1, 8), (2, 7)")
        assert [r[:2] for r in await s.rows(1, within=3)] == [("2", "7")]
        await s.nothing_for(0.3)
        assert (manager.counters.inserts_cached, manager.counters.inserts_polled) == (0, 1)
        assert len(manager.cache) == 0  # the row no subscriber takes was never read
    finally:
        await s.close()
        await svc.stop()


async def test_binlog_wake_up_for_an_own_cached_insert_costs_no_poll_in_either_order(tables, shard_pools, lookup_pool):
    # ack_wait 30 s: messages 1 and 2 (never acked) must not come again before message 3 does
    # (with 0.5 s they did, once the steps in between took a second).
    name = await tables.create(comment=f"vitess_message,{SLOW_POLL.replace('vt_ack_wait=0.5', 'vt_ack_wait=30')}")
    async with _serving(shard_pools, name) as (svc, s, manager):
        polls = manager.counters.polls
        # The watch reads the commit after the proxy reported it ...
        await _insert_through_proxy(svc, lookup_pool, name, f"INSERT INTO {name} (id) VALUES (1)")
        manager.binlog_insert(time.time())
        # ... or before (a multi-shard INSERT is reported once its last shard committed).
        await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (2)")
        manager.binlog_insert(time.time())
        svc.inserted("lookup", MessageDml("insert", "lookup", name, statements=(("0", f"INSERT INTO {name} (id) VALUES (2)"),)))
        assert sorted(r[0] for r in await s.rows(2, within=3)) == ["1", "2"]
        await asyncio.sleep(0.1)
        assert (manager.counters.binlog_covered, manager.counters.binlog_wakeups, manager.counters.polls) == (2, 0, polls)
        # A commit nobody reports was written around the proxy: after a moment, it is polled.
        await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (3)")
        manager.binlog_insert(time.time())
        assert [r[0] for r in await s.rows(1, within=3)] == ["3"]
        assert (manager.counters.binlog_wakeups, manager.counters.polls) == (1, polls + 1)


async def test_a_poll_does_not_queue_again_a_message_acked_while_it_ran(tables, lookup_pool):
    name = await tables.create()
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2)")
    async with lookup_pool.connection() as sc:
        spec = (await load_message_tables(sc))[name].spec
    m = MessageManager("lookup", "0", spec, lookup_pool)  # not opened: the test drives the poll
    try:
        poll = asyncio.ensure_future(m.poll())
        # Until the poll's SELECT is on its way (its snapshot may predate the ack). By time, not
        # by a count of loop turns: the poll may first open a connection to the shard.
        deadline = time.monotonic() + 10
        for _ in range(100_000_000):
            if m._in_poll or poll.done() or time.monotonic() > deadline:
                break
            await asyncio.sleep(0)
        assert m._in_poll
        m.acked([b"1"])
        await poll
        assert [msg.id for msg in m.cache.pop(10)] == [b"2"]
        assert m.counters.poll_skipped_settled == 1
    finally:
        await m.close()


def test_only_plain_multi_row_inserts_of_literals_are_parsed():
    assert parse_insert("insert into `ks`.`t`(id, m) values (1, 'a''b'), (-2, NULL);") == (
        "t", ["id", "m"], [["1", "-2"], ["'a''b'", "NULL"]]
    )
    for sql in (
        "insert ignore into t (id) values (1)",
        "replace into t (id) values (1)",
        "insert into t (id) values (1) on duplicate key update id = 2",
        "insert into t (id) select 1",
        "insert into t set id = 1",
        "insert into t (id, m) values (1, 'a\\'b')",
        "insert into t (id) values (1e3)",
        "insert into t (id) values (1), (2, 3)",
        "insert into t (id) values (1) /* comment */",
    ):
        assert parse_insert(sql) is None, sql


def test_string_values_holding_the_row_separators_are_split_only_at_the_rows():
    # A value may hold what separates values and rows ("," "(" ")" "), ("), a doubled quote or
    # spaces: a faster splitter must still split at the statement's own separators only.
    assert parse_insert(
        "insert into t (id, tenant_id, m) values (1, 7, 'a, b'), (2, 7, 'x), (y'),"
        " (3, NULL, ' (''q'') '),(4,8,'')"
    ) == (
        "t",
        ["id", "tenant_id", "m"],
        [
            ["1", "2", "3", "4"],
            ["7", "7", "NULL", "8"],
            ["'a, b'", "'x), (y'", "' (''q'') '", "''"],
        ],
    )
    # Literals whose bytes are not their text (hex, bit, charset-introduced) are never parsed.
    for sql in (
        "insert into t (id, m) values (1, X'41')",
        "insert into t (id, m) values (1, 0x41)",
        "insert into t (id, m) values (1, b'1')",
        "insert into t (id, m) values (1, _utf8mb4'a')",
        "insert into t (id, m) values (1, 'a'), (2, 'b') on duplicate key update m = 'c'",
    ):
        assert parse_insert(sql) is None, sql
