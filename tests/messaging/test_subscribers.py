"""Several subscribers, slow and vanishing subscribers, and two proxies on one shard."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from proxy.messaging.service import MessagingService
from tests.messaging.conftest import SHARDS, Stream, first_poll_over, run_sql


async def test_two_subscribers_share_messages_round_robin(tables, subscribe, lookup_pool):
    name = await tables.create()
    a = await subscribe("lookup", name)
    b = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3), (4)")
    got_a = await a.batch()
    got_b = await b.batch()
    ids = [r[0] for r in got_a + got_b]
    assert got_a and got_b
    assert len(ids) == len(set(ids))


async def test_batches_for_several_free_subscribers_are_claimed_in_one_statement(tables, service, subscribe, lookup_pool):
    slow_poll = "vt_ack_wait=5,vt_purge_after=1,vt_batch_size=2,vt_cache_size=10,vt_poller_interval=30"
    name = await tables.create(comment=f"vitess_message,{slow_poll}")
    streams = [await subscribe("lookup", name) for _ in range(3)]
    manager = service.managers[("lookup", "0", name)]
    await first_poll_over(manager)  # it found nothing
    claims = manager.counters.claims
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3), (4), (5), (6)")
    service.notify("lookup", "0", name)  # as a commit through the proxy does
    batches = [await s.batch() for s in streams]
    assert sorted(r[0] for b in batches for r in b) == ["1", "2", "3", "4", "5", "6"]
    assert [len(b) for b in batches] == [2, 2, 2]
    assert manager.counters.claims == claims + 1


async def test_busy_subscriber_gets_no_second_batch_while_others_take_the_rest(tables, subscribe, lookup_pool):
    name = await tables.create()
    slow = await subscribe("lookup", name)
    fast = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2), (3), (4), (5), (6)")
    # `slow` never asks for its first batch: it holds at most one batch (2 rows); `fast` gets the rest.
    got = await fast.rows(4, within=3)
    assert len(got) == 4
    first_slow = await slow.batch()
    assert len(first_slow) <= 2
    assert {r[0] for r in got} | {r[0] for r in first_slow} == {"1", "2", "3", "4", "5", "6"}


async def test_disconnected_subscriber_loses_nothing(tables, subscribe, lookup_pool):
    name = await tables.create()
    gone = await subscribe("lookup", name)
    await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES (1), (2)")
    taken = await gone.batch()
    await gone.close()
    stays = await subscribe("lookup", name)
    again = await stays.rows(len(taken), within=4)
    assert {r[0] for r in taken} <= {r[0] for r in again}


async def test_two_services_on_one_shard_never_send_a_message_twice_within_ack_wait(tables, shard_pools, lookup_pool):
    # ack_wait 5 s: within this test every message may be delivered exactly once in total.
    name = await tables.create(
        comment="vitess_message,vt_ack_wait=5,vt_purge_after=60,vt_batch_size=3,vt_cache_size=100,vt_poller_interval=0.05"
    )
    first, second = MessagingService(shard_pools, SHARDS), MessagingService(shard_pools, SHARDS)
    await first.start()
    await second.start()
    streams = []
    try:
        for svc in (first, second, first, second):
            streams.append(await Stream(svc.subscribe("lookup", name)).open())
        values = ", ".join(f"({i})" for i in range(1, 61))
        await run_sql(lookup_pool, f"INSERT INTO {name} (id) VALUES {values}")
        delivered: Counter[str] = Counter()
        everything = {str(i) for i in range(1, 61)}
        # Until every message came (at most 8 s, before any resend is due: ack_wait 5 s plus a
        # backoff of at least 5 s), not until a 1 s lull, which slow polls and claims made.
        deadline = time.monotonic() + 8

        async def drain(s: Stream) -> None:
            while not everything <= set(delivered) and (left := deadline - time.monotonic()) > 0:
                try:
                    rows = await s.batch(within=min(left, 0.2))
                except TimeoutError:
                    continue
                delivered.update(r[0] for r in rows)

        await asyncio.gather(*(drain(s) for s in streams))
        assert set(delivered) == {str(i) for i in range(1, 61)}
        assert max(delivered.values()) == 1
    finally:
        for s in streams:
            await s.close()
        await first.stop()
        await second.stop()
