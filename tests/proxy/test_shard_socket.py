"""The proxy reaches local shards over their Unix socket (issue 15: no TCP stack on either end
of a send) and falls back to TCP, with one warning, when a socket does not answer."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import stat
from pathlib import Path

import pytest

from proxy.cdc.binlog_decoder import BinlogSource, connect_shard, connection_kwargs
from proxy.config import ShardEndpoint
from proxy.errors import ProxyError
from proxy.fast_path.shard_link import ShardErr, ShardLink
from proxy.pools import ShardAddress, ShardPool
from proxy.resharding.topology import ShardEndpointSpec
from proxy.server import endpoints_from_json, endpoints_to_json
from tests.proxy.sessions_support import query
from tests.proxy_process import free_port, start_proxy, stop_proxy

# MariaDB's process list shows 'localhost' for a socket connection, 'ip:port' for a TCP one.
OWN_HOST = "select host from information_schema.processlist where id = connection_id()"


def test_the_local_clusters_endpoints_name_each_shards_unix_socket(local_cluster) -> None:
    for spec in local_cluster.local_shards:
        endpoint = local_cluster.endpoint(spec.keyspace, spec.shard)
        assert endpoint.socket == str(spec.socket_path)
        assert stat.S_ISSOCK(Path(endpoint.socket).stat().st_mode)
        # Displays and anything handed out of the process keep host:port.
        assert (endpoint.host, endpoint.port) == ("127.0.0.1", spec.port)


def test_the_proxys_shard_connections_are_unix_socket_ones(proxy) -> None:
    conn = proxy.connect("commerce:-80", autocommit=True)
    try:
        assert query(conn, OWN_HOST) == (("localhost",),)
        query(conn, "begin")
        assert query(conn, OWN_HOST) == (("localhost",),)  # the transaction's pinned connection
        query(conn, "commit")
    finally:
        conn.close()


def test_the_fast_paths_shard_links_connect_over_the_socket(local_cluster) -> None:
    e = local_cluster.endpoint("commerce", "-80")

    class Collected:
        def __init__(self) -> None:
            loop = asyncio.get_running_loop()
            self.done: asyncio.Future[tuple[bytes, ShardErr | None]] = loop.create_future()

        def response_part(self, link: ShardLink, data: bytes) -> None:
            raise AssertionError("a one-row answer comes whole")

        def response_done(
            self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None
        ) -> None:
            self.done.set_result((data, error))

        def link_lost(self, link: ShardLink, cause: str) -> None:
            self.done.set_exception(ConnectionError(cause))

    async def run() -> tuple[bytes, ShardErr | None, str | None]:
        pool = ShardPool(ShardAddress.of("commerce", "-80", e))
        link = await ShardLink.open(pool)
        try:
            relay = Collected()
            link.query(OWN_HOST.encode(), relay)
            data, error = await relay.done
            return data, error, pool.unix_socket
        finally:
            link.close()
            await pool.close()

    data, error, used = asyncio.run(run())
    assert error is None and used == e.socket
    assert b"localhost" in data and b"127.0.0.1" not in data


@pytest.mark.parametrize("broken", ["missing", "refusing"])
def test_a_socket_that_does_not_answer_falls_back_to_tcp_with_one_warning(
    local_cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    path = tmp_path / "mariadbd.sock"
    stale: socket.socket | None = None
    if broken == "refusing":  # a socket file nobody listens on: a crashed server's, a moved dir's
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(path))
    e = dataclasses.replace(local_cluster.endpoint("commerce", "80-"), socket=str(path))

    async def host_seen() -> tuple[str, str | None]:
        pool = ShardPool(ShardAddress.of("commerce", "80-", e))
        try:
            async with pool.connection() as sc:
                result = await sc.execute(OWN_HOST)
                return result.rows[0][0].decode(), pool.unix_socket  # type: ignore[union-attr]
        finally:
            await pool.close()

    try:
        with caplog.at_level(logging.WARNING, logger="proxy.addresses"):
            seen = [asyncio.run(host_seen()) for _ in range(2)]
            # what CDC and resharding connect with
            binlog_conn = connect_shard(**connection_kwargs(BinlogSource.of(e)))
            try:
                ((binlog_host,),) = query(binlog_conn, OWN_HOST)
            finally:
                binlog_conn.close()
    finally:
        if stale is not None:
            stale.close()
    assert all(host.startswith("127.0.0.1:") and used is None for host, used in seen), seen
    assert binlog_host.startswith("127.0.0.1:")
    warnings = [r for r in caplog.records if r.getMessage() == "shard socket unusable, using TCP"]
    assert len(warnings) == 1 and warnings[0].socket == str(path)  # type: ignore[attr-defined]


def test_a_proxy_whose_shard_sockets_are_gone_serves_over_tcp_and_says_so(
    local_cluster, tmp_path: Path
) -> None:
    endpoints = {
        key: dataclasses.replace(e, socket=str(tmp_path / f"gone-{i}.sock"))
        for i, (key, e) in enumerate(local_cluster.endpoints.items())
    }
    p = start_proxy(local_cluster.config.path, endpoints, tmp_path / "proxy.log")
    try:
        conn = p.connect("commerce:80-", autocommit=True)
        try:
            ((host,),) = query(conn, OWN_HOST)
        finally:
            conn.close()
    finally:
        stop_proxy(p)
    assert host.startswith("127.0.0.1:")
    assert "shard socket unusable, using TCP" in p.log_text()


def test_binlog_and_resharding_connections_use_the_socket(local_cluster) -> None:
    e = local_cluster.endpoint("commerce", "-80")
    kwargs = connection_kwargs(BinlogSource.of(e))
    assert kwargs["unix_socket"] == e.socket
    conn = connect_shard(**kwargs)
    try:
        assert query(conn, OWN_HOST) == (("localhost",),)
    finally:
        conn.close()


def test_the_socket_survives_the_worker_hand_off_and_the_stored_topology() -> None:
    e = ShardEndpoint(
        "127.0.0.1", 17100, "root", "", "commerce", socket="/data/commerce/_80/mariadbd.sock"
    )
    tcp = ShardEndpoint("10.0.0.1", 3306, "app", "pw", "commerce")
    assert endpoints_from_json(
        endpoints_to_json({("commerce", "-80"): e, ("commerce", "80-"): tcp})
    ) == {
        ("commerce", "-80"): e,
        ("commerce", "80-"): tcp,
    }
    assert ShardEndpointSpec.from_json(ShardEndpointSpec(e).to_json()).endpoint == e
    old = {k: v for k, v in ShardEndpointSpec(e).to_json().items() if k != "socket"}  # saved before
    assert ShardEndpointSpec.from_json(old).endpoint == dataclasses.replace(e, socket=None)


def test_a_pool_that_reached_its_shard_by_neither_way_looks_at_the_socket_again(
    local_cluster, tmp_path: Path
) -> None:
    # Down: no socket file and nothing on the port. Back: the socket is there (a link to the
    # shard's own), the port still answers nothing: the pool must not have settled on TCP.
    real = local_cluster.endpoint("commerce", "-80")
    path = tmp_path / "mariadbd.sock"
    e = dataclasses.replace(real, port=free_port(), socket=str(path))

    async def run() -> tuple[str, str | None]:
        pool = ShardPool(ShardAddress.of("commerce", "-80", e))
        try:
            with pytest.raises(ProxyError):
                await pool.acquire()
            path.symlink_to(str(real.socket))
            async with pool.connection() as sc:
                result = await sc.execute(OWN_HOST)
                return result.rows[0][0].decode(), pool.unix_socket  # type: ignore[union-attr]
        finally:
            await pool.close()

    host, used = asyncio.run(run())
    assert host == "localhost" and used == str(path)
