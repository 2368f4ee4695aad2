"""A real proxy process over the session's local cluster; for the fast path's tests, one with the
fast path off (the reference answers), one serving /metrics, and where a customer id lives."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from proxy.cluster_state import ClusterState
from proxy.fast_path.routing import fast_route
from proxy.planning import plan_statement
from proxy.session import ProxySession
from tests.proxy.sessions_support import query, shard_connection
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy

MESSAGE_COMMENT = "vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=100,vt_poller_interval=1"


@pytest.fixture(scope="session")
def proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    log = tmp_path_factory.mktemp("proxy") / "proxy.log"
    p = start_proxy(local_cluster.config.path, local_cluster.endpoints, log)
    try:
        yield p
    finally:
        stop_proxy(p)


@pytest.fixture(scope="module")
def normal_proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    """A proxy with the fast path turned off: the reference answers."""
    log = tmp_path_factory.mktemp("normal-proxy") / "proxy.log"
    p = start_proxy(local_cluster.config.path, local_cluster.endpoints, log, extra_env={"SHARDGATE_FAST_PATH": "0"})
    try:
        yield p
    finally:
        stop_proxy(p)


@pytest.fixture(scope="module")
def metered_proxy(local_cluster, tmp_path_factory, request) -> Iterator[tuple[ProxyProcess, str]]:
    """A proxy with its HTTP listener, and its /metrics address (``fast_path_statements`` reads it)."""
    base = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / f"{request.module.__name__.rpartition('.')[2]}-metered.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n")
    p = start_proxy(cfg, local_cluster.endpoints, tmp_path_factory.mktemp("metered-proxy") / "proxy.log")
    try:
        yield p, f"http://127.0.0.1:{http_port}/metrics"
    finally:
        stop_proxy(p)


@pytest.fixture(scope="module")
def shard_of(local_cluster) -> Callable[[int], str]:
    """The commerce shard a customer id lives on (as the fast path routes it)."""
    session = ProxySession(ClusterState(local_cluster.config, local_cluster.endpoints))
    session.use_target("commerce")

    def shard(customer_id: int) -> str:
        sql = f"select customer_id from customer where customer_id = {customer_id}"
        plan_statement(session.state, session.database, sql)
        route = fast_route(session, sql)
        assert route is not None
        return route.shard

    return shard


@pytest.fixture(scope="module")
def message_table(local_cluster) -> Iterator[str]:
    """customer_events as a message table the proxies serve (its comment set before they start)."""
    conns = [shard_connection(e) for (ks, _), e in sorted(local_cluster.endpoints.items()) if ks == "commerce"]
    try:
        original = query(conns[0], "select table_comment from information_schema.tables"
                                   " where table_schema = database() and table_name = 'customer_events'")[0][0]
        for c in conns:
            query(c, f"alter table customer_events comment '{MESSAGE_COMMENT}'")
            query(c, "delete from customer_events")
        yield "customer_events"
        for c in conns:
            query(c, "delete from customer_events")
            query(c, f"alter table customer_events comment '{original}'")
    finally:
        for c in conns:
            c.close()
