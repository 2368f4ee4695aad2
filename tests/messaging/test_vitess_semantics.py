"""Vitess's messaging semantics end to end, through a proxy served in the test's process, each
with the fast path on and off (``SHARDGATE_FAST_PATH=0``): at-least-once delivery, redelivery
with Vitess's backoff, the INSERT forms, acks (in transactions, their counts), caps, and
subscribers leaving or on another proxy. Pre-claimed INSERTs (``MessageManager.preclaim``) are
in play wherever a subscriber of this proxy takes any message."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pymysql
import pytest
import pytest_asyncio

from tests.messaging.conftest import first_poll_over, run_sql, until
from tests.messaging.proxy_harness import (
    COMMERCE_SHARDS,
    SHARDED_TABLE,
    VITESS_COMMENT,
    ProxyStream,
    Served,
    end_proxy,
    launch_proxy,
    served_in_process,
    wait_until_no_subscribers,
)
from vschema.vindexes.hash import hash_uint64

T = SHARDED_TABLE
INSERT = f"INSERT INTO {T} (id, tenant_id, message) VALUES "


@pytest.fixture(params=["fast", "normal"])
def path(request, monkeypatch):
    if request.param == "normal":
        monkeypatch.setenv("SHARDGATE_FAST_PATH", "0")
    return request.param


@pytest_asyncio.fixture(loop_scope="session")
async def served(local_cluster, shard_pools, path, request) -> AsyncIterator[Served]:
    comment = getattr(request, "param", VITESS_COMMENT)
    async with served_in_process(local_cluster, shard_pools, comment) as s:
        yield s


def _base() -> int:
    return 700_000_000 + uuid.uuid4().int % 100_000_000


async def _stream(served: Served) -> ProxyStream:
    stream = await ProxyStream.open(SimpleNamespace(host="127.0.0.1", port=served.port), "commerce", f"STREAM * FROM {T}")
    managers = [served.manager(s) for s in COMMERCE_SHARDS]
    await until(lambda: all(m.receivers for m in managers), what="subscriber")
    await first_poll_over(*managers)
    return stream


async def _exec(conn, statement: str) -> int:
    async with conn.cursor() as cur:
        return int(await cur.execute(statement))


def _ack(ids) -> str:
    return f"UPDATE {T} SET time_acked = {time.time_ns()}, time_next = NULL WHERE id IN ({', '.join(map(str, ids))}) AND time_acked IS NULL"


async def _close(served, *streams):
    for s in streams:
        await s.close()
    await wait_until_no_subscribers(SimpleNamespace(host="127.0.0.1", port=served.port))


@asynccontextmanager
async def _subscribed(served: Served) -> AsyncIterator[tuple[ProxyStream, Any]]:
    """A subscriber of the table (the managers have it and have polled once) and a client
    connection; afterwards both closed and the proxy left without subscribers."""
    s = await _stream(served)
    c = await served.connect()
    try:
        yield s, c
    finally:
        c.close()
        await _close(served, s)


async def test_a_message_scheduled_in_the_future_is_not_delivered_before_its_time_next(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        at = time.time_ns() + 2 * 10**9
        await _exec(c, f"INSERT INTO {T} (id, tenant_id, message, time_next) VALUES ({b}, 1, '{{}}', {at})")
        await s.nothing_for(1.7)
        rows = await s.rows(1, within=3)
        assert time.time_ns() >= at
        assert int(rows[0][0]) == b


async def test_a_message_inserted_with_a_priority_is_delivered(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, f"INSERT INTO {T} (id, priority, tenant_id, message) VALUES ({b}, 10, 1, '{{}}')")
        rows = await s.rows(1, within=3)
        assert int(rows[0][0]) == b


async def test_messages_inserted_by_insert_select_are_delivered(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        assert int((await s.rows(1))[0][0]) == b
        await _exec(c, _ack([b]))
        try:
            n = await _exec(c, f"INSERT INTO {T} (id, tenant_id, message) SELECT id + 1, tenant_id, message FROM {T} WHERE id = {b}")
        except pymysql.err.MySQLError as e:
            pytest.skip(f"refused: {e}")
        assert n == 1
        rows = await s.rows(1, within=3)
        assert int(rows[0][0]) == b + 1


async def test_a_failed_duplicate_insert_delivers_nothing(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        assert int((await s.rows(1))[0][0]) == b
        assert await _exec(c, _ack([b])) == 1
        with pytest.raises(pymysql.err.IntegrityError):
            await _exec(c, f"{INSERT}({b}, 2, '{{}}')")
        await s.nothing_for(2.6)


async def test_an_ack_rolled_back_leaves_the_message_to_come_again_and_a_committed_one_ends_it(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        assert int((await s.rows(1))[0][0]) == b
        t0 = time.monotonic()
        await _exec(c, "BEGIN")
        assert await _exec(c, _ack([b])) == 1
        await _exec(c, "ROLLBACK")
        rows = await s.rows(1, within=4)
        assert int(rows[0][0]) == b
        assert time.monotonic() - t0 > 1.5
        await _exec(c, "BEGIN")
        assert await _exec(c, _ack([b])) == 1
        await _exec(c, "COMMIT")
        await s.nothing_for(3.0)


async def test_an_ack_counts_only_rows_it_acked(served, path):
    b = _base()
    c = await served.connect()
    try:
        assert await _exec(c, _ack([b])) == 0
        await _exec(c, f"{INSERT}({b}, 1, '{{}}'), ({b + 1}, 1, '{{}}'), ({b + 2}, 1, '{{}}')")
        assert await _exec(c, _ack([b, b + 1, b + 5])) == 2
        assert await _exec(c, _ack([b, b + 1, b + 2])) == 1
        s = await _stream(served)
        await s.nothing_for(1.5)
        await s.close()
    finally:
        c.close()
        await wait_until_no_subscribers(SimpleNamespace(host="127.0.0.1", port=served.port))


async def test_a_deleted_message_never_comes_again(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        assert int((await s.rows(1))[0][0]) == b
        assert await _exec(c, f"DELETE FROM {T} WHERE id IN ({b})") == 1
        await s.nothing_for(2.8)


async def test_a_transactions_messages_are_delivered_after_commit_never_after_rollback(served, path):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, "BEGIN")
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        await _exec(c, "ROLLBACK")
        await _exec(c, "BEGIN")
        await _exec(c, f"{INSERT}({b + 1}, 1, '{{}}')")
        await s.nothing_for(1.2)
        await _exec(c, "COMMIT")
        rows = await s.rows(1, within=2)
        assert int(rows[0][0]) == b + 1
        await s.nothing_for(0.5)


async def test_a_multi_shard_insert_is_delivered_and_only_its_unacked_messages_come_again(served, path):
    b = _base()
    while len({hash_uint64(i)[0] < 0x80 for i in range(b, b + 8)}) < 2:
        b += 8
    ids = list(range(b, b + 8))
    async with _subscribed(served) as (s, c):
        await _exec(c, INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in ids))
        assert sorted(int(r[0]) for r in await s.rows(8)) == ids
        await _exec(c, _ack(ids[:4]))
        again = sorted(int(r[0]) for r in await s.rows(4, within=4))
        assert again == ids[4:]
        await _exec(c, _ack(ids[4:]))
        await s.nothing_for(3.0)


async def test_messages_of_a_subscriber_gone_mid_delivery_reach_the_next_after_the_ack_wait(served, path):
    b = _base()
    a = await _stream(served)
    c = await served.connect()
    try:
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        assert int((await a.rows(1))[0][0]) == b
        await a.close()
        bb = await ProxyStream.open(SimpleNamespace(host="127.0.0.1", port=served.port), "commerce", f"STREAM * FROM {T}")
        rows = await bb.rows(1, within=4)
        assert int(rows[0][0]) == b
        await _exec(c, _ack([b]))
        await bb.close()
    finally:
        c.close()
        await wait_until_no_subscribers(SimpleNamespace(host="127.0.0.1", port=served.port))


async def test_a_row_inserted_directly_on_a_shard_is_delivered(served, path, shard_pools):
    b = _base()
    s = await _stream(served)
    try:
        shard = "-80" if hash_uint64(b)[0] < 0x80 else "80-"
        await run_sql(shard_pools.get("commerce", shard), f"{INSERT}({b}, 1, '{{}}')")
        assert int((await s.rows(1, within=3))[0][0]) == b
    finally:
        await _close(served, s)


@pytest.mark.parametrize("served", [VITESS_COMMENT.replace("vt_ack_wait=1", "vt_ack_wait=3") + ",vt_max_inflight=2"],
                         indirect=True)
async def test_the_in_flight_cap_holds_with_preclaimed_inserts(served, path):
    b = _base()
    while not all(hash_uint64(i)[0] < 0x80 for i in range(b, b + 5)):
        b += 1
    async with _subscribed(served) as (s, c):
        for i in range(5):
            await _exec(c, f"{INSERT}({b + i}, 1, '{{}}')")
        got = await s.rows(2, within=3)
        await s.nothing_for(1.5)
        await _exec(c, _ack([int(r[0]) for r in got]))
        got2 = await s.rows(2, within=3)
        assert not {r[0] for r in got} & {r[0] for r in got2}


async def _row(shard_pools, b):
    shard = "-80" if hash_uint64(b)[0] < 0x80 else "80-"
    res = await run_sql(shard_pools.get("commerce", shard), f"SELECT epoch, time_next, time_acked FROM {T} WHERE id = {b}")
    return tuple(None if v is None else int(v) for v in res.rows[0]) if res.rows else None


@pytest.mark.parametrize("served", [VITESS_COMMENT + ",vt_min_backoff=2,vt_max_backoff=2.5"], indirect=True)
async def test_redeliveries_come_at_ack_wait_plus_the_clamped_backoff(served, path, shard_pools):
    b = _base()
    async with _subscribed(served) as (s, c):
        t0 = time.time_ns()
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        await s.rows(1)
        t1 = time.time_ns()
        epoch, tn, _ = await _row(shard_pools, b)
        assert epoch == 1
        assert t0 + 3 * 10**9 <= tn <= t1 + int(3.5 * 10**9), (tn - t0) / 1e9
        await s.rows(1, within=5)
        t2 = time.time_ns()
        epoch, tn2, _ = await _row(shard_pools, b)
        assert epoch == 2
        assert t2 - 10**8 + 3 * 10**9 <= tn2 <= t2 + int(3.5 * 10**9), (tn2 - t2) / 1e9
        await _exec(c, _ack([b]))


@pytest.mark.parametrize("served", [VITESS_COMMENT + ",vt_max_attempts=2"], indirect=True)
async def test_a_message_is_parked_after_vt_max_attempts_sends(served, path, shard_pools):
    b = _base()
    async with _subscribed(served) as (s, c):
        await _exec(c, f"{INSERT}({b}, 1, '{{}}')")
        await s.rows(1)
        await s.rows(1, within=4)
        await s.nothing_for(3.5)
        epoch, tn, ta = await _row(shard_pools, b)
        assert (epoch, tn, ta) == (2, None, None)


async def test_messages_left_unacked_on_one_proxy_reach_a_subscriber_of_another(served, path, local_cluster, tmp_path, shard_pools):
    b = _base()
    second = launch_proxy(local_cluster, tmp_path, "second")
    a = await _stream(served)
    there = await ProxyStream.open(second, "commerce", f"STREAM * FROM {T}")
    c = await served.connect()
    try:
        await _exec(c, f"{INSERT}({b}, 1, '{{}}'), ({b + 1}, 1, '{{}}')")
        # Written claimed for this proxy's subscriber: the other proxy never sees them first.
        assert sorted(int(r[0]) for r in await a.rows(2)) == [b, b + 1]
        t0 = time.monotonic()
        await a.close()  # not acked
        assert sorted(int(r[0]) for r in await there.rows(2, within=5)) == [b, b + 1]
        assert time.monotonic() - t0 > 1.5  # after ack wait 1 s + backoff >= 1 s
        await _exec(c, _ack([b, b + 1]))
        await there.nothing_for(3)
    finally:
        c.close()
        await there.close()
        end_proxy(second)
        await wait_until_no_subscribers(SimpleNamespace(host="127.0.0.1", port=served.port))
