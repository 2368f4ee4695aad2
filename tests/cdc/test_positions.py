"""Start positions and resuming: current, a saved VGTID, the beginning, a point in time; and
the clear errors for positions a shard does not hold."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from proxy.cdc import (
    PositionPurgedError,
    PositionUnknownError,
    Vgtid,
    VStream,
)
from tests.cdc.conftest import PROBE, PROBE_TABLE, collect_groups, consume_for, ids_seen, new_id

INSERT = f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'p', 1, NOW(6))"


async def test_resume_from_saved_vgtid_delivers_exactly_the_missed_events(
    commerce_endpoints, shards, probe_table
):
    a, b = new_id(), new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].run((INSERT, (a,)))
        await shards["80-"].run((INSERT, (b,)))
        groups = await collect_groups(stream, lambda g: {a, b} <= set(ids_seen(g)))
        saved = groups[-1].vgtid.to_json()

    c, d, e = new_id(), new_id(), new_id()
    await shards["-80"].run((INSERT, (c,)))
    await shards["80-"].run((INSERT, (d,)))
    await shards["-80"].run((INSERT, (e,)))

    f = new_id()
    async with VStream(commerce_endpoints, [PROBE], start=saved, heartbeat_interval=0.2) as stream:
        resumed = await collect_groups(stream, lambda g: {c, d, e} <= set(ids_seen(g)))
        await shards["80-"].run((INSERT, (f,)))
        resumed += await collect_groups(stream, lambda g: f in ids_seen(g))
        resumed += await consume_for(stream, 0.5)
    seen = ids_seen(resumed)
    assert sorted(seen) == sorted([c, d, e, f])
    assert [i for i in seen if i in (c, e)] == [c, e]  # one shard's order is kept


async def test_resuming_from_the_last_vgtid_repeats_nothing(
    commerce_endpoints, shards, probe_table
):
    a = new_id()
    async with VStream(commerce_endpoints, [PROBE]) as stream:
        await shards["-80"].run((INSERT, (a,)))
        groups = await collect_groups(stream, lambda g: a in ids_seen(g))
    saved = groups[-1].vgtid
    async with VStream(commerce_endpoints, [PROBE], start=saved, heartbeat_interval=0.2) as stream:
        again = await consume_for(stream, 1.0)
        assert stream.vgtid == saved
    assert ids_seen(again) == []


async def test_start_from_beginning_sees_earlier_transactions(
    commerce_endpoints, shards, probe_table
):
    early = new_id()
    await shards["80-"].run((INSERT, (early,)))
    async with VStream(commerce_endpoints, [PROBE], start="beginning") as stream:
        groups = await collect_groups(stream, lambda g: early in ids_seen(g), within=30)
    assert ids_seen(groups).count(early) == 1


async def test_since_timestamp_skips_transactions_of_earlier_seconds(
    commerce_endpoints, shards, probe_table
):
    before = new_id()
    await shards["-80"].run((INSERT, (before,)))
    since = math.floor(time.time()) + 1.0
    await asyncio.sleep(since + 0.05 - time.time())
    after = new_id()
    await shards["-80"].run((INSERT, (after,)))
    async with VStream(commerce_endpoints, [PROBE], since=since) as stream:
        groups = await collect_groups(stream, lambda g: after in ids_seen(g), within=30)
    seen = ids_seen(groups)
    assert after in seen
    assert before not in seen


async def test_position_ahead_of_the_shard_is_a_clear_error(commerce_endpoints, shards):
    current = await shards["80-"].gtid_binlog_pos()
    domain, server, seq = current.split(",")[0].split("-")
    ahead = f"{domain}-{server}-{int(seq) + 1000}"
    vgtid = Vgtid.from_json([{"keyspace": "commerce", "shard": "80-", "gtid": ahead}])
    with pytest.raises(PositionUnknownError) as raised:
        async with VStream(commerce_endpoints, [PROBE], start=vgtid) as stream:
            await collect_groups(stream, lambda g: False, within=10)
    assert (raised.value.keyspace, raised.value.shard) == ("commerce", "80-")
    assert "commerce/80-" in str(raised.value)


async def test_purged_position_is_a_clear_error_naming_the_shard(
    commerce_endpoints, shards, probe_table
):
    shard = shards["80-"]
    old_position = await shard.gtid_binlog_pos()
    await shard.run((INSERT, (new_id(),)))
    await shard.purge_binlogs()

    vgtid = Vgtid.from_json([{"keyspace": "commerce", "shard": "80-", "gtid": old_position}])
    with pytest.raises(PositionPurgedError) as raised:
        async with VStream(commerce_endpoints, [PROBE], start=vgtid) as stream:
            await collect_groups(stream, lambda g: False, within=10)
    error = raised.value
    assert (error.keyspace, error.shard, error.position) == ("commerce", "80-", old_position)
    assert "commerce/80-" in str(error) and "purged" in str(error)


async def test_beginning_after_a_purge_starts_at_the_oldest_binlog(
    commerce_endpoints, shards, probe_table
):
    shard = shards["-80"]
    await shard.run((INSERT, (new_id(),)))
    await shard.purge_binlogs()
    kept = new_id()
    await shard.run((INSERT, (kept,)))
    async with VStream(commerce_endpoints, [PROBE], start="beginning") as stream:
        groups = await collect_groups(stream, lambda g: kept in ids_seen(g), within=30)
    assert kept in ids_seen(groups)
