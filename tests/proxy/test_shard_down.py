"""A shard that goes down gives a clear error naming it; the proxy serves the rest
and reconnects when the shard is back."""

from __future__ import annotations

import asyncio
import time

import pymysql
import pytest


def _port_of(conn) -> int:
    with conn.cursor() as c:
        c.execute("select @@port")
        return int(c.fetchone()[0])


async def test_shard_down_then_back(proxy, local_cluster) -> None:
    warm = proxy.connect("commerce:80-")
    _port_of(warm)  # the proxy now has pooled connections to 80-
    warm.close()

    await local_cluster.stop_shard("commerce", "80-")
    try:
        conn = proxy.connect("commerce:80-")
        with pytest.raises(pymysql.err.MySQLError) as e:
            _port_of(conn)
        assert "commerce" in e.value.args[1] and "80-" in e.value.args[1]
        conn.close()
        # everyone else is still served
        other = proxy.connect("commerce:-80")
        assert _port_of(other) == local_cluster.endpoint("commerce", "-80").port
        other.close()
    finally:
        await local_cluster.start_shard("commerce", "80-")

    deadline = time.monotonic() + 20
    while True:
        conn = proxy.connect("commerce:80-")
        try:
            assert _port_of(conn) == local_cluster.endpoint("commerce", "80-").port
            break
        except pymysql.err.MySQLError:
            assert time.monotonic() < deadline, "the proxy did not reconnect to the restarted shard"
            await asyncio.sleep(0.2)
        finally:
            conn.close()
