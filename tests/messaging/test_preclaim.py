"""An own autocommit INSERT into a message table is written already claimed when this proxy's
manager will send its rows from its cache at once (``MessageManager.preclaim``): each row gets
the claim's ``epoch`` (1) and ``time_next`` (now + ack wait + backoff), and its messages go out
after the commit without the claim UPDATE. Vitess's semantics hold: a message never committed
is never sent, one not acked comes again once due (the redelivery claims it, epoch 2), one
never sent from here (its subscriber left first) is given back unclaimed, due at once with
epoch 0, other proxies never see them before their time_next, and anything not known exactly
keeps the claim."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace

import aiomysql
import mysql.connector
import pytest
import pytest_asyncio

from proxy.errors import ProxyError
from proxy.messaging.dml import MessageDml
from proxy.messaging.manager import MessageManager
from proxy.messaging.service import MessagingService
from proxy.pools import ShardPool, ShardPools
from tests.messaging.conftest import FAST, first_poll_over, run_sql, until
from tests.messaging.proxy_harness import (
    COMMERCE_SHARDS,
    SHARDED_TABLE,
    ProxyStream,
    Served,
    end_proxy,
    launch_proxy,
    served_in_process,
    wait_until_no_subscribers,
)
from vschema.vindexes.hash import hash_uint64

NS = 1_000_000_000
# ack wait 0.5 s: a pre-claimed row's time_next is 0.83-1.17 s ahead (ack wait + backoff 0.5 s x jitter).
LONG_ACK = "vt_ack_wait=30,vt_purge_after=60,vt_batch_size=2,vt_cache_size=100,vt_poller_interval=0.1"


def _manager(service: MessagingService, name: str) -> MessageManager:
    return service.managers[("lookup", "0", name)]


async def _insert(service: MessagingService, pool: ShardPool, name: str, rows: str) -> str:
    """An INSERT as the proxy sends one in autocommit: offered for a pre-claim, run, and its
    commit reported with the statement as sent. Returns that statement."""
    statement = service.preclaim("lookup", "0", name, f"INSERT INTO {name} (id, tenant_id, message) VALUES {rows}")
    await run_sql(pool, statement)
    service.inserted("lookup", MessageDml("insert", "lookup", name, shards=("0",), statements=(("0", statement),)))
    return statement


async def _state(pool: ShardPool, table: str, ids: list[int]) -> dict[int, tuple[int, int | None]]:
    """id -> (epoch, time_next) as stored."""
    res = await run_sql(pool, f"SELECT id, epoch, time_next FROM {table} WHERE id IN ({', '.join(map(str, ids))})")
    return {int(i): (int(e), None if t is None else int(t)) for i, e, t in res.rows}


async def test_an_insert_for_a_local_subscriber_is_written_claimed_and_sent_without_a_claim(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{FAST}")
    s = await subscribe("lookup", name)
    manager = _manager(service, name)
    await first_poll_over(manager)
    claims = manager.counters.claims
    before = time.time_ns()
    sent = await _insert(service, lookup_pool, name, "(1, 1, '{\"a\": 1}'), (2, 2, '{}')")
    assert "`epoch`, `time_next`) VALUES (1, 1, '{\"a\": 1}', 1, " in sent
    rows = await s.rows(2)
    assert sorted(r[0] for r in rows) == ["1", "2"]
    assert ("1", "1", '{"a": 1}') in rows
    stored = await _state(lookup_pool, name, [1, 2])
    assert {e for e, _ in stored.values()} == {1}
    # As the claim writes it: ack wait 0.5 s + backoff (min 0.5 s) x jitter [0.67, 1.33).
    assert all(before + int(0.8 * NS) < t < time.time_ns() + int(1.2 * NS) for _, t in stored.values())  # type: ignore[operator]
    assert manager.counters.claims == claims  # no claim statement
    assert (manager.counters.preclaimed, manager.counters.preclaimed_sent, manager.counters.sent) == (1, 2, 2)
    assert manager.in_flight == 2
    assert await manager.ack([b"1", b"2"]) == 2
    assert manager.in_flight == 0


async def test_a_preclaimed_message_not_acked_comes_again_once_due_and_that_send_claims_it(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{FAST}")
    s = await subscribe("lookup", name)
    manager = _manager(service, name)
    await first_poll_over(manager)
    claims = manager.counters.claims
    await _insert(service, lookup_pool, name, "(7, 1, '{}')")
    await s.rows(1)
    await s.nothing_for(0.6)  # its time_next is >= 0.83 s ahead
    assert (await s.rows(1, within=3))[0][0] == "7"
    assert (await _state(lookup_pool, name, [7]))[7][0] == 2
    assert manager.counters.claims == claims + 1
    assert manager.counters.delayed == 1


async def test_a_preclaimed_insert_whose_subscriber_left_before_its_commit_is_unclaimed_and_due_at_once(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{FAST}")
    first = await subscribe("lookup", name)
    manager = _manager(service, name)
    await first_poll_over(manager)
    statement = service.preclaim("lookup", "0", name, f"INSERT INTO {name} (id, tenant_id, message) VALUES (3, 1, '{{}}')")
    assert "`epoch`" in statement
    await first.close()
    assert not manager.receivers
    await run_sql(lookup_pool, statement)
    service.inserted("lookup", MessageDml("insert", "lookup", name, shards=("0",), statements=(("0", statement),)))
    # As Vitess has it: never sent, so epoch 0 and due now (not after ack wait + backoff).
    await until(lambda: manager.counters.preclaims_undone == 1, what="the pre-claim given back")
    assert (await _state(lookup_pool, name, [3]))[3] == (0, 0)
    committed = time.monotonic()
    second = await subscribe("lookup", name)
    assert (await second.rows(1, within=3))[0][0] == "3"
    assert time.monotonic() - committed < 0.5  # its time_next would be >= 0.83 s ahead
    assert (await _state(lookup_pool, name, [3]))[3][0] == 1  # its first send claimed it
    assert (manager.counters.preclaimed_sent, manager.counters.delayed) == (0, 0)


async def test_preclaimed_messages_still_cached_when_the_last_subscriber_leaves_are_unclaimed(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{LONG_ACK}")
    s = await subscribe("lookup", name)
    manager = _manager(service, name)
    await first_poll_over(manager)
    await _insert(service, lookup_pool, name, "(1, 1, '{}'), (2, 1, '{}')")
    await until(lambda: manager.counters.preclaimed_sent == 2, what="the first batch handed over")
    # Not read: the subscriber has its batch outstanding, the next messages wait in the cache.
    await _insert(service, lookup_pool, name, "(3, 1, '{}'), (4, 1, '{}')")
    assert len(manager.cache) == 2 and manager.counters.preclaimed == 2
    assert {e for e, _ in (await _state(lookup_pool, name, [3, 4])).values()} == {1}
    await s.close()
    await until(lambda: manager.counters.preclaims_undone == 2, what="the pre-claims given back")
    assert await _state(lookup_pool, name, [3, 4]) == {3: (0, 0), 4: (0, 0)}
    assert {e for e, _ in (await _state(lookup_pool, name, [1, 2])).values()} == {1}  # sent: stay claimed
    again = await subscribe("lookup", name)
    assert sorted(r[0] for r in await again.rows(2, within=3)) == ["3", "4"]  # not 30 s later


async def test_a_preclaimed_message_waiting_past_its_margin_is_unclaimed_and_claimed_at_its_send(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{FAST}")
    s = await subscribe("lookup", name)
    manager = _manager(service, name)
    await first_poll_over(manager)
    await _insert(service, lookup_pool, name, "(1, 1, '{}'), (2, 1, '{}')")
    await until(lambda: manager.counters.preclaimed_sent == 2, what="the first batch handed over")
    await _insert(service, lookup_pool, name, "(3, 1, '{}'), (4, 1, '{}')")  # cached: a batch outstanding
    written = {i: t for i, (_, t) in (await _state(lookup_pool, name, [3, 4])).items()}
    # ack wait 0.5 s: their time_next (0.83-1.17 s ahead) is within an ack wait after ~0.67 s at most.
    await asyncio.sleep(0.7)  # the subscriber is slow: the point of this test, not a wait for an effect
    lost = manager.counters.claim_lost
    read_at = time.time_ns()
    assert sorted(r[0] for r in await s.rows(4)) == ["1", "2", "3", "4"]
    assert manager.counters.preclaims_undone == 2
    assert manager.counters.claim_lost == lost  # claimed from epoch 0, as Vitess at a send
    stored = await _state(lookup_pool, name, [3, 4])
    # As Vitess's claim at the send writes it: epoch 1, a whole ack wait + backoff from then.
    assert all(e == 1 and t > read_at + NS > written[i] for i, (e, t) in stored.items()), (stored, written)  # type: ignore[operator]
    assert manager.counters.preclaimed_sent == 2


async def test_a_full_in_flight_cap_leaves_the_insert_to_the_claim(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{LONG_ACK},vt_max_inflight=2")
    s = await subscribe("lookup", name)
    manager = _manager(service, name)
    await first_poll_over(manager)
    await _insert(service, lookup_pool, name, "(1, 1, '{}'), (2, 1, '{}')")
    await s.rows(2)
    assert manager.in_flight == 2
    plain = f"INSERT INTO {name} (id, tenant_id, message) VALUES (3, 1, '{{}}')"
    assert service.preclaim("lookup", "0", name, plain) is plain  # no room: not pre-claimed
    await _insert(service, lookup_pool, name, "(3, 1, '{}')")
    assert (await _state(lookup_pool, name, [3]))[3][0] == 0
    await s.nothing_for(0.3)
    claims = manager.counters.claims
    await manager.ack([b"1"])
    assert (await s.rows(1, within=2))[0][0] == "3"
    assert manager.counters.claims == claims + 1
    assert (await _state(lookup_pool, name, [3]))[3][0] == 1
    assert manager.counters.preclaimed == 1


async def test_an_insert_naming_a_bookkeeping_column_or_without_a_subscriber_is_not_preclaimed(
    tables, service, subscribe, lookup_pool
):
    name = await tables.create(comment=f"vitess_message,{FAST}")
    plain = f"INSERT INTO {name} (id, tenant_id, message) VALUES (1, 1, '{{}}')"
    assert service.preclaim("lookup", "0", name, plain) is plain  # nobody streams the table here
    await subscribe("lookup", name)
    await first_poll_over(_manager(service, name))
    for statement in (
        f"INSERT INTO {name} (id, priority, message) VALUES (1, 5, '{{}}')",
        f"INSERT INTO {name} (id, epoch) VALUES (1, 0)",
        f"INSERT INTO {name} (id, message) VALUES (1, CONCAT('{{', '}}'))",  # not known exactly
        f"INSERT IGNORE INTO {name} (id) VALUES (1)",
    ):
        assert service.preclaim("lookup", "0", name, statement) is statement, statement


async def test_an_insert_of_an_id_still_in_flight_here_is_left_to_the_claim(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{LONG_ACK}")
    s = await subscribe("lookup", name)
    await first_poll_over(_manager(service, name))
    await _insert(service, lookup_pool, name, "(4, 1, '{}')")
    await s.rows(1)
    await run_sql(lookup_pool, f"DELETE FROM {name} WHERE id = 4")  # gone around the proxy, still in flight here
    again = f"INSERT INTO {name} (id, tenant_id, message) VALUES (4, 2, '{{}}')"
    assert service.preclaim("lookup", "0", name, again) is again


async def test_a_preclaimed_insert_that_failed_sends_nothing(tables, service, subscribe, lookup_pool):
    name = await tables.create(comment=f"vitess_message,{LONG_ACK}")
    await run_sql(lookup_pool, f"INSERT INTO {name} (id, time_acked) VALUES (5, {time.time_ns()})")  # acked: not sent
    s = await subscribe("lookup", name)
    await first_poll_over(_manager(service, name))
    statement = service.preclaim("lookup", "0", name, f"INSERT INTO {name} (id, tenant_id, message) VALUES (5, 1, '{{}}')")
    assert "`epoch`" in statement
    with pytest.raises(ProxyError, match="Duplicate entry"):
        await run_sql(lookup_pool, statement)
    service.in_doubt("lookup", name, ["0"])
    await s.nothing_for(0.5)
    assert _manager(service, name).counters.sent == 0


# -- through the proxy -----------------------------------------------------------------------

INSERT = f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES "


@pytest_asyncio.fixture(loop_scope="session")
async def served(local_cluster, shard_pools) -> AsyncIterator[Served]:
    async with served_in_process(local_cluster, shard_pools) as served:
        yield served


def _spanning(base: int) -> int:
    """A base whose 8 ids from it reach both shards by the hash vindex (all 8 land on one
    shard for one base in 128)."""
    while len({hash_uint64(i)[0] < 0x80 for i in range(base, base + 8)}) < 2:
        base += 8
    return base


async def _streaming(served: Served) -> ProxyStream:
    """A subscriber streaming the sharded table through ``served``, once both shards' managers
    have it and their first poll is over (an INSERT before that is not pre-claimed)."""
    stream = await ProxyStream.open(SimpleNamespace(host="127.0.0.1", port=served.port), "commerce",
                                    f"STREAM * FROM {SHARDED_TABLE}")
    managers = [served.manager(shard) for shard in COMMERCE_SHARDS]
    await until(lambda: all(m.receivers for m in managers), what="the subscriber at both shards' managers")
    await first_poll_over(*managers)
    return stream


def _counters(served: Served, name: str) -> dict[str, int]:
    return {s: getattr(served.manager(s).counters, name) for s in COMMERCE_SHARDS}


async def _stored(pools: ShardPools, ids: list[int]) -> dict[int, tuple[str, int]]:
    """id -> (the shard holding it, its epoch)."""
    out: dict[int, tuple[str, int]] = {}
    listed = ", ".join(map(str, ids))
    for shard in COMMERCE_SHARDS:
        res = await run_sql(pools.get("commerce", shard), f"SELECT id, epoch FROM {SHARDED_TABLE} WHERE id IN ({listed})")
        out.update({int(i): (shard, int(e)) for i, e in res.rows})
    return out


async def test_a_multi_shard_insert_through_the_proxy_is_preclaimed_by_each_shards_manager(served, shard_pools):
    base = _spanning(810_000_000 + uuid.uuid4().int % 100_000_000)
    stream = await _streaming(served)
    producer = await served.connect()
    try:
        claims, preclaimed = _counters(served, "claims"), _counters(served, "preclaimed")
        ids = [base + i for i in range(8)]
        async with producer.cursor() as cur:
            assert await cur.execute(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in ids)) == 8
        got = await stream.rows(8)
        assert sorted(int(r[0]) for r in got) == ids
        stored = await _stored(shard_pools, ids)
        assert {e for _, e in stored.values()} == {1}
        shards = {s for s, _ in stored.values()}
        assert shards == set(COMMERCE_SHARDS)
        assert _counters(served, "claims") == claims
        assert _counters(served, "preclaimed") == {s: preclaimed[s] + 1 for s in COMMERCE_SHARDS}
        # One row, one shard (the fast path's single-shard write): pre-claimed too.
        async with producer.cursor() as cur:
            await cur.execute(f"{INSERT}({base + 50}, 1, '{{}}')")
        await stream.rows(1)
        assert (await _stored(shard_pools, [base + 50]))[base + 50][1] == 1
        assert _counters(served, "claims") == claims
        # In a client's transaction: the claim, as before.
        async with producer.cursor() as cur:
            await cur.execute("BEGIN")
            await cur.execute(f"{INSERT}({base + 60}, 1, '{{}}')")
            await cur.execute("COMMIT")
        await stream.rows(1)
        assert (await _stored(shard_pools, [base + 60]))[base + 60][1] == 1
        assert sum(_counters(served, "claims").values()) == sum(claims.values()) + 1
    finally:
        await stream.close()
        producer.close()


async def test_an_insert_on_the_normal_path_is_preclaimed_by_each_shards_manager(served, shard_pools):
    base = _spanning(850_000_000 + uuid.uuid4().int % 100_000_000)
    stream = await _streaming(served)
    producer = await served.connect()
    try:
        async with producer.cursor() as cur:
            await cur.execute("SET WORKLOAD = OLAP")  # the fast path serves OLTP only
        claims, preclaimed = _counters(served, "claims"), _counters(served, "preclaimed")
        fast = sum(served.fast_statements(s) for s in COMMERCE_SHARDS)
        ids = [base + i for i in range(8)]
        async with producer.cursor() as cur:
            assert await cur.execute(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in ids)) == 8
        assert sorted(int(r[0]) for r in await stream.rows(8)) == ids
        assert sum(served.fast_statements(s) for s in COMMERCE_SHARDS) == fast
        stored = await _stored(shard_pools, ids)
        assert {e for _, e in stored.values()} == {1}
        assert {s for s, _ in stored.values()} == set(COMMERCE_SHARDS)
        assert _counters(served, "claims") == claims
        assert _counters(served, "preclaimed") == {s: preclaimed[s] + 1 for s in COMMERCE_SHARDS}
    finally:
        await stream.close()
        producer.close()


async def test_a_prepared_insert_through_the_proxy_is_preclaimed(served, shard_pools):
    base = 820_000_000 + uuid.uuid4().int % 100_000_000
    stream = await _streaming(served)
    try:
        claims = _counters(served, "claims")

        def run() -> None:
            conn = mysql.connector.connect(host="127.0.0.1", port=served.port, user="root", password="",
                                           database="commerce", autocommit=True)
            try:
                cur = conn.cursor(prepared=True)
                cur.execute(f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES (?, ?, ?)", (base, 3, "{}"))
                cur.close()
            finally:
                conn.close()

        await asyncio.to_thread(run)
        (row,) = await stream.rows(1)
        assert int(row[0]) == base
        assert (await _stored(shard_pools, [base]))[base][1] == 1
        assert _counters(served, "claims") == claims
    finally:
        await stream.close()


async def test_another_proxy_never_sends_a_preclaimed_message_before_its_time_next(served, local_cluster, shard_pools,
                                                                                   tmp_path):
    base = 830_000_000 + uuid.uuid4().int % 100_000_000
    second = launch_proxy(local_cluster, tmp_path, "second")
    here = await _streaming(served)
    there = await ProxyStream.open(second, "commerce", f"STREAM * FROM {SHARDED_TABLE}")
    producer = await served.connect()
    try:
        await asyncio.sleep(1.0)  # both first polls over, the watches up
        ids = [base + i for i in range(6)]
        async with producer.cursor() as cur:
            await cur.execute(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in ids))
        inserted = time.monotonic()
        assert sorted(int(r[0]) for r in await here.rows(6)) == ids
        # ack wait 1 s: their time_next is >= 1.67 s after the INSERT; the second proxy polls
        # every second and its watch reads the commit at once: none of them before then.
        await there.nothing_for(1.4 - (time.monotonic() - inserted))
        assert {e for _, e in (await _stored(shard_pools, ids)).values()} == {1}
    finally:
        await here.close()
        await there.close()
        producer.close()
        end_proxy(second)
        await wait_until_no_subscribers(SimpleNamespace(host="127.0.0.1", port=served.port))  # type: ignore[arg-type]


async def test_an_insert_written_claimed_answers_and_stores_its_rows_as_the_client_wrote_them(served):
    base = 840_000_000 + uuid.uuid4().int % 100_000_000
    stream = await _streaming(served)
    conn = await aiomysql.connect(host="127.0.0.1", port=served.port, user="root", password="", db="commerce",
                                  autocommit=True)
    try:
        async with conn.cursor() as cur:
            assert await cur.execute(f"{INSERT}({base}, 4, '{{\"q\": \"it''s\"}}'), ({base + 1}, NULL, NULL)") == 2
            await cur.execute(f"SELECT id, tenant_id, message FROM {SHARDED_TABLE} WHERE id IN ({base}, {base + 1}) ORDER BY id")
            assert await cur.fetchall() == ((base, 4, '{"q": "it\'s"}'), (base + 1, None, None))
        got = await stream.rows(2)
        assert sorted(got, key=str) == sorted([(base, 4, '{"q": "it\'s"}'), (base + 1, None, None)], key=str)
    finally:
        await stream.close()
        conn.close()
