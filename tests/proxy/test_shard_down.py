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


async def test_partial_commit_failure_names_committed_and_failed_shards(proxy, local_cluster) -> None:
    table = "partial_commit_probe"
    setup = proxy.connect(autocommit=True)
    with setup.cursor() as c:
        for shard in ("-80", "80-"):
            c.execute(f"use `commerce:{shard}`")
            c.execute(f"create table if not exists {table} (id bigint primary key)")
    setup.close()

    conn = proxy.connect()
    try:
        with conn.cursor() as c:
            c.execute("begin")
            c.execute("use `commerce:-80`")
            c.execute(f"insert into {table} values (1)")
            c.execute("use `commerce:80-`")
            c.execute(f"insert into {table} values (2)")
        await local_cluster.stop_shard("commerce", "80-", kill=True)
        try:
            with pytest.raises(pymysql.err.MySQLError) as e, conn.cursor() as c:
                c.execute("commit")
            msg = e.value.args[1]
            assert "commit failed on shard commerce/80-" in msg
            assert "committed: [commerce/-80]" in msg
        finally:
            await local_cluster.start_shard("commerce", "80-")
    finally:
        conn.close()
    check = proxy.connect("commerce:-80")
    with check.cursor() as c:
        c.execute(f"select id from {table}")
        assert c.fetchall() == ((1,),)
    check.close()
