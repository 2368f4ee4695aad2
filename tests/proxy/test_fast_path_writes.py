"""Autocommit UPDATE and DELETE on the fast path (proxy.fast_path): one-shard ones answer
byte for byte as the normal path does (affected rows, the "Rows matched" info text, status
flags, warnings, errors), an ack of message-table rows frees those messages as the normal path
does, and DML that maintains lookup vindex rows is left to the normal path. Checked against
real shards through PyMySQL and mysqlclient, beside a proxy with the fast path off."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import MySQLdb
import pymysql
import pytest

from proxy.cluster_state import ClusterState
from proxy.fast_path.routing import fast_route
from proxy.planning import plan_statement
from proxy.session import ProxySession
from tests.proxy.sessions_support import (
    fast_path_statements,
    pymysql_answers,
    query,
)
from tests.proxy_process import free_port, start_proxy, stop_proxy


def _fresh_id() -> int:
    return 500_000_000 + uuid.uuid4().int % 100_000_000


def _statements(a: int, other_shard: int) -> list[str]:
    """One-shard UPDATEs and DELETEs of customer ``a`` (inserted first), with every kind of answer."""
    return [
        f"insert into customer(customer_id, email, tenant_id) values ({a}, 'w', 7)",
        f"update customer set email = concat(email, '+') where customer_id = {a}",  # matched 1, changed 1
        f"update customer set tenant_id = 7 where customer_id = {a}",  # matched 1, changed 0
        f"update customer set tenant_id = 8 where customer_id = {a + 1}",  # no such row
        f"update customer set tenant_id = 'x1' where customer_id = {a}",  # 1366 (strict) or a warning
        f"update customer set email = repeat('y', 300) where customer_id = {a}",  # 1406
        f"update customer set no_such_column = 1 where customer_id = {a}",  # 1054
        f"update customer set tenant_id = tenant_id + 1 where customer_id in ({a})",
        f"update customer set tenant_id = 9 where customer_id = {a} and tenant_id > 100",  # matched 0
        f"select customer_id, email, tenant_id from customer where customer_id = {a}",
        f"delete from customer where customer_id = {a} and tenant_id = 0",  # none
        f"delete from customer where customer_id = {a}",
        f"delete from customer where customer_id = {a}",  # gone already
        # Two shards: the normal path (its answer sums the shards', without their info text).
        f"insert into customer(customer_id, email, tenant_id) values ({a}, 'w', 7)",
        f"update customer set tenant_id = 3 where customer_id in ({a}, {other_shard})",
        f"delete from customer where customer_id in ({a}, {other_shard})",
    ]


def _mysqlclient_answers(conn: Any, statements: list[str]) -> list[Any]:
    out: list[Any] = []
    for sql in statements:
        try:
            c = conn.cursor()
            c.execute(sql)
            out.append((c.rowcount, conn.affected_rows(), conn.info(), conn.warning_count(), conn.insert_id(),
                        c.fetchall()))
            c.close()
        except MySQLdb.MySQLError as e:
            out.append(("error", e.args))
    return out


def _other_shard(shard_of: Callable[[int], str], a: int) -> int:
    return next(i for i in range(a + 1000, a + 2000) if shard_of(i) != shard_of(a))


def _without_ids(answers: list[Any], ids: tuple[int, ...], shard_of: Callable[[int], str]) -> str:
    text = repr(answers)
    for i in ids:
        text = text.replace(str(i), "<id>").replace(str(i + 1), "<id+1>")
    text = re.sub(r"commerce\.[-0-9a-f]+\.primary", "commerce.<shard>.primary", text)
    return text


def _warm(run: Callable[[list[str]], Any], shard_of: Callable[[int], str]) -> None:
    """Plan every shape (a plan-cache miss takes the normal path) with ids of its own."""
    a = _fresh_id()
    run(_statements(a, _other_shard(shard_of, a)))


@pytest.mark.parametrize("client", ["pymysql", "mysqlclient"])
def test_autocommit_updates_and_deletes_answer_byte_for_byte_as_on_the_normal_path(
    metered_proxy, normal_proxy, shard_of, client
) -> None:
    proxy, metrics = metered_proxy
    answers: dict[str, str] = {}
    sent = 0.0
    for name, p in (("fast", proxy), ("normal", normal_proxy)):
        if client == "pymysql":
            conn: Any = p.connect("commerce", autocommit=True)

            def run(statements: list[str], conn: Any = conn) -> list[Any]:
                return pymysql_answers(conn, statements)
        else:
            conn = MySQLdb.connect(host=p.host, port=p.port, user="root", password="", database="commerce",
                                   autocommit=True)

            def run(statements: list[str], conn: Any = conn) -> list[Any]:
                return _mysqlclient_answers(conn, statements)
        try:
            _warm(run, shard_of)
            a = _fresh_id()
            b = _other_shard(shard_of, a)
            before = fast_path_statements(metrics) if name == "fast" else 0.0
            got = run(_statements(a, b))
            if name == "fast":
                sent = fast_path_statements(metrics) - before
            answers[name] = _without_ids(got, (a, b), shard_of)
        finally:
            conn.close()
    assert answers["fast"] == answers["normal"]
    assert "Rows matched: 1  Changed: 1  Warnings: 0" in answers["fast"]
    assert "Rows matched: 1  Changed: 0  Warnings: 0" in answers["fast"]
    # All but the two-shard UPDATE and DELETE may take the fast path (a statement finding no idle
    # shard link yet takes the normal path while one opens: most is enough here).
    assert sent >= len(_statements(0, 0)) - 5


def test_lookup_vindex_rows_are_kept_by_updates_and_deletes_as_on_the_normal_path(metered_proxy, local_cluster) -> None:
    proxy, _ = metered_proxy
    customer = _fresh_id()
    conn = proxy.connect("commerce", autocommit=True)
    try:
        for _ in range(2):  # the second time: every shape planned
            query(conn, f"insert into corder(customer_id, sku, price) values ({customer}, 'a', 1)")
            order_id = query(conn, f"select order_id from corder where customer_id = {customer}")[0][0]
            assert query(conn, f"select count(*) from lookup.corder_order_id_idx where order_id = {order_id}") == ((1,),)
            # Routed by the lookup vindex, and changing its column: the lookup rows follow.
            query(conn, f"update corder set price = 2 where order_id = {order_id}")
            query(conn, f"update corder set order_id = {order_id + 10_000_000} where customer_id = {customer}")
            assert query(conn, f"select count(*) from lookup.corder_order_id_idx where order_id = {order_id}") == ((0,),)
            moved = order_id + 10_000_000
            assert query(conn, f"select price from corder where order_id = {moved}") == ((2,),)
            query(conn, f"delete from corder where customer_id = {customer}")
            assert query(conn, f"select count(*) from lookup.corder_order_id_idx where order_id = {moved}") == ((0,),)
            assert query(conn, f"select count(*) from corder where customer_id = {customer}") == ((0,),)
    finally:
        conn.close()


def _counters(conn: pymysql.connections.Connection, shard: str) -> tuple[int, int, int]:
    """SHOW VITESS_MESSAGES of customer_events on ``shard``: (in flight, sent, acked)."""
    for row in query(conn, "show vitess_messages"):
        if row[1] == shard and row[2] == "customer_events":
            return int(row[4]), int(row[5]), int(row[6])
    raise AssertionError("customer_events not served")


def test_an_ack_on_the_fast_path_frees_its_messages_which_are_never_sent_again(
    message_table, local_cluster, shard_of, tmp_path_factory
) -> None:
    base = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / "fast-path-acks.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n")
    proxy = start_proxy(cfg, local_cluster.endpoints, tmp_path_factory.mktemp("fast-acks") / "proxy.log")
    metrics = f"http://127.0.0.1:{http_port}/metrics"
    stream = proxy.connect("commerce", autocommit=True, cursorclass=pymysql.cursors.SSCursor)
    producer = proxy.connect("commerce", autocommit=True)
    try:
        with stream.cursor() as c:
            c.execute("set workload = olap")
        reader = stream.cursor()
        reader.execute("stream * from customer_events")
        first = _fresh_id()
        ids = [first] + [i for i in range(first + 1, first + 200) if shard_of(i) == shard_of(first)][:5]
        shard = shard_of(first)
        for i in ids:
            query(producer, f"insert into customer_events(id, tenant_id, message) values ({i}, 1, '{{}}')")
        received = [reader.fetchone()[0] for _ in ids]
        assert sorted(received) == sorted(ids)
        in_flight, _, acked = _counters(producer, shard)
        assert in_flight >= len(ids)

        def ack(group: list[int]) -> int:
            return query_count(producer, f"UPDATE customer_events SET time_acked = {time.time_ns()}, time_next = NULL"
                                         f" WHERE id IN ({', '.join(map(str, group))}) AND time_acked IS NULL")

        assert ack(ids[:1]) == 1  # plans the shape: the normal path
        before = fast_path_statements(metrics)
        assert ack(ids[1:]) == len(ids) - 1
        assert fast_path_statements(metrics) == before + 1  # the ack went on the fast path
        after = _counters(producer, shard)
        assert after[0] == in_flight - len(ids) and after[2] == acked + len(ids)
        assert query(producer, f"select count(*) from customer_events where id in ({', '.join(map(str, ids))})"
                               " and time_acked is not null") == ((len(ids),),)
        # Never sent again, though the ack wait would have passed for an unacked one (the proxy's
        # cache forgot them: a message still cached would go out on the next send).
        query(producer, f"insert into customer_events(id, tenant_id, message) values ({first + 5000}, 1, '{{}}')")
        assert reader.fetchone()[0] == first + 5000
        assert _counters(producer, shard_of(first + 5000))[1] >= 1
    finally:
        reading = getattr(stream, "_result", None)
        if reading is not None:
            reading.unbuffered_active = False  # a STREAM never ends: nothing left to read on close
        stream.close()
        producer.close()
        stop_proxy(proxy)


def query_count(conn: pymysql.connections.Connection, sql: str) -> int:
    with conn.cursor() as c:
        return c.execute(sql)


def test_only_one_shard_updates_and_deletes_without_lookup_rows_to_keep_qualify(local_cluster) -> None:
    session = ProxySession(ClusterState(local_cluster.config, local_cluster.endpoints))
    session.use_target("commerce")

    def route(sql: str) -> Any:
        plan_statement(session.state, session.database, sql)  # into the plan cache
        return fast_route(session, sql)

    update = route("update customer set email = 'x' where customer_id = 5")
    assert update is not None and (update.keyword, update.plan, update.acks_table) == ("update", "Update/EqualUnique", None)
    assert route("delete from customer where customer_id in (5)") is not None
    # Several shards, lookup rows to delete or change, routed by a lookup: the normal path.
    assert route("update customer set email = 'x' where tenant_id = 5") is None
    assert route("delete from corder where customer_id = 5") is None
    assert route("update corder set order_id = 7 where customer_id = 5") is None
    assert route("update corder set price = 7 where order_id = 5") is None
    session.transaction_mode = "twopc"  # made atomic by the normal path
    assert route("update customer set email = 'x' where customer_id = 5") is None
