"""A shard's binlog reader and its decoder process: started, stopped and failing as a unit."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time

import pytest

from proxy.cdc.binlog_reader import ShardBinlogReader
from proxy.cdc.decoder_launcher import launcher
from proxy.cdc.errors import ShardStreamError
from proxy.cdc.positions import GtidPosition
from proxy.cdc.table_filter import TableFilter
from tests.cdc.conftest import PROBE, PROBE_TABLE, new_id


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def logged(caplog, message: str, seconds: float) -> logging.LogRecord:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for record in caplog.records:
            if record.getMessage() == message:
                return record
        await asyncio.sleep(0.05)
    raise AssertionError(f"{message!r} was not logged within {seconds} s")


async def reader_at_current(shard, **kwargs) -> ShardBinlogReader:
    position = GtidPosition.parse(await shard.gtid_binlog_pos())
    reader = ShardBinlogReader(
        "commerce", shard.name, shard.endpoint, position, TableFilter([PROBE]), **kwargs
    )
    await reader.start()
    return reader


async def first_transaction(reader: ShardBinlogReader):
    async with asyncio.timeout(10):
        async for batch in reader.batches():
            for item in batch:
                if hasattr(item, "events"):
                    return item
    raise AssertionError("the stream ended")


async def test_reader_delivers_a_transaction_decoded_in_its_own_process(shards, probe_table):
    shard = shards["-80"]
    reader = await reader_at_current(shard)
    try:
        assert reader.pid is not None and reader.pid != os.getpid()
        row_id = new_id()
        await shard.run((f"INSERT INTO {PROBE_TABLE} VALUES (%s, 'p', 1, NOW(6))", (row_id,)))
        txn = await first_transaction(reader)
        assert txn.row_count == 1
        assert reader.position == txn.position
        assert reader.stats.transactions >= 1
    finally:
        await reader.close()


async def test_close_ends_the_decoder_process(shards, probe_table):
    reader = await reader_at_current(shards["80-"])
    pid = reader.pid
    assert pid is not None and alive(pid)
    await reader.close()
    assert await gone_within(pid, 2)


async def test_decoder_killed_from_outside_ends_the_stream_with_an_error_naming_the_shard(
    shards, probe_table
):
    reader = await reader_at_current(shards["-80"])
    try:
        assert reader.pid is not None
        os.kill(reader.pid, signal.SIGKILL)
        with pytest.raises(ShardStreamError, match="commerce/-80") as caught:
            async with asyncio.timeout(5):
                async for _batch in reader.batches():
                    pass
        assert str(reader.pid) in str(caught.value)
    finally:
        await reader.close()


async def test_decoder_stops_by_itself_once_the_proxy_side_is_gone(shards, probe_table):
    reader = await reader_at_current(shards["80-"], heartbeat_period=0.2)
    pid = reader.pid
    assert pid is not None
    reader._transport.close()  # as if the proxy had died without closing the stream
    try:
        assert await gone_within(pid, 3)
    finally:
        await reader.close()


async def test_decoder_log_records_reach_the_proxy_logging(shards, probe_table, caplog):
    caplog.set_level(logging.INFO, logger="proxy.cdc")
    caplog.set_level(logging.INFO)
    reader = await reader_at_current(shards["-80"])
    try:
        record = await logged(caplog, "binlog stream starting", 5)
    finally:
        await reader.close()
    assert (record.keyspace, record.shard, record.process) == ("commerce", "-80", reader.pid)


async def test_a_zygote_killed_from_outside_is_replaced_at_the_next_start(shards, probe_table):
    reader = await reader_at_current(shards["-80"])
    await reader.close()
    zygote = launcher._zygote
    assert zygote is not None
    zygote.kill()
    zygote.wait()
    replacement = await reader_at_current(shards["-80"])
    try:
        assert launcher._zygote is not None and launcher._zygote.pid != zygote.pid
        assert replacement.pid is not None and alive(replacement.pid)
    finally:
        await replacement.close()


async def test_close_ends_a_consumer_waiting_for_the_next_batch(shards, probe_table):
    reader = await reader_at_current(shards["80-"])

    async def consume() -> int:
        batches = 0
        async for _batch in reader.batches():
            batches += 1
        return batches

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.3)  # the consumer is waiting: the shard is idle
    await reader.close()
    async with asyncio.timeout(5):
        await consumer  # ends cleanly: a closed reader is not a failure
