"""Message-table writes on the fast path (proxy.fast_path) tell messaging what the normal path
tells it: a single-row INSERT is cached by its shard's manager from the statement's own values
(delivered without a poll), an ack frees the messages it names. A proxy served in this process
over the real shards, so the managers' counters can be read."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import aiomysql
import pytest_asyncio

import proxy.connection as connection_module
from tests.messaging.conftest import first_poll_over
from tests.messaging.proxy_harness import SHARDED_TABLE, VITESS_COMMENT, Served, served_in_process
from vschema.vindexes.hash import hash_uint64

# ack_wait 30 s: no message comes again while a test runs (with 1 s, nine INSERTs and reads
# that took over a second brought resends into the reads and out of the in-flight count).
LONG_ACK_WAIT = VITESS_COMMENT.replace("vt_ack_wait=1", "vt_ack_wait=30")


@pytest_asyncio.fixture(loop_scope="session")
async def served(local_cluster, shard_pools) -> AsyncIterator[Served]:
    async with served_in_process(local_cluster, shard_pools, LONG_ACK_WAIT) as served:
        yield served


async def _subscribed(served: Served) -> tuple[aiomysql.Connection, aiomysql.Connection, aiomysql.SSCursor]:
    """A subscriber streaming the sharded message table (its first poll over) and a producer."""
    stream = await served.connect()
    producer = await served.connect()
    async with stream.cursor() as cur:
        await cur.execute("SET WORKLOAD = OLAP")
    reader = await stream.cursor(aiomysql.SSCursor)
    await reader.execute(f"STREAM * FROM {SHARDED_TABLE}")
    await first_poll_over(*(served.manager(s) for s in ("-80", "80-")))
    return stream, producer, reader


async def test_a_single_row_insert_on_the_fast_path_is_delivered_from_its_values_and_its_ack_frees_it(served):
    stream, producer, reader = await _subscribed(served)
    try:
        async def run(sql: str) -> int:
            async with producer.cursor() as cur:
                return int(await cur.execute(sql))

        base = 700_000_000 + uuid.uuid4().int % 100_000_000
        await run(f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES ({base}, 1, '{{}}')")  # plans it
        first = await asyncio.wait_for(reader.fetchone(), 5)
        assert first[0] == base
        inserted = 8
        sent = sum(served.fast_statements(s) for s in ("-80", "80-"))
        for i in range(1, inserted + 1):
            before = {s: (served.manager(s).counters.inserts_cached, served.manager(s).counters.inserts_polled)
                      for s in ("-80", "80-")}
            await run(f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES ({base + i}, 1, '{{}}')")
            row = await asyncio.wait_for(reader.fetchone(), 5)
            assert row[0] == base + i
            changed = {s: (served.manager(s).counters.inserts_cached, served.manager(s).counters.inserts_polled)
                       for s in ("-80", "80-")}
            moved = [s for s in changed if changed[s] != before[s]]
            assert len(moved) == 1, (before, changed)
            (shard,) = moved
            # Cached from the INSERT's values, not polled.
            assert changed[shard] == (before[shard][0] + 1, before[shard][1])
        # On the fast path, but perhaps the first on each shard (it takes the normal path while
        # the fast path opens a shard link).
        assert sum(served.fast_statements(s) for s in ("-80", "80-")) >= sent + inserted - 2

        ids = [base + i for i in range(inserted + 1)]
        in_flight = sum(served.manager(s).in_flight for s in ("-80", "80-"))
        acked = sum(served.manager(s).counters.acked for s in ("-80", "80-"))
        sent = sum(served.fast_statements(s) for s in ("-80", "80-"))
        for i in ids:  # one id each: one shard each (the first plans the shape)
            assert await run(f"UPDATE {SHARDED_TABLE} SET time_acked = {time.time_ns()}, time_next = NULL"
                             f" WHERE id IN ({i}) AND time_acked IS NULL") == 1
        assert sum(served.manager(s).in_flight for s in ("-80", "80-")) == in_flight - len(ids)
        assert sum(served.manager(s).counters.acked for s in ("-80", "80-")) == acked + len(ids)
        assert sum(served.fast_statements(s) for s in ("-80", "80-")) == sent + len(ids) - 1  # all but the first
    finally:
        stream.close()
        producer.close()


async def test_messages_cached_from_an_insert_reach_the_subscriber_as_blocks_forwarded_whole(served, monkeypatch):
    # A block whose sequence ids did not line up would be split and framed again here.
    reframed: list[bytes] = []
    split = connection_module.split_packets
    monkeypatch.setattr(connection_module, "split_packets", lambda data: reframed.append(data) or split(data))
    stream, producer, reader = await _subscribed(served)
    try:
        base = 800_000_000 + uuid.uuid4().int % 100_000_000

        async def send_and_read(rows: dict[int, tuple[int | None, str | None]], *statements: str) -> None:
            async with producer.cursor() as cur:
                for sql in statements:
                    await cur.execute(sql)
            got = {}
            while len(got) < len(rows):
                mid, tenant, message = await asyncio.wait_for(reader.fetchone(), 5)
                got[mid] = (tenant, message)
            assert got == rows

        def insert(rows: dict[int, tuple[int | None, str | None]]) -> str:
            values = ", ".join(f"({i}, {t}, '{m}')" for i, (t, m) in rows.items())
            return f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES {values}"

        first = {base + i: (i, f"[{i}]") for i in range(7)}
        await send_and_read(first, insert(first))  # plans the shape (the first may take the normal path)
        cached = sum(served.manager(s).counters.inserts_cached for s in ("-80", "80-"))
        rows = {base + 100 + i: (i, f"[{i}]") for i in range(7)}  # several deliveries of 2 a shard
        # The hash vindex puts all 7 on one shard once in 64 bases: then one cached INSERT, not 2.
        shards = len({hash_uint64(i)[0] < 0x80 for i in rows})
        # A NULL value is not encoded ahead: that INSERT's rows are encoded as they are sent.
        null = f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES ({base + 200}, NULL, NULL)"
        await send_and_read({**rows, base + 200: (None, None)}, insert(rows), null)
        assert sum(served.manager(s).counters.inserts_cached for s in ("-80", "80-")) == cached + shards + 1  # none polled
        assert reframed == []
    finally:
        stream.close()
        producer.close()
