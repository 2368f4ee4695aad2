"""Time limits: max_execution_time and Vitess's QUERY_TIMEOUT_MS stop a statement at the
shards with MySQL's 3024; transaction_timeout rolls back a transaction left idle."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from tests.proxy.sessions_support import (
    commerce_endpoints,
    dsn_cluster_file,
    one_customer_per_commerce_shard,
    query,
    shard_connection,
    shard_threads_running,
    sleeping_scatter,
    wait_for,
)
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy

TIMEOUT_ERROR = (3024, "Query execution was interrupted, maximum statement execution time exceeded")


def _tag() -> str:
    return f"to_{uuid.uuid4().hex[:10]}"


def _timed_error(conn, sql: str) -> tuple[pymysql.err.OperationalError, float]:
    started = time.monotonic()
    with pytest.raises(pymysql.err.OperationalError) as e:
        query(conn, sql)
    return e.value, time.monotonic() - started


def test_max_execution_time_stops_a_scatter_on_every_shard_with_3024(proxy, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    tag = _tag()
    conn = proxy.connect("commerce")
    try:
        query(conn, "set max_execution_time = 700")
        assert query(conn, "select @@max_execution_time") == ((700,),)
        error, seconds = _timed_error(conn, sleeping_scatter(tenant, 30, tag))
        assert error.args == TIMEOUT_ERROR
        # The scatter sleeps 30 s: answered within 10 s it was stopped at its limit (the bound
        # was 1.7 s, which a busy machine's kill-and-answer can pass).
        assert 0.6 <= seconds < 10, seconds
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()))
        # Statements within the limit run; the session goes on.
        assert query(conn, f"select count(*) from customer where tenant_id = {tenant}") == ((2,),)
        query(conn, "set max_execution_time = 0")
        assert query(conn, "select sleep(1)") == ((0,),)
    finally:
        conn.close()


def test_max_execution_time_leaves_statements_other_than_select_alone(proxy, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    conn = proxy.connect("commerce")
    try:
        query(conn, "set max_execution_time = 200")
        # An UPDATE sleeping 0.4 s on each shard is not a SELECT: MySQL does not time it.
        query(conn, f"update customer set email = 'slow' where tenant_id = {tenant} and sleep(0.4) = 0")
        assert query(conn, f"select count(*) from customer where tenant_id = {tenant} and email = 'slow'") == ((2,),)
    finally:
        conn.close()


def test_query_timeout_ms_comment_stops_the_statement_with_3024(proxy, local_cluster) -> None:
    tenant = one_customer_per_commerce_shard(local_cluster)
    tag = _tag()
    conn = proxy.connect("commerce")
    try:
        error, seconds = _timed_error(
            conn, f"select /*vt+ QUERY_TIMEOUT_MS=400 */ customer_id, sleep(30) as `{tag}` from customer "
            f"where tenant_id = {tenant}",
        )
        assert error.args == TIMEOUT_ERROR
        assert 0.3 <= seconds < 10, seconds  # it sleeps 30 s (the bound was 1.4 s)
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()))
        # Only that statement was limited.
        assert query(conn, "select sleep(0.6)") == ((0,),)
        # The comment overrides the session's limit, both ways.
        query(conn, "set max_execution_time = 100")
        assert query(conn, "select /*vt+ QUERY_TIMEOUT_MS=0 */ sleep(0.4)") == ((0,),)
        assert query(conn, "select /*vt+ QUERY_TIMEOUT_MS=2000 */ sleep(0.4)") == ((0,),)
    finally:
        conn.close()


def test_query_timeout_ms_stops_a_join_the_proxy_runs(proxy, local_cluster) -> None:
    """A join of two keyspaces is run by the proxy (a nested loop of shard queries)."""
    tenant = one_customer_per_commerce_shard(local_cluster)
    conn = proxy.connect("commerce")
    lookup = next(e for (ks, _s), e in local_cluster.endpoints.items() if ks == "lookup")
    try:
        sql = (
            "select /*vt+ QUERY_TIMEOUT_MS=500 */ c.customer_id, p.sku from customer c "
            f"join lookup.product p on p.price = c.tenant_id + sleep(0.5) where c.tenant_id = {tenant}"
        )
        error, seconds = _timed_error(conn, sql)
        assert error.args == TIMEOUT_ERROR
        # Untimed it sleeps 0.5 s for each of 4 products for each of 2 customers: 4 s (the
        # bound was 1.4 s).
        assert seconds < 3, seconds
        direct = shard_connection(lookup)
        try:
            assert wait_for(lambda: not query(
                direct, "select id from information_schema.processlist where info like '%SLEEP(0.5)%' "
                "and id <> connection_id()"
            ))
        finally:
            direct.close()
        assert query(conn, "select 3") == ((3,),)
    finally:
        conn.close()


def test_query_timeout_ms_on_a_single_shard_target(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        error, seconds = _timed_error(conn, "select /*vt+ QUERY_TIMEOUT_MS=300 */ sleep(20)")
        assert error.args == TIMEOUT_ERROR and seconds < 10, seconds  # it sleeps 20 s (the bound was 1.2 s)
        assert query(conn, "select count(*) > 0 from product") == ((1,),)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def proxy_with_transaction_timeout(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    """A proxy whose cluster file sets ``transaction_timeout: 1`` (second)."""
    work = tmp_path_factory.mktemp("tx-timeout")
    cfg = dsn_cluster_file(local_cluster, work, transaction_timeout=1)
    p = start_proxy(cfg, local_cluster.endpoints, work / "proxy.log")
    try:
        yield p
    finally:
        stop_proxy(p)


def test_transaction_timeout_rolls_back_an_idle_transaction(proxy_with_transaction_timeout, local_cluster) -> None:
    customer_id = 94_000_000 + uuid.uuid4().int % 1_000_000
    conn = proxy_with_transaction_timeout.connect("commerce")
    try:
        query(conn, "begin")
        query(conn, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'idle', 1)")
        time.sleep(2.0)  # idle inside the transaction, longer than transaction_timeout
        # The shards rolled it back: its row lock is gone, a direct insert of the same key does not
        # wait. Tried until it holds (within 10 s), not once at 2 s: the rollback is the proxy's
        # timer's, which a busy machine runs late.
        def inserted_directly(endpoint: Any) -> bool:
            direct = shard_connection(endpoint)
            try:
                query(direct, "set innodb_lock_wait_timeout = 1")
                query(direct, f"insert into customer(customer_id, tenant_id) values ({customer_id}, 2)")
                query(direct, f"delete from customer where customer_id = {customer_id}")
                return True
            except pymysql.err.OperationalError as e:
                if e.args[0] != 1205:  # only a lock wait timeout means "not yet"
                    raise
                return False
            finally:
                direct.close()

        for endpoint in commerce_endpoints(local_cluster):
            assert wait_for(lambda e=endpoint: inserted_directly(e)), "the idle transaction kept its lock"
        # The session learns it at its next statement; COMMIT does not pretend to commit.
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, "commit")
        assert e.value.args[0] == 1317 and "transaction_timeout" in e.value.args[1]
        assert query(conn, f"select count(*) from customer where customer_id = {customer_id}") == ((0,),)
        # The session goes on in autocommit.
        query(conn, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'after', 1)")
        assert query(conn, f"select email from customer where customer_id = {customer_id}") == ((b"after",),)
    finally:
        query(conn, f"delete from customer where customer_id = {customer_id}")
        conn.close()


def test_transaction_timeout_spares_a_transaction_that_keeps_working(proxy_with_transaction_timeout) -> None:
    customer_id = 95_000_000 + uuid.uuid4().int % 1_000_000
    conn = proxy_with_transaction_timeout.connect("commerce")
    try:
        query(conn, "begin")
        # 2.1 s in the transaction, idle 0.3 s at a time: 0.7 s of slack against the 1 s limit
        # for a busy machine's pauses (4 x 0.5 s left 0.5 s).
        for i in range(7):
            query(conn, f"insert into customer(customer_id, tenant_id) values ({customer_id + i}, 1)")
            time.sleep(0.3)
        query(conn, "commit")
        assert query(conn, f"select count(*) from customer where customer_id between {customer_id} and {customer_id + 6}") == ((7,),)
    finally:
        query(conn, f"delete from customer where customer_id between {customer_id} and {customer_id + 6}")
        conn.close()


def test_rollback_after_a_transaction_timeout_is_ok(proxy_with_transaction_timeout) -> None:
    conn = proxy_with_transaction_timeout.connect("commerce")
    try:
        query(conn, "begin")
        query(conn, "select count(*) from customer")
        time.sleep(1.6)
        assert query(conn, "rollback") == ()
        assert query(conn, "select 1") == ((1,),)
    finally:
        conn.close()
