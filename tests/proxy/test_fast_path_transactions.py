"""Explicit transactions on the fast path (proxy.fast_path.protocol): BEGIN, COMMIT and
ROLLBACK answered there, the transaction's one-shard statements run on its own shard
connections, and whatever the fast path does not take runs on the normal path in the same
transaction. Checked against real shards with several client libraries, beside a proxy
with the fast path off (the reference answers)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aiomysql
import mysql.connector
import MySQLdb
import pymysql
import pymysql.cursors
import pytest
from pymysql.constants import CLIENT

from tests.proxy.sessions_support import (
    commerce_endpoints,
    dsn_cluster_file,
    fast_path_statements,
    query,
    run_in_thread,
    shard_connection,
    shard_threads_running,
    wait_for,
)
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy


def _fresh_id() -> int:
    return 400_000_000 + uuid.uuid4().int % 100_000_000


def _ids_on_two_shards(shard_of: Callable[[int], str]) -> tuple[int, int]:
    first = _fresh_id()
    other = next(i for i in range(first + 1, first + 1000) if shard_of(i) != shard_of(first))
    return first, other


def _beside(shard_of: Callable[[int], str], customer_id: int) -> int:
    """Another id (beyond those _ids_on_two_shards picks) on the same shard."""
    return next(i for i in range(customer_id + 1000, customer_id + 3000) if shard_of(i) == shard_of(customer_id))


def _insert(customer_id: int, email: str = "tx") -> str:
    return f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, '{email}', 7)"


def _point(customer_id: int) -> str:
    return f"select customer_id, email from customer where customer_id = {customer_id}"


def _committed(local_cluster: Any, customer_ids: list[int]) -> set[int]:
    """The ids among ``customer_ids`` any commerce shard holds, read on the shards themselves."""
    found: set[int] = set()
    ids = ", ".join(str(i) for i in customer_ids)
    for e in commerce_endpoints(local_cluster):
        conn = shard_connection(e)
        try:
            found |= {r[0] for r in query(conn, f"select customer_id from customer where customer_id in ({ids})")}
        finally:
            conn.close()
    return found


def _answer(conn: pymysql.connections.Connection, sql: str) -> dict[str, Any]:
    """Everything a client sees of a statement's answer."""
    try:
        with conn.cursor() as c:
            c.execute(sql)
            return {
                "description": c.description, "rows": c.fetchall(), "rowcount": c.rowcount,
                "warnings": conn._result.warning_count, "status": conn.server_status, "info": conn._result.message,
            }
    except pymysql.err.MySQLError as e:
        return {"error": e.args, "status": conn.server_status}


def _warm(conn: pymysql.connections.Connection, customer_id: int) -> None:
    """Plan the statements' shapes (a plan-cache miss takes the normal path)."""
    query(conn, _point(customer_id))
    query(conn, _delete(customer_id))
    query(conn, _insert(customer_id))
    query(conn, _update(customer_id))
    query(conn, _delete(customer_id))


def _update(customer_id: int) -> str:
    return f"update customer set email = concat(email, '+') where customer_id = {customer_id}"


def _delete(customer_id: int) -> str:
    return f"delete from customer where customer_id = {customer_id}"


def _transaction_answers(conn: pymysql.connections.Connection, a: int, b: int, c: int, d: int) -> list[dict[str, Any]]:
    statements = [
        "begin", _insert(a), _point(a), _insert(a),  # 1062: the transaction goes on
        _insert(b), _point(b), _update(b), _update(d), _point(b), "commit",
        # A SELECT first on its shard: its result set follows the BEGIN's OK, left out.
        "start transaction", _point(b), _insert(c), _point(c), _delete(a), _point(a), "rollback",
        _point(c), _point(a),
        "commit", "rollback",  # nothing open
    ]
    return [_answer(conn, s) for s in statements]


def test_a_transaction_answers_as_on_the_normal_path_and_its_statements_take_the_fast_path(
    metered_proxy, normal_proxy, shard_of, local_cluster
) -> None:
    proxy, metrics = metered_proxy
    fast, normal = proxy.connect("commerce", autocommit=True), normal_proxy.connect("commerce", autocommit=True)
    try:
        ids = {}
        for name, conn in (("fast", fast), ("normal", normal)):
            a, b = _ids_on_two_shards(shard_of)
            c, d = _beside(shard_of, a), _beside(shard_of, b)
            for i in (a, b, c):
                _warm(conn, i)
            ids[name] = (a, b, c, d)
        before = fast_path_statements(metrics)
        fast_answers = _transaction_answers(fast, *ids["fast"])
        sent = fast_path_statements(metrics) - before
        normal_answers = _transaction_answers(normal, *ids["normal"])
    finally:
        fast.close()
        normal.close()

    def without_ids(answers: list[dict[str, Any]], a: int, b: int, c: int, d: int) -> str:
        text = repr(answers)
        for i in (a, b, c, d):
            text = text.replace(str(i), "<id>")
        return text.replace(shard_of(a), "<shard>").replace(shard_of(b), "<shard>")

    assert fast_answers[1]["status"] == 3  # in a transaction, autocommit
    assert fast_answers[3]["error"][0] == 1062
    assert fast_answers[6]["rowcount"] == 1 and fast_answers[7]["rowcount"] == 0  # no such row
    assert fast_answers[8]["rows"] == ((ids["fast"][1], b"tx+"),)
    assert fast_answers[11]["rows"] == ((ids["fast"][1], b"tx+"),) and fast_answers[11]["status"] == 3
    assert fast_answers[14]["rowcount"] == 1 and fast_answers[15]["rows"] == ()  # deleted, in the transaction
    assert fast_answers[17]["rows"] == () and fast_answers[18]["rows"] == ((ids["fast"][0], b"tx"),)  # rolled back
    assert without_ids(fast_answers, *ids["fast"]) == without_ids(normal_answers, *ids["normal"])
    # Every statement went on the fast path (a transaction's first on its second shard too), but
    # the COMMIT and the ROLLBACK of two shards (the normal path's ShardTransaction.commit / rollback,
    # in a task: not counted).
    assert sent == 15
    a, b, c, _ = ids["fast"]
    assert _committed(local_cluster, [a, b, c]) == {a, b}


def test_a_transaction_moving_to_a_second_shard_and_an_unplanned_statement_stays_atomic(
    metered_proxy, shard_of, local_cluster
) -> None:
    proxy, _ = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    try:
        for outcome in ("rollback", "commit"):
            a, b = _ids_on_two_shards(shard_of)
            _warm(conn, a)
            _warm(conn, b)
            query(conn, "begin")
            query(conn, _insert(a))  # the fast path
            query(conn, _insert(b))  # a second shard joins the transaction, on the fast path
            # The normal path, in the same transaction: a scatter UPDATE and a statement it plans.
            query(conn, f"update customer set email = 'updated' where customer_id in ({a}, {b})")
            assert query(conn, _point(a)) == ((a, b"updated"),)  # its own writes, back on the fast path
            assert query(conn, f"select count(*) from customer where customer_id in ({a}, {b})") == ((2,),)
            assert _committed(local_cluster, [a, b]) == set()  # nothing visible outside yet
            query(conn, outcome)
            assert _committed(local_cluster, [a, b]) == ({a, b} if outcome == "commit" else set())
    finally:
        conn.close()


def test_a_shard_joining_with_set_transaction_or_savepoints_joins_as_on_the_normal_path(
    metered_proxy, shard_of, local_cluster
) -> None:
    proxy, metrics = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    try:
        a, b = _ids_on_two_shards(shard_of)
        c = _beside(shard_of, b)
        for i in (a, b, c):
            _warm(conn, i)
        before = fast_path_statements(metrics)
        # SET TRANSACTION goes to the shard before its BEGIN: the connection joins in a task.
        query(conn, "set transaction isolation level serializable")
        query(conn, "begin")
        query(conn, _insert(a))
        shard = shard_connection(local_cluster.endpoints[("commerce", shard_of(a))])
        try:
            levels = query(shard, "select trx_isolation_level from information_schema.innodb_trx"
                                  " where trx_rows_modified = 1")
        finally:
            shard.close()
        assert levels == (("SERIALIZABLE",),)
        # A savepoint (the normal path's), then a second shard, which sets it after its BEGIN.
        query(conn, "savepoint s1")
        query(conn, _insert(b))
        query(conn, _insert(c))
        query(conn, "rollback to savepoint s1")
        assert query(conn, _point(b)) == ()
        query(conn, "commit")  # two shards: ShardTransaction.commit in a task
        # The three INSERTs and the SELECT after the savepoint's rollback went on the fast path.
        assert fast_path_statements(metrics) - before == 4
        assert _committed(local_cluster, [a, b, c]) == {a}
    finally:
        conn.close()


def test_statements_of_an_autocommit_off_session_run_in_its_transaction(metered_proxy, shard_of, local_cluster) -> None:
    proxy, metrics = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    try:
        a, b = _ids_on_two_shards(shard_of)
        c = _beside(shard_of, a)
        for i in (a, b, c):
            _warm(conn, i)
        query(conn, "set autocommit = 0")
        before = fast_path_statements(metrics)
        assert _answer(conn, _insert(a))["status"] == 1  # in a transaction, no autocommit
        assert query(conn, _point(a)) == ((a, b"tx"),)
        query(conn, "commit")
        assert conn.server_status & 1 == 0
        query(conn, _insert(c))
        query(conn, _insert(b))
        query(conn, "rollback")
        # Every statement but the ROLLBACK of two shards (ShardTransaction.rollback in a task) was
        # sent by the fast path.
        assert fast_path_statements(metrics) - before == 5
        assert _committed(local_cluster, [a, c, b]) == {a}
    finally:
        conn.close()


def _insert_directly(local_cluster: Any, shard: str, customer_id: int) -> bool:
    """Insert the customer on its shard, bypassing the proxy; False while a transaction holds
    the row's lock (an insert of it not committed nor rolled back yet)."""
    conn = shard_connection(local_cluster.endpoints[("commerce", shard)])
    try:
        query(conn, "set session innodb_lock_wait_timeout = 1")
        query(conn, _insert(customer_id, "direct"))
        return True
    except pymysql.err.OperationalError as e:
        if e.args[0] != 1205:  # lock wait timeout: the proxy's transaction still holds it
            raise
        return False
    finally:
        conn.close()


def test_a_client_gone_mid_transaction_leaves_nothing_on_the_shard(metered_proxy, shard_of, local_cluster) -> None:
    proxy, _ = metered_proxy
    a, b = _ids_on_two_shards(shard_of)
    conn = proxy.connect("commerce", autocommit=True)
    try:
        _warm(conn, a)
        _warm(conn, b)
        query(conn, "begin")
        query(conn, _insert(a))
        query(conn, _insert(b))
    finally:
        conn._sock.shutdown(socket.SHUT_RDWR)  # no COM_QUIT, no ROLLBACK: the client is just gone
        conn._sock.close()
        conn._sock = None
    # The rows are locked until the transaction ends: inserting them directly waits, and
    # succeeds (no duplicate: nothing was committed) once the proxy rolled it back.
    for customer_id in (a, b):
        shard = shard_of(customer_id)
        assert wait_for(lambda c=customer_id, s=shard: _insert_directly(local_cluster, s, c), timeout=15)


def test_a_client_gone_while_its_statement_runs_rolls_the_transaction_back(metered_proxy, shard_of, local_cluster) -> None:
    proxy, metrics = metered_proxy
    a = _fresh_id()
    conn = proxy.connect("commerce", autocommit=True)
    _warm(conn, a)
    query(conn, "begin")
    query(conn, _insert(a))
    query(conn, _point(a))
    sock = conn._sock
    sql = f"select customer_id, sleep(3) from customer where customer_id = {a}".encode()
    for _ in range(3):
        query(conn, sql.decode().replace("sleep(3)", "sleep(0)"))  # planned: the next one takes the fast path
    before = fast_path_statements(metrics)
    sock.sendall(struct.pack("<I", len(sql) + 1)[:3] + b"\x00\x03" + sql)  # its answer never read
    assert wait_for(lambda: fast_path_statements(metrics) == before + 1)  # on the fast path
    time.sleep(0.2)
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    conn._sock = None
    assert wait_for(lambda: _insert_directly(local_cluster, shard_of(a), a), timeout=15)


def test_kill_query_of_a_statement_in_a_transaction_keeps_the_transaction(metered_proxy, local_cluster) -> None:
    proxy, metrics = metered_proxy
    a = _fresh_id()
    tag = f"txkill_{uuid.uuid4().hex[:10]}"
    victim, killer = proxy.connect("commerce", autocommit=True), proxy.connect("commerce", autocommit=True)
    try:
        _warm(victim, a)
        sleeper = f"select customer_id, sleep({{}}) as `{tag}` from customer where customer_id = {a}"
        for _ in range(3):  # the shape is cached (then the fast path answers it)
            query(victim, sleeper.format(0))
        query(victim, "begin")
        query(victim, _insert(a))
        before = fast_path_statements(metrics)
        outcome = run_in_thread(victim, sleeper.format(30))
        assert wait_for(lambda: any(shard_threads_running(local_cluster, tag).values())), "the select never started"
        assert fast_path_statements(metrics) == before + 1  # on the fast path, in the transaction
        listed = [r for r in query(killer, "show full processlist") if r[0] == victim.thread_id()]
        assert listed and listed[0][4] == "Query" and tag in listed[0][7], listed
        assert query(killer, f"kill query {victim.thread_id()}") == ()
        assert outcome.done.wait(10)
        assert isinstance(outcome.error, pymysql.err.OperationalError)
        assert outcome.error.args == (1317, "Query execution was interrupted")
        assert victim.server_status & 1  # still in the transaction, its write kept
        assert query(victim, _point(a)) == ((a, b"tx"),)
        query(victim, "commit")
        assert _committed(local_cluster, [a]) == {a}
    finally:
        victim.close()
        killer.close()


def test_transactions_of_mysqlclient_and_aiomysql_commit_and_roll_back(metered_proxy, shard_of, local_cluster) -> None:
    proxy, metrics = metered_proxy
    a, b = _ids_on_two_shards(shard_of)
    warm = proxy.connect("commerce", autocommit=True)
    try:
        for i in (a, b, a + 2000, b + 2000):
            _warm(warm, i)
    finally:
        warm.close()
    before = fast_path_statements(metrics)

    # mysqlclient: autocommit off by default, commit() / rollback() send COMMIT / ROLLBACK.
    conn = MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db="commerce")
    try:
        cur = conn.cursor()
        cur.execute(_insert(a))
        cur.execute(_point(a))
        assert cur.fetchall() == ((a, b"tx"),)  # its own write
        conn.commit()
        cur.execute(_insert(a + 2000))
        conn.rollback()
    finally:
        conn.close()

    async def with_aiomysql() -> None:
        c = await aiomysql.connect(host=proxy.host, port=proxy.port, user="root", password="", db="commerce",
                                   autocommit=True)
        try:
            await c.begin()
            async with c.cursor() as cur:
                await cur.execute(_insert(b))
                await cur.execute(_point(b))
                assert await cur.fetchall() == ((b, b"tx"),)
            await c.commit()
            await c.begin()
            async with c.cursor() as cur:
                await cur.execute(_insert(b + 2000))
            await c.rollback()
        finally:
            c.close()

    asyncio.run(with_aiomysql())
    assert fast_path_statements(metrics) - before == 10  # every statement, COMMIT and ROLLBACK
    assert _committed(local_cluster, [a, a + 2000, b, b + 2000]) == {a, b}


def test_a_single_mode_transaction_refuses_a_second_shard_as_on_the_normal_path(
    metered_proxy, normal_proxy, shard_of
) -> None:
    proxy, _ = metered_proxy
    answers = []
    for p in (proxy, normal_proxy):
        conn = p.connect("commerce", autocommit=True)
        try:
            a, b = _ids_on_two_shards(shard_of)
            _warm(conn, a)
            _warm(conn, b)
            query(conn, "set transaction_mode = 'single'")
            out = [_answer(conn, s) for s in ("begin", _insert(a), _insert(b), _point(a), "commit")]
            answers.append(repr(out).replace(str(a), "<a>").replace(str(b), "<b>")
                           .replace(shard_of(a), "<shard>").replace(shard_of(b), "<shard>"))
        finally:
            conn.close()
    assert "multi-db transaction attempted" in answers[0]
    assert answers[0] == answers[1]


def _prepared_in_transaction(conn: Any, statements: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """mysql-connector's server-side prepared statements (binary rows) inside one transaction,
    rolled back at the end."""
    out: list[Any] = []
    conn.start_transaction()
    for sql, params in statements:
        cur = conn.cursor(prepared=True)
        try:
            cur.execute(sql, params)
            out.append((cur.description, cur.fetchall() if cur.with_rows else cur.rowcount))
        except mysql.connector.Error as e:
            out.append(("error", e.errno, e.msg))
        finally:
            cur.close()
    conn.rollback()
    return out


def test_a_large_result_first_on_its_shard_in_a_transaction_answers_as_on_the_normal_path(
    metered_proxy, normal_proxy, local_cluster
) -> None:
    """The first statement of a transaction on a shard goes as ``begin;<statement>``: its result
    (here ~350 KB, relayed in pieces, in the text and the binary protocol) follows the BEGIN's
    OK, which is left out and the packets renumbered."""
    proxy, metrics = metered_proxy
    customer_id = _fresh_id()
    first_order = _fresh_id() * 10_000
    setup = proxy.connect("commerce", autocommit=True)
    try:
        query(setup, _insert(customer_id))
        for start in range(0, 3000, 500):
            values = ", ".join(f"({first_order + i}, {customer_id}, '{'s' * 100}{i:08d}', {i})"
                               for i in range(start, start + 500))
            query(setup, f"insert into corder(order_id, customer_id, sku, price) values {values}")
    finally:
        setup.close()
    orders = f"select order_id, sku, price from corder where customer_id = {customer_id} order by order_id"

    sent: list[float] = []

    def text_answers(p: ProxyProcess) -> list[dict[str, Any]]:
        conn = p.connect("commerce", autocommit=True)
        try:
            for _ in range(2):  # planned
                query(conn, orders)
                query(conn, _point(customer_id))
            before = fast_path_statements(metrics)
            out = [_answer(conn, s) for s in ("begin", orders, _point(customer_id), "rollback")]
            sent.append(fast_path_statements(metrics) - before)
            return out
        finally:
            conn.close()

    def binary_answers(p: ProxyProcess) -> list[Any]:
        conn = mysql.connector.connect(host=p.host, port=p.port, user="root", password="", database="commerce",
                                       autocommit=True, use_pure=True)
        statements = [
            ("select order_id, sku, price from corder where customer_id = ? order by order_id", (customer_id,)),
            ("select customer_id, email from customer where customer_id = ?", (customer_id,)),
            ("insert into customer(customer_id, email, tenant_id) values (?, ?, ?)", (customer_id, "dup", 1)),  # 1062
        ]
        try:
            _prepared_in_transaction(conn, statements)  # planned
            return _prepared_in_transaction(conn, statements)
        finally:
            conn.close()

    reference_text, reference_binary = text_answers(normal_proxy), binary_answers(normal_proxy)
    fast_text = text_answers(proxy)
    assert sent == [0, 3]  # the reference's none; here the two SELECTs and the ROLLBACK
    before = fast_path_statements(metrics)
    fast_binary = binary_answers(proxy)
    assert fast_path_statements(metrics) - before >= 4  # at least the second round's three statements and its ROLLBACK
    assert len(fast_text[1]["rows"]) == 3000 and fast_text[1]["status"] == 3
    assert fast_text == reference_text
    assert len(fast_binary[0][1]) == 3000 and fast_binary[2][:2] == ("error", 1062)
    assert fast_binary == reference_binary


@pytest.mark.parametrize("autocommit", [True, False])
def test_the_first_rows_of_a_slow_result_reach_the_client_before_it_finishes(metered_proxy, autocommit: bool) -> None:
    """A one-shard result smaller than the relay chunk whose rows the shard is slow to produce
    (the fast path's, in or outside a transaction) flows as on the normal path."""
    proxy, metrics = metered_proxy
    conn = proxy.connect("lookup", autocommit=autocommit, cursorclass=pymysql.cursors.SSCursor)
    sql = "select seq, repeat('x', 100), if(seq = 1400, sleep({}), 0) from seq_1_to_1500"
    try:
        with conn.cursor() as c:
            for _ in range(2):  # its shard link opened
                c.execute(sql.format(0))
                c.fetchall()
            before = fast_path_statements(metrics)
            start = time.monotonic()
            c.execute(sql.format(2))
            first = c.fetchone()
            first_at = time.monotonic() - start
            rest = c.fetchall()
            total = time.monotonic() - start
        assert fast_path_statements(metrics) == before + 1
        assert first[0] == 1 and len(rest) == 1499
        assert first_at < 1.0 < total, (first_at, total)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def timeout_proxy(local_cluster, tmp_path_factory) -> Iterator[tuple[ProxyProcess, str]]:
    """A metered_proxy proxy whose cluster file sets ``transaction_timeout: 1`` (second)."""
    work = tmp_path_factory.mktemp("fast-tx-timeout")
    http_port = free_port()
    cfg = dsn_cluster_file(local_cluster, work, transaction_timeout=1, http={"host": "127.0.0.1", "port": http_port})
    p = start_proxy(cfg, local_cluster.endpoints, work / "proxy.log")
    try:
        yield p, f"http://127.0.0.1:{http_port}/metrics"
    finally:
        stop_proxy(p)


def test_an_idle_fast_path_transaction_is_rolled_back_and_a_working_one_spared(
    timeout_proxy, shard_of, local_cluster
) -> None:
    proxy, metrics = timeout_proxy
    a, b = _ids_on_two_shards(shard_of)
    conn = proxy.connect("commerce", autocommit=True)
    try:
        for i in (a, b):
            _warm(conn, i)
        before = fast_path_statements(metrics)
        query(conn, "begin")
        for _ in range(3):  # 1.8 s in the transaction, never 1 s idle: its timer re-armed after each statement
            assert query(conn, _point(a)) == ()
            time.sleep(0.6)
        query(conn, _insert(a))
        query(conn, "commit")
        assert fast_path_statements(metrics) - before == 5
        assert _committed(local_cluster, [a]) == {a}

        query(conn, "begin")
        query(conn, _insert(b))
        time.sleep(2.0)  # idle longer than transaction_timeout: rolled back, its row lock gone
        assert _insert_directly(local_cluster, shard_of(b), b)
        with pytest.raises(pymysql.err.OperationalError) as e:  # the session learns it at its next statement
            query(conn, _point(b))
        assert e.value.args[0] == 1317 and "transaction_timeout" in e.value.args[1]
        assert query(conn, _point(b)) == ((b, b"direct"),)  # then goes on in autocommit
    finally:
        conn.close()


def _edge_statements(a: int, b: int, c: int, d: int) -> list[str]:
    """Transaction statements around the fast path's: implicit commits, options, chains,
    savepoints, shard errors mid-transaction, reads across both paths, and one-shard writes."""
    unknown = f"select customer_id from customer where customer_id = {a} and no_such_column = 1"
    return [
        # SET autocommit=1 commits an open transaction; BEGIN does too; SET autocommit=0 twice does not
        "set autocommit=0", _update(a), _point(a), "set autocommit=1", "rollback", _point(a),
        "set autocommit=0", _update(a), "begin", "rollback", _point(a), "set autocommit=1",
        "set autocommit=0", _update(a), "set autocommit=0", "rollback", _point(a), "set autocommit=1",
        "begin work", _update(a), "commit work", _point(a),
        "start transaction read only", _point(a), _update(a), _insert(c), "commit", _point(a), _point(c),
        "start transaction with consistent snapshot", _update(a), _point(a), "rollback", _point(a),
        "start transaction read write", _update(a), "rollback", _point(a),
        "begin", _update(a), "commit and chain", _update(a), "rollback", _point(a),
        "begin", _update(a), "rollback and chain", _update(a), "commit", _point(a),
        "begin", _update(a), "commit release", _update(a), "rollback", _point(a),
        "begin", f"select customer_id from customer where customer_id = {a} for update", _update(a), "rollback", _point(a),
        "lock tables customer write", _update(a), "unlock tables", _point(a),
        "begin", _update(a), "savepoint s1", _update(a), "rollback to savepoint s1", "commit", _point(a),
        # a shard's error first on its shard (sent after the deferred BEGIN), or later
        "begin", unknown, _update(a), "rollback", _point(a),
        "begin", unknown, _update(a), "commit", _point(a),
        "begin", _update(a), unknown, _update(a), "rollback", _point(a),
        "set autocommit=0", unknown, _update(a), "rollback", _point(a), "set autocommit=1",
        # what the fast path wrote, read by the normal path (several shards) in the transaction
        "begin", _insert(c), f"select count(*) from customer where customer_id in ({a}, {b}, {c})", "rollback", _point(c),
        "begin", _insert(c), f"select customer_id from customer where customer_id in ({a}, {b}, {c}) order by customer_id",
        _insert(d), _point(d), "commit", _point(c), _point(d),
        # one-shard writes: LIMIT, ORDER BY, nothing changed, a primary vindex column
        f"update customer set email = 'tx' where customer_id = {a} limit 1",
        f"update customer set email = 'tx' where customer_id = {a} order by email limit 1",
        f"update customer set email = 'tx' where customer_id = {a}",
        f"delete from customer where customer_id = {a} limit 0",
        f"update customer set customer_id = {b} where customer_id = {a}",
        _point(a), _point(b),
    ]


@pytest.mark.parametrize("found_rows", [False, True])
def test_transaction_control_edges_answer_as_on_the_normal_path(metered_proxy, normal_proxy, shard_of, found_rows) -> None:
    proxy, _ = metered_proxy
    kw: dict[str, Any] = {"autocommit": True}
    if found_rows:
        kw["client_flag"] = CLIENT.FOUND_ROWS
    answers = {}
    for name, p in (("fast", proxy), ("normal", normal_proxy)):
        conn = p.connect("commerce", **kw)
        try:
            a, b = _ids_on_two_shards(shard_of)
            c, d = _beside(shard_of, a), _beside(shard_of, b)
            for i in (a, b, c):
                _warm(conn, i)
            query(conn, _insert(a))
            text = repr([_answer(conn, s) for s in _edge_statements(a, b, c, d)])
        finally:
            conn.close()
        for i, tag in ((a, "<a>"), (b, "<b>"), (c, "<c>"), (d, "<d>")):
            text = text.replace(str(i), tag)
        answers[name] = text.replace(shard_of(a), "<shard>").replace(shard_of(b), "<shard>")
    assert answers["fast"] == answers["normal"]
    # SET autocommit=1 committed the update; the READ ONLY transaction refused its writes
    assert "(<a>, b'tx+')" in answers["fast"] and "1792" in answers["fast"]


def _lock_answers(p: ProxyProcess, shard_of: Callable[[int], str], opened_by: str) -> str:
    """A locking read in a transaction (opened by BEGIN or autocommit=0), and another session's
    write of its row meanwhile and after the COMMIT / ROLLBACK."""
    a, _ = _ids_on_two_shards(shard_of)
    holder, other = p.connect("commerce", autocommit=True), p.connect("commerce", autocommit=True)
    try:
        _warm(holder, a)
        query(holder, _insert(a))
        for lock in ("for update", "lock in share mode"):  # planned: the next ones may take the fast path
            query(holder, f"select customer_id from customer where customer_id = {a} {lock}")
        query(other, "set innodb_lock_wait_timeout = 1")
        query(holder, "set autocommit=0" if opened_by == "autocommit=0" else "begin")
        answers = [
            _answer(holder, f"select customer_id from customer where customer_id = {a} for update"),
            _answer(other, _update(a)),  # waits for the lock: 1205
            _answer(holder, _update(a)), _answer(holder, "commit"),
            _answer(other, _update(a)), _answer(holder, _point(a)),
            _answer(holder, "begin"),
            _answer(holder, f"select customer_id from customer where customer_id = {a} lock in share mode"),
            _answer(other, _update(a)), _answer(holder, "rollback"),
        ]
    finally:
        holder.close()
        other.close()
    return repr(answers).replace(str(a), "<a>").replace(shard_of(a), "<shard>")


@pytest.mark.parametrize("opened_by", ["begin", "autocommit=0"])
def test_a_locking_read_holds_its_lock_until_the_transaction_ends(metered_proxy, normal_proxy, shard_of, opened_by) -> None:
    proxy, metrics = metered_proxy
    before = fast_path_statements(metrics)
    fast = _lock_answers(proxy, shard_of, opened_by)
    assert fast_path_statements(metrics) - before >= 8  # the locking reads and the writes among them
    assert fast.count("1205") == 2 and "b'tx++'" in fast
    assert fast == _lock_answers(normal_proxy, shard_of, opened_by)
