"""Lost binlog connections: the stream reconnects from the last whole transaction it read, so
nothing is replayed and nothing is lost, whether the connection is killed or the shard restarts."""

from __future__ import annotations

import asyncio

from proxy.cdc import VStream
from tests.cdc.conftest import (
    PROBE,
    PROBE_TABLE,
    Shard,
    collect_groups,
    consume_for,
    ids_seen,
    new_id,
)

INSERT = f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'r', 1, NOW(6))"


async def kill_binlog_dumps(shard: Shard) -> int:
    rows = await shard.run(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
    )
    for (thread_id,) in rows:
        await shard.run(f"KILL {int(thread_id)}")
    return len(rows)


async def test_killed_binlog_connection_neither_replays_nor_loses_events(
    commerce_endpoints, shards, probe_table
):
    shard = shards["-80"]
    before = [new_id() for _ in range(3)]
    after = [new_id() for _ in range(3)]
    async with VStream(commerce_endpoints, [PROBE], heartbeat_interval=0.2) as stream:
        for row_id in before:
            await shard.run((INSERT, (row_id,)))
        groups = await collect_groups(stream, lambda g: before[-1] in ids_seen(g))
        connections = stream.readers[("commerce", "-80")].stats.connections

        assert await kill_binlog_dumps(shard) == 1
        for row_id in after:
            await shard.run((INSERT, (row_id,)))
        groups += await collect_groups(stream, lambda g: after[-1] in ids_seen(g))
        groups += await consume_for(stream, 1.5)  # a replay would show up here
        reconnected = stream.readers[("commerce", "-80")].stats.connections > connections
    assert ids_seen(groups) == before + after
    assert reconnected


async def test_stream_continues_after_the_shard_restarts(
    local_cluster, commerce_endpoints, shards, probe_table
):
    shard = shards["80-"]
    first, second = new_id(), new_id()
    async with VStream(commerce_endpoints, [PROBE], heartbeat_interval=0.2) as stream:
        await shard.run((INSERT, (first,)))
        groups = await collect_groups(stream, lambda g: first in ids_seen(g))
        try:
            await local_cluster.stop_shard("commerce", "80-")
            await asyncio.sleep(0.5)
        finally:
            await local_cluster.start_shard("commerce", "80-")
        await shard.run((INSERT, (second,)))
        groups += await collect_groups(stream, lambda g: second in ids_seen(g), within=30)
        groups += await consume_for(stream, 1.0)
    assert ids_seen(groups) == [first, second]


async def test_transaction_cut_by_a_lost_connection_is_delivered_once_and_whole(
    commerce_endpoints, shards, probe_table
):
    shard = shards["-80"]
    first = new_id()
    rows = 150_000
    for _ in range(rows):
        new_id()  # reserve the id range
    insert_big = (
        f"INSERT INTO {PROBE_TABLE} (id, label, amount) "
        f"SELECT {first} + seq, 'big', 1 FROM seq_0_to_{rows - 1}"
    )
    async with VStream(commerce_endpoints, [PROBE], heartbeat_interval=0.2) as stream:
        reader = stream.readers[("commerce", "-80")]
        await shard.run(insert_big)

        async def kill_while_streaming() -> None:
            # The transaction takes seconds to decode; cut it early on.
            await asyncio.sleep(0.5)
            await kill_binlog_dumps(shard)

        killer = asyncio.create_task(kill_while_streaming())
        groups = await collect_groups(stream, lambda g: len(ids_seen(g)) >= rows, within=120)
        await killer
        groups += await consume_for(stream, 1.0)
        discarded = reader.partial_transactions_discarded
    big = [g for g in groups if g.row_count]
    assert len(big) == 1
    assert sorted(ids_seen(big)) == list(range(first, first + rows))
    assert discarded == 1
