"""The binlog watch does not read back this proxy's own INSERTs into a message table (marked
with a per-process comment, proxy/messaging/own_mark.py): their rows are cached or polled by
the proxy itself. Rows written directly on a shard, or through another proxy process, still
wake the watch; a transaction mixing both is read."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace

import aiomysql
import pytest_asyncio

from proxy.messaging import own_mark
from tests.messaging.conftest import first_poll_over, run_sql
from tests.messaging.proxy_harness import (
    COMMERCE_SHARDS,
    SHARDED_TABLE,
    ProxyStream,
    Served,
    end_proxy,
    launch_proxy,
    served_in_process,
)

INSERT = f"INSERT INTO {SHARDED_TABLE} (id, tenant_id, message) VALUES "


@pytest_asyncio.fixture(loop_scope="session")
async def served(local_cluster, shard_pools) -> AsyncIterator[Served]:
    async with served_in_process(local_cluster, shard_pools) as served:
        assert served.state.messaging.watch_changes  # the default
        yield served


async def _ids(stream: ProxyStream, wanted: set[int], within: float = 5.0) -> None:
    """Wait until every id of ``wanted`` was delivered (a message not acked comes again)."""
    seen: set[int] = set()
    async with asyncio.timeout(within):
        while not wanted <= seen:
            (row,) = await stream.rows(1, within)
            seen.add(int(row[0]))


async def _until(condition, within: float = 5.0) -> None:
    for _ in range(int(within / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not reached in time")


async def _settled(served: Served, shard_pools, stream: ProxyStream, base: int) -> int:
    """A row written directly on each shard, delivered: the decoders have read everything
    before it. Returns the count of transactions read back, once both were."""
    before = served.read_back()
    ids = {base + 900 + i for i in range(len(COMMERCE_SHARDS))}
    for shard, i in zip(COMMERCE_SHARDS, sorted(ids), strict=True):
        await run_sql(shard_pools.get("commerce", shard), f"{INSERT}({i}, 9, '{{}}')")
    await _ids(stream, ids)
    await _until(lambda: served.read_back() >= before + len(COMMERCE_SHARDS))
    await asyncio.sleep(0.2)  # nothing more comes
    return served.read_back()


async def _watching(served: Served, watch_opened) -> None:
    """The subscriber's first polls are over and the watch's feed is open (its decoders read
    every later commit). A fixed 1 s sleep raced both: a watch started 1 s late failed 2 tests."""
    await first_poll_over(*(served.manager(s) for s in COMMERCE_SHARDS))
    await watch_opened(SHARDED_TABLE)


async def test_own_inserts_are_not_read_back_while_direct_and_second_proxy_inserts_are(
    served, shard_pools, local_cluster, tmp_path, watch_opened
):
    base = 600_000_000 + uuid.uuid4().int % 100_000_000
    stream = await ProxyStream.open(SimpleNamespace(host="127.0.0.1", port=served.port), "commerce",
                                    f"STREAM * FROM {SHARDED_TABLE}")
    producer = await served.connect()
    second = launch_proxy(local_cluster, tmp_path, "second")
    try:
        await _watching(served, watch_opened)
        # The watch's binlog connections are filtered from their second read on: a first row.
        start = await _settled(served, shard_pools, stream, base)

        async def run(sql: str) -> None:
            async with producer.cursor() as cur:
                await cur.execute(sql)

        # Own inserts: one row (fast path, one shard), rows of both shards (several shards),
        # and in a client's transaction (polled at its COMMIT), with an ack in it.
        cached = served.cached()
        own = [base + i for i in range(1, 31)]
        for i in own[:10]:
            await run(f"{INSERT}({i}, 1, '{{}}')")
        await run(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in own[10:20]))
        await run("BEGIN")
        await run(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in own[20:25]))
        await run(f"UPDATE {SHARDED_TABLE} SET time_acked = 1, time_next = NULL WHERE id IN ({own[0]}, {own[1]})")
        await run(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in own[25:]))
        await run("COMMIT")
        await _ids(stream, set(own[2:]))
        assert served.cached() >= cached + 11  # cached from their values, not read back
        # Not one of them was read back by the watch: only the two direct rows after them.
        assert await _settled(served, shard_pools, stream, base + 1000) == start + len(COMMERCE_SHARDS)

        # Through a second proxy process (its own mark): read back, each transaction of a shard.
        ids = [base + 2000 + i for i in range(10)]
        conn = await aiomysql.connect(host=second.host, port=second.port, user="root", password="",
                                      db="commerce", autocommit=True)
        try:
            async with conn.cursor() as cur:
                for i in ids[:4]:
                    await cur.execute(f"{INSERT}({i}, 2, '{{}}')")
                await cur.execute(INSERT + ", ".join(f"({i}, 2, '{{}}')" for i in ids[4:]))
        finally:
            conn.close()
        await _ids(stream, set(ids))
        listed = ", ".join(map(str, ids[4:]))
        multi = 0  # the shards the multi-row INSERT reached: one transaction each
        for shard in COMMERCE_SHARDS:
            found = await run_sql(shard_pools.get("commerce", shard), f"SELECT 1 FROM {SHARDED_TABLE} WHERE id IN ({listed})")
            multi += bool(found.rows)
        shards_reached = 4 + multi
        middle = start + len(COMMERCE_SHARDS)
        assert await _settled(served, shard_pools, stream, base + 3000) == middle + shards_reached + len(
            COMMERCE_SHARDS
        )
    finally:
        end_proxy(second)
        stream.conn.close()
        producer.close()


async def test_a_shard_transaction_mixing_this_proxys_marked_insert_with_another_is_read(
    served, shard_pools, watch_opened
):
    base = 500_000_000 + uuid.uuid4().int % 100_000_000
    stream = await ProxyStream.open(SimpleNamespace(host="127.0.0.1", port=served.port), "commerce",
                                    f"STREAM * FROM {SHARDED_TABLE}")
    try:
        await _watching(served, watch_opened)
        start = await _settled(served, shard_pools, stream, base)
        pool = shard_pools.get("commerce", "-80")
        mark = own_mark.mark(SHARDED_TABLE)  # this process's: the in-process proxy's
        marked, plain = base + 1, base + 2
        async with pool.connection() as sc:
            await sc.execute("BEGIN")
            await sc.execute(f"{mark}{INSERT}({marked}, 3, '{{}}')")
            await sc.execute(f"{INSERT}({plain}, 3, '{{}}')")
            await sc.execute("COMMIT")
        # The unmarked row is news: the transaction is read, the poll finds both rows. That the
        # watch read it shows in the count below, not by beating the 1 s poller to it (a 0.9 s
        # bound did not hold on a busy machine).
        await _ids(stream, {marked, plain})
        assert await _settled(served, shard_pools, stream, base + 1000) == start + 1 + len(COMMERCE_SHARDS)
    finally:
        stream.conn.close()


async def test_an_own_insert_that_fails_makes_its_shards_poll(served):
    base = 400_000_000 + uuid.uuid4().int % 100_000_000
    producer = await served.connect()

    def in_doubt() -> dict[str, int]:
        return {s: served.state.messaging.managers[("commerce", s, SHARDED_TABLE)].counters.inserts_in_doubt
                for s in COMMERCE_SHARDS}

    try:
        async with producer.cursor() as cur:
            rows = [base + i for i in range(6)]  # on both shards
            await cur.execute(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in rows))
            await cur.execute(f"{INSERT}({base + 50}, 1, '{{}}')")  # plans the one-row shape
            before = in_doubt()
            # A duplicate: refused (1062). Had the shard been lost instead, the row might have
            # committed unseen by the watch: the shard's manager polls either way.
            try:
                await cur.execute(f"{INSERT}({rows[0]}, 1, '{{}}')")
            except aiomysql.IntegrityError:
                pass
            else:
                raise AssertionError("a duplicate id was accepted")
            after_one = in_doubt()
            assert sum(after_one.values()) == sum(before.values()) + 1
            # Several shards (one of them refuses): every shard it reached polls.
            try:
                await cur.execute(INSERT + ", ".join(f"({i}, 1, '{{}}')" for i in [base + 100, base + 101, *rows]))
            except aiomysql.IntegrityError:
                pass
            else:
                raise AssertionError("duplicate ids were accepted")
            after = in_doubt()
            assert all(after[s] >= after_one[s] + 1 for s in COMMERCE_SHARDS), (after_one, after)
    finally:
        producer.close()


def test_a_forked_worker_marks_its_inserts_with_a_token_of_its_own() -> None:
    parent = own_mark.mark(SHARDED_TABLE)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what a forked worker would send
        try:
            os.write(write, own_mark.mark(SHARDED_TABLE).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as f:
        child = f.read().decode()
    assert child.startswith(own_mark.PREFIX) and child.endswith(f" {SHARDED_TABLE}*/ ")
    assert child != parent
    assert own_mark.mark(SHARDED_TABLE) == parent  # the parent's stays its own
