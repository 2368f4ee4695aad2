"""One autocommit statement under ``transaction_mode = twopc`` that reaches shards one step
after another (an owned lookup vindex's row on the lookup keyspace, then the row on its
commerce shard) commits all or nothing, like a statement reaching its shards at once."""

from __future__ import annotations

import itertools
import random

import pymysql
import pytest

from tests.proxy_process import ProxyProcess

_order_ids = itertools.count(random.randrange(1, 1 << 30) * 1000)
TOO_LONG_SKU = "x" * 300  # corder.sku is VARBINARY(128): the shard refuses the row (strict mode)


def twopc_connection(proxy: ProxyProcess) -> pymysql.connections.Connection:
    conn = proxy.connect("commerce", autocommit=True)
    with conn.cursor() as c:
        c.execute("set transaction_mode = 'twopc'")
    return conn


def lookup_row(proxy: ProxyProcess, order_id: int) -> list[tuple]:
    conn = proxy.connect("lookup", autocommit=True)
    try:
        with conn.cursor() as c:
            c.execute(f"select order_id from corder_order_id_idx where order_id = {order_id}")
            return list(c.fetchall())
    finally:
        conn.close()


def prepared_anywhere(local_cluster) -> list[tuple]:
    out = []
    for (keyspace, shard), ep in local_cluster.endpoints.items():
        conn = pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password)
        try:
            with conn.cursor() as c:
                c.execute("xa recover")
                out.extend((keyspace, shard, *row) for row in c.fetchall())
        finally:
            conn.close()
    return out


def test_failed_owner_row_leaves_no_lookup_row_under_implicit_twopc(proxy: ProxyProcess) -> None:
    order_id = next(_order_ids)
    conn = twopc_connection(proxy)
    try:
        with conn.cursor() as c, pytest.raises(pymysql.err.MySQLError) as refused:
            c.execute(
                "insert into corder (order_id, customer_id, sku, price) "
                f"values ({order_id}, 5, '{TOO_LONG_SKU}', 1)"
            )
        assert refused.value.args[0] == 1406  # Data too long, from the commerce shard
        with conn.cursor() as c:
            c.execute(f"select order_id from corder where order_id = {order_id}")
            assert c.fetchall() == ()
    finally:
        conn.close()
    assert lookup_row(proxy, order_id) == []  # the lookup row went with the refused owner row


def test_lookup_and_owner_rows_commit_together_under_implicit_twopc(
    proxy: ProxyProcess, local_cluster
) -> None:
    order_id = next(_order_ids)
    conn = twopc_connection(proxy)
    try:
        with conn.cursor() as c:
            c.execute(
                "insert into corder (order_id, customer_id, sku, price) "
                f"values ({order_id}, 5, 'SKU-1001', 100)"
            )
            c.execute(f"select order_id, price from corder where order_id = {order_id}")
            assert c.fetchall() == ((order_id, 100),)
            assert lookup_row(proxy, order_id) == [(order_id,)]
            c.execute(f"delete from corder where order_id = {order_id}")
            assert c.rowcount == 1
    finally:
        conn.close()
    assert lookup_row(proxy, order_id) == []  # deleted with its owner row
    assert prepared_anywhere(local_cluster) == []
