"""Relaying a shard's row packets: boundaries found by length, whatever the bytes inside look like."""

from __future__ import annotations

import asyncio

import MySQLdb
import MySQLdb.cursors
import pytest

from proxy.errors import ProxyError
from proxy.pools import ShardAddress, ShardPools

EOF_LOOKALIKE = bytes.fromhex("05000001fe00000200")


def test_rows_that_contain_eof_and_error_lookalike_bytes_relay_intact(proxy) -> None:
    conn = MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", database="commerce:-80")
    try:
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
        cur.execute(
            "SELECT X'FE', X'FF0000', X'05000001fe00000200' UNION ALL "
            "SELECT X'05000001fe00000200', '', NULL"
        )
        assert list(cur.fetchall()) == [(b"\xfe", b"\xff\x00\x00", EOF_LOOKALIKE), (EOF_LOOKALIKE, b"", None)]
    finally:
        conn.close()


def test_values_with_two_and_three_byte_lengths_relay_intact(proxy) -> None:
    conn = MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", database="commerce:-80")
    try:
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
        cur.execute("SELECT REPEAT('a', 70000), seq FROM seq_1_to_50 UNION ALL SELECT REPEAT('b', 300000), 0")
        rows = list(cur.fetchall())
        assert [len(r[0]) for r in rows] == [70000] * 50 + [300000]
        assert [int(r[1]) for r in rows] == [*range(1, 51), 0]
    finally:
        conn.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_retired_pool_closes_idle_connections_at_once_and_busy_ones_when_released(local_cluster) -> None:
    e = local_cluster.endpoint("commerce", "80-")
    pools = ShardPools([ShardAddress.of("commerce", "80-", e)])
    pool = pools.get("commerce", "80-")
    try:
        busy, idle = await pool.acquire(), await pool.acquire()
        pool.release(idle)
        await busy.execute("begin")
        await busy.execute("select 1 from customer limit 1 for update")
        pools.retire("commerce", "80-")
        with pytest.raises(ProxyError, match="no such shard"):
            pools.get("commerce", "80-")
        await asyncio.sleep(0.1)
        assert idle.conn.closed
        await busy.execute("commit")  # the transaction running there finishes there
        assert not busy.conn.closed
        pool.release(busy)
        await pools.close()  # waits for the retired pool's close
        assert busy.conn.closed
    finally:
        await pools.close()
