"""Autocommit writes reaching several shards on the fast path (proxy.fast_path.several): an INSERT
whose rows go to both commerce shards, an UPDATE / DELETE whose WHERE is an IN-list of customer
ids on both. Each answers byte for byte as the normal path does (the OK packet with the summed
affected rows and warnings, the first failing shard's error), is applied whole or not at all
(a duplicate key on the second shard leaves nothing on the first), and tells messaging of its
message-table rows and acks as the normal path does. Single and twopc sessions, and statements
inside a transaction, keep the normal path. Checked against the real shards, beside a proxy with
the fast path off."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from proxy.cluster_state import ClusterState
from proxy.fast_path.routing import fast_route
from proxy.planning import plan_statement
from proxy.session import ProxySession
from tests.proxy.sessions_support import (
    fast_path_statements,
    metric_total,
    pymysql_answers,
    query,
    run_in_thread,
    shard_threads_running,
    wait_for,
)
from tests.proxy_process import free_port, start_proxy, stop_proxy


def _fresh_id() -> int:
    return 600_000_000 + uuid.uuid4().int % 100_000_000


def _ids(shard_of: Callable[[int], str]) -> tuple[int, int, int]:
    """``a`` and ``c`` on one shard, ``b`` on the other."""
    a = _fresh_id()
    b = next(i for i in range(a + 1, a + 1000) if shard_of(i) != shard_of(a))
    c = next(i for i in range(b + 1, b + 1000) if shard_of(i) == shard_of(a))
    return a, b, c


def _statements(a: int, b: int, c: int) -> list[str]:
    """Two-shard writes of customers a, b, c with every kind of answer."""
    rows = "insert into customer(customer_id, email, tenant_id) values "
    return [
        f"{rows}({a}, 'w', 7), ({b}, 'x', 8)",  # two rows, two shards
        f"{rows}({c}, 'w', 7), ({b}, 'x', 8)",  # 1062 on the second shard: c not left behind
        f"select customer_id from customer where customer_id in ({a}, {b}, {c}) order by customer_id",
        f"{rows}({b}, 'x', 8), ({c}, 'w', 7)",  # 1062 on the first shard
        f"select customer_id from customer where customer_id in ({a}, {b}, {c}) order by customer_id",
        f"insert ignore into customer(customer_id, email, tenant_id) values ({c}, 'w', 7), ({b}, 'x', 8)",
        # 1406 on the first shard, 1062 on the second: the first shard's error, as the normal path.
        f"{rows}({c}, repeat('y', 300), 1), ({b}, 'x', 1)",
        f"update customer set tenant_id = tenant_id + 1 where customer_id in ({a}, {b})",
        f"update customer set tenant_id = 9 where customer_id in ({a}, {b}, {c})",
        f"update customer set tenant_id = 9 where customer_id in ({a}, {b})",  # matched, none changed
        f"update customer set email = repeat('y', 300) where customer_id in ({a}, {b})",  # 1406
        f"update customer set no_such_column = 1 where customer_id in ({a}, {b})",  # 1054
        f"select customer_id, email, tenant_id from customer where customer_id in ({a}, {b}, {c})"
        " order by customer_id",
        f"delete from customer where customer_id in ({a}, {b}) and tenant_id > 100",  # none
        f"delete from customer where customer_id in ({a}, {b}, {c})",
        f"delete from customer where customer_id in ({a}, {b}, {c})",  # gone already
    ]


def _named(answers: list[Any], a: int, b: int, c: int) -> str:
    """The answers' text with the ids and shard names by their role (ids differ run to run)."""
    names = {str(i): f"<{n}>" for n, i in (("a", a), ("b", b), ("c", c))}
    text = re.sub(r"(?<!\d)\d{9,10}(?!\d)", lambda m: names.get(m.group(), m.group()), repr(answers))
    return re.sub(r"commerce\.[-0-9a-f]+\.primary", "commerce.<shard>.primary", text)


# The statements above that reach both shards (the SELECTs and nothing else take other ways).
_WRITES = 13


def test_writes_to_two_shards_answer_byte_for_byte_as_on_the_normal_path(
    metered_proxy, normal_proxy, shard_of
) -> None:
    proxy, metrics = metered_proxy
    answers: dict[str, str] = {}
    sent = 0.0
    for name, p in (("fast", proxy), ("normal", normal_proxy)):
        conn = p.connect("commerce", autocommit=True)
        try:
            pymysql_answers(conn, _statements(*_ids(shard_of)))  # plans every shape
            a, b, c = _ids(shard_of)
            before = fast_path_statements(metrics) if name == "fast" else 0.0
            got = pymysql_answers(conn, _statements(a, b, c))
            if name == "fast":
                sent = fast_path_statements(metrics) - before
            answers[name] = _named(got, a, b, c)
        finally:
            conn.close()
    assert answers["fast"] == answers["normal"]
    assert "'error', (1062" in answers["fast"] and "'error', (1406" in answers["fast"]
    # Every write reached both shards on the fast path (counted once per shard); the SELECTs of
    # one shard or two are counted too where they qualify, so at least the writes' count.
    assert sent >= 2 * _WRITES


@pytest.mark.parametrize("second", [True, False], ids=["second-shard", "first-shard"])
def test_a_duplicate_key_on_one_shard_leaves_nothing_on_the_other(metered_proxy, shard_of, second) -> None:
    proxy, metrics = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    try:
        a, b, c = _ids(shard_of)
        query(conn, f"insert into customer(customer_id, email, tenant_id) values ({a}, 'w', 1), ({b}, 'x', 1)")
        # Rows on both shards, one of them a duplicate of b (on b's shard); the other shard's row
        # is first or second in the statement.
        rows = f"({c}, 'new', 2), ({b}, 'dup', 2)" if second else f"({b}, 'dup', 2), ({c}, 'new', 2)"
        before = fast_path_statements(metrics)
        with pytest.raises(pymysql.err.IntegrityError) as failed:
            query(conn, f"insert into customer(customer_id, email, tenant_id) values {rows}")
        assert failed.value.args[0] == 1062
        assert fast_path_statements(metrics) == before + 2  # both shards, on the fast path
        assert query(conn, f"select count(*) from customer where customer_id = {c}") == ((0,),)
        # An UPDATE failing on one shard changes nothing on the other either.
        with pytest.raises(pymysql.err.MySQLError) as too_long:
            query(conn, f"update customer set email = if(customer_id = {b}, repeat('z', 300), 'changed')"
                        f" where customer_id in ({a}, {b})")
        assert too_long.value.args[0] == 1406
        assert query(conn, f"select email from customer where customer_id in ({a}, {b}) order by email") == (
            (b"w",), (b"x",))
        query(conn, f"delete from customer where customer_id in ({a}, {b}, {c})")
        assert query(conn, f"select count(*) from customer where customer_id in ({a}, {b}, {c})") == ((0,),)
    finally:
        conn.close()


def _pool_acquires(metrics_url: str) -> float:
    """``shardgate_pool_acquires`` of the commerce shards."""
    return metric_total(metrics_url, "shardgate_pool_acquires", keyspace="commerce")


def test_writes_to_two_shards_and_their_rollbacks_check_out_no_pooled_connection(metered_proxy, shard_of) -> None:
    """The implicit transaction runs on the fast path's own shard links (BEGIN with each shard's
    statement, then the COMMITs, or the ROLLBACK of both on an error on one): no connection of
    the shard pools is checked out, and a failure on one shard still leaves nothing on the other."""
    proxy, metrics = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    rows = "insert into customer(customer_id, email, tenant_id) values "
    try:
        # Links are opened in the background when a statement finds none idle: warm them.
        for _ in range(20):
            a, b, _c = _ids(shard_of)
            query(conn, f"{rows}({a}, 'w', 1), ({b}, 'x', 1)")
            query(conn, f"delete from customer where customer_id in ({a}, {b})")
        written: list[int] = []
        before = _pool_acquires(metrics)
        for _ in range(10):
            a, b, c = _ids(shard_of)
            query(conn, f"{rows}({a}, 'w', 1), ({b}, 'x', 1)")
            with pytest.raises(pymysql.err.IntegrityError) as failed:  # 1062 on b's shard
                query(conn, f"{rows}({c}, 'new', 2), ({b}, 'dup', 2)")
            assert failed.value.args[0] == 1062
            written += [a, b, c]
        # The normal path checks out one connection per shard and statement (40 here); the
        # proxy's own background work (health pings) may check out a few.
        assert _pool_acquires(metrics) - before < 10
        ids = ", ".join(map(str, written))
        assert query(conn, f"select count(*) from customer where customer_id in ({ids})") == ((20,),)
        query(conn, f"delete from customer where customer_id in ({ids})")
    finally:
        conn.close()


def test_kill_query_stops_a_write_to_two_shards_on_both_and_changes_nothing(
    metered_proxy, local_cluster, shard_of
) -> None:
    proxy, metrics = metered_proxy
    a, b, _c = _ids(shard_of)
    tag = f"several-kill-{uuid.uuid4().hex[:8]}"
    victim, killer = proxy.connect("commerce", autocommit=True), proxy.connect("commerce", autocommit=True)

    def update(seconds: int) -> str:
        return (f"update customer set email = concat('changed', sleep({seconds})) where customer_id in ({a}, {b})"
                f" and '{tag}' = '{tag}'")

    try:
        query(victim, f"insert into customer(customer_id, email, tenant_id) values ({a}, 'w', 1), ({b}, 'x', 1)")
        assert query(victim, "select 1") == ((1,),)
        query_count(victim, update(0).replace(f"'{tag}' = '{tag}'", "'x' = 'x'"))  # plans the shape
        query(victim, f"update customer set email = if(customer_id = {a}, 'w', 'x') where customer_id in ({a}, {b})")
        before = fast_path_statements(metrics)
        outcome = run_in_thread(victim, update(30))
        assert wait_for(lambda: sum(map(len, shard_threads_running(local_cluster, tag).values())) == 2), (
            "the update never ran on both shards")
        assert fast_path_statements(metrics) == before + 2  # on the fast path
        query(killer, f"kill query {victim.thread_id()}")
        assert outcome.done.wait(10)
        assert isinstance(outcome.error, pymysql.err.OperationalError)
        assert outcome.error.args == (1317, "Query execution was interrupted")
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()))
        # Rolled back on both shards; the session goes on.
        assert query(victim, f"select email from customer where customer_id in ({a}, {b}) order by email") == (
            (b"w",), (b"x",))
        query(victim, f"delete from customer where customer_id in ({a}, {b})")
    finally:
        victim.close()
        killer.close()


def test_the_next_statement_follows_a_write_to_two_shards_in_one_round_trip(metered_proxy, shard_of) -> None:
    """Statements pipelined behind a two-shard write (a multi-statement COM_QUERY is one
    command: several commands sent at once here) are answered in order, after it."""
    proxy, _ = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    try:
        a, b, _c = _ids(shard_of)
        sql = f"insert into customer(customer_id, email, tenant_id) values ({a}, 'w', 1), ({b}, 'x', 1)"
        query(conn, sql.replace(str(a), str(a + 7)).replace(str(b), str(b + 7)))  # planned
        for _ in range(3):
            conn._execute_command(3, sql)  # type: ignore[attr-defined]
            conn._execute_command(3, f"select count(*) from customer where customer_id in ({a}, {b})")  # type: ignore[attr-defined]
            conn._execute_command(3, f"delete from customer where customer_id in ({a}, {b})")  # type: ignore[attr-defined]
            results: list[Any] = []
            for _ in range(3):
                conn._next_seq_id = 1  # type: ignore[attr-defined]  # each answer starts a sequence
                r = pymysql.connections.MySQLResult(conn)
                r.read()
                results.append(r.rows if r.rows is not None else r.affected_rows)
            assert results == [2, ((2,),), 2]
        query(conn, f"delete from customer where customer_id in ({a + 7}, {b + 7})")
    finally:
        conn.close()


def test_only_multi_mode_autocommit_writes_to_several_shards_qualify(local_cluster, shard_of) -> None:
    session = ProxySession(ClusterState(local_cluster.config, local_cluster.endpoints))
    session.use_target("commerce")
    a, b, c = _ids(shard_of)

    def route(sql: str) -> Any:
        plan_statement(session.state, session.database, sql)  # into the plan cache
        return fast_route(session, sql)

    insert = route(f"insert into customer(customer_id, email) values ({a}, 'x'), ({b}, 'y'), ({c}, 'z')")
    assert insert is not None and insert.several is not None
    # Split as proxy.engine.insert splits the rows: shards in the order of their first row.
    assert [s for s, _ in insert.several] == [shard_of(a), shard_of(b)]
    assert f"({a}, 'x'), ({c}, 'z')" in insert.several[0][1] and f"({b}, 'y')" in insert.several[1][1]
    update = route(f"update customer set email = 'x' where customer_id in ({a}, {b})")
    assert update is not None and update.several is not None and len(update.several) == 2
    delete = route(f"delete from customer where customer_id in ({a}, {b})")
    assert delete is not None and delete.several is not None and update.plan == "Update/IN"
    one = route(f"delete from customer where customer_id in ({a}, {c})")
    assert one is not None and one.several is None and one.shard == shard_of(a)
    # A scatter, lookup rows to keep, a sequence to call: the normal path.
    assert route("update customer set email = 'x' where tenant_id = 5") is None
    assert route(f"insert into corder(customer_id, order_id) values ({a}, 1), ({b}, 2)") is None
    assert route(f"insert into customer(email) values ('{a}'), ('{b}')") is None
    # Inside a transaction the statement joins it (the normal path's per-shard rules).
    assert fast_route(session, f"update customer set email = 'x' where customer_id in ({a}, {b})",
                      in_transaction=True) is None
    for mode in ("single", "twopc"):
        session.transaction_mode = mode
        assert route(f"update customer set email = 'x' where customer_id in ({a}, {b})") is None
        assert route(f"insert into customer(customer_id, email) values ({a}, 'x'), ({b}, 'y')") is None


def test_single_mode_writes_to_two_shards_keep_the_normal_paths_answer(metered_proxy, normal_proxy, shard_of) -> None:
    answers = []
    for p in (metered_proxy[0], normal_proxy):
        conn = p.connect("commerce", autocommit=True)
        try:
            query(conn, "set transaction_mode = 'single'")
            a, b, c = _ids(shard_of)
            answers.append(_named(pymysql_answers(conn, _statements(a, b, c)), a, b, c))
        finally:
            conn.close()
    assert answers[0] == answers[1]


def _in_flight(conn: pymysql.connections.Connection) -> dict[str, tuple[int, int]]:
    """SHOW VITESS_MESSAGES of customer_events: (in flight, acked) by shard."""
    return {row[1]: (int(row[4]), int(row[6])) for row in query(conn, "show vitess_messages")
            if row[2] == "customer_events"}


def test_messages_inserted_and_acked_on_two_shards_are_sent_once_and_freed(
    message_table, local_cluster, shard_of, tmp_path_factory
) -> None:
    base = local_cluster.config.path
    http_port = free_port()
    cfg = base.parent / "fast-path-several-messages.yaml"
    cfg.write_text(base.read_text() + f"\nhttp: {{host: 127.0.0.1, port: {http_port}}}\n")
    proxy = start_proxy(cfg, local_cluster.endpoints, tmp_path_factory.mktemp("several-messages") / "proxy.log")
    metrics = f"http://127.0.0.1:{http_port}/metrics"
    stream = proxy.connect("commerce", autocommit=True, cursorclass=pymysql.cursors.SSCursor)
    producer = proxy.connect("commerce", autocommit=True)
    try:
        with stream.cursor() as cur:
            cur.execute("set workload = olap")
        reader = stream.cursor()
        reader.execute("stream * from customer_events")
        received: list[int] = []
        for batch in range(3):  # the first plans each shape (the normal path); then the fast path
            first = _fresh_id()
            ids = list(range(first, first + 20))
            assert len({shard_of(i) for i in ids}) == 2
            before_insert = fast_path_statements(metrics)
            values = ", ".join(f"({i}, 1, '{{\"n\": {i}}}')" for i in ids)
            assert query_count(producer, f"insert into customer_events(id, tenant_id, message) values {values}") == 20
            inserted = fast_path_statements(metrics) - before_insert
            got = sorted(reader.fetchone()[0] for _ in ids)
            assert got == ids
            received += got
            before = _in_flight(producer)
            ack = (f"UPDATE customer_events SET time_acked = {time.time_ns()}, time_next = NULL"
                   f" WHERE id IN ({', '.join(map(str, ids))}) AND time_acked IS NULL")
            before_ack = fast_path_statements(metrics)
            assert query_count(producer, ack) == 20
            acked = fast_path_statements(metrics) - before_ack
            after = _in_flight(producer)
            for shard in after:
                on_shard = sum(1 for i in ids if shard_of(i) == shard)
                assert after[shard][0] == before[shard][0] - on_shard
                assert after[shard][1] == before[shard][1] + on_shard
            if batch > 0:
                assert (inserted, acked) == (2, 2)  # each reached both shards on the fast path
        # Never sent again: the next message is the next one the stream reads.
        last = _fresh_id()
        query(producer, f"insert into customer_events(id, tenant_id, message) values ({last}, 1, '{{}}')")
        assert reader.fetchone()[0] == last
        assert len(set(received)) == len(received) == 60
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


def _ack_statements(a: int, b: int, c: int) -> list[str]:
    """Acks of messages a, c (one shard) and b (the other), one of them failing on b's shard."""
    now = time.time_ns()
    ack = f"UPDATE customer_events SET time_acked = {now}, time_next = NULL"
    return [
        f"insert into customer_events(id, tenant_id, message) values ({a}, 1, '{{}}'), ({b}, 1, '{{}}'), ({c}, 1, '{{}}')",
        # 1264 on b's shard only: a's and c's shard acks its rows all the same.
        f"{ack}, priority = if(id = {b}, 1000, priority) WHERE id IN ({a}, {b}, {c}) AND time_acked IS NULL",
        f"select id, time_acked is not null from customer_events where id in ({a}, {b}, {c}) order by id",
        f"{ack} WHERE id IN ({a}, {b}, {c}) AND time_acked IS NULL",  # b only: 1 row
        f"{ack} WHERE id IN ({a}, {b}, {c}) AND time_acked IS NULL",  # none left
        f"{ack} WHERE id IN ({a}, {b}, {c})",  # all three again (acks are idempotent)
        f"select id, time_acked is not null from customer_events where id in ({a}, {b}, {c}) order by id",
    ]


def test_an_ack_on_two_shards_is_one_autocommit_update_per_shard_as_on_the_normal_path(
    message_table, local_cluster, shard_of, tmp_path_factory
) -> None:
    """As Vitess's MessageAck: per shard, not atomic across shards. A shard refusing its part
    answers its error; the other shard's acks stand (before: both rolled back). The fast path
    and the normal path answer byte for byte alike."""
    proxies = {
        "fast": start_proxy(local_cluster.config.path, local_cluster.endpoints,
                            tmp_path_factory.mktemp("ack-fast") / "proxy.log"),
        "normal": start_proxy(local_cluster.config.path, local_cluster.endpoints,
                              tmp_path_factory.mktemp("ack-normal") / "proxy.log",
                              extra_env={"SHARDGATE_FAST_PATH": "0"}),
    }
    answers: dict[str, str] = {}
    try:
        for name, p in proxies.items():
            conn = p.connect("commerce", autocommit=True)
            try:
                pymysql_answers(conn, _ack_statements(*_ids(shard_of)))  # plans every shape
                a, b, c = _ids(shard_of)
                answers[name] = _named(pymysql_answers(conn, _ack_statements(a, b, c)), a, b, c)
            finally:
                conn.close()
    finally:
        for p in proxies.values():
            stop_proxy(p)
    assert answers["fast"] == answers["normal"]
    assert "'error', (1264" in answers["fast"]
    # After the failed ack: a and c (their shard's UPDATE committed alone) acked, b not.
    assert "((<a>, 1), (<b>, 0), (<c>, 1))" in answers["fast"]
    assert "((<a>, 1), (<b>, 1), (<c>, 1))" in answers["fast"]
