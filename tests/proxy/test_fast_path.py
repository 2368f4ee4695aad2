"""The fast path (proxy.fast_path) answers point selects and single-row INSERTs exactly as
the normal path does, hands everything else to it, and keeps KILL QUERY, the process
list and large results working."""

from __future__ import annotations

import asyncio
import datetime
import re
import time
import uuid
from typing import Any

import mysql.connector
import pymysql
import pytest
import sqlalchemy as sa

from proxy.cluster_state import ClusterState
from proxy.fast_path.routing import fast_route
from proxy.fast_path.shard_link import LinkError, ShardErr, ShardLink
from proxy.planning import plan_statement
from proxy.pools import ShardAddress, ShardPool
from proxy.session import ProxySession
from tests.proxy.sessions_support import (
    commerce_endpoints,
    fast_answer,
    fast_path_statements,
    query,
    run_in_thread,
    shard_connection,
    shard_threads_running,
    wait_for,
)
from tests.proxy_process import ProxyProcess


def _fresh_id() -> int:
    return 300_000_000 + uuid.uuid4().int % 100_000_000


def _answer(conn: pymysql.connections.Connection, sql: str) -> dict[str, Any]:
    """Everything a client sees of a statement's answer."""
    try:
        with conn.cursor() as c:
            c.execute(sql)
            return {
                "description": c.description, "rows": c.fetchall(), "rowcount": c.rowcount,
                "lastrowid": c.lastrowid, "warnings": conn._result.warning_count, "status": conn.server_status,
                "info": conn._result.message,
            }
    except pymysql.err.MySQLError as e:
        return {"error": e.args}


def _session_statements(customer_id: int) -> list[str]:
    """Each runs three times: a plan-cache miss (normal path) first, then hits."""
    return [
        f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'fast@example.com', 7)",
        f"select customer_id, email, tenant_id, created_at from customer where customer_id = {customer_id}",
        f"select * from customer where customer_id = {customer_id + 1}",  # no such row
        f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'again', 7)",  # 1062
        f"select customer_id, no_such_column from customer where customer_id = {customer_id}",  # 1054 from the shard
        f"insert into customer(customer_id, email, tenant_id) values ({customer_id + 2}, repeat('x', 300), 7)",  # 1406
        f"select count(*), sum(tenant_id) from customer where customer_id = {customer_id}",
    ]


def _answers(conn: pymysql.connections.Connection, customer_id: int) -> list[dict[str, Any]]:
    out = []
    for i, sql in enumerate(_session_statements(customer_id)):
        for attempt in range(3):
            answer = _answer(conn, sql.replace(f"{customer_id}, 'fast", f"{customer_id + 10 * attempt}, 'fast"))
            out.append(answer)
            if i == 0 and attempt:
                assert answer.get("rowcount") == 1, answer
    return out


def _without_ids(answers: list[dict[str, Any]], customer_id: int) -> str:
    """The answers with the ids and the shard they picked left out."""
    text = re.sub(r"target: commerce\.[-0-9a-f]+\.primary", "target: commerce.<shard>.primary", repr(answers))
    return re.sub(rf"\b{customer_id}\d*|\b{customer_id // 10}\d\d?\b", "<id>", text)


def test_point_selects_and_inserts_answer_as_on_the_normal_path(proxy, normal_proxy) -> None:
    fast_id, normal_id = _fresh_id(), _fresh_id()
    fast, normal = proxy.connect("commerce", autocommit=True), normal_proxy.connect("commerce", autocommit=True)
    try:
        fast_answers = _answers(fast, fast_id)
        normal_answers = _answers(normal, normal_id)
    finally:
        fast.close()
        normal.close()
    assert fast_answers[3]["rows"] == ((fast_id, b"fast@example.com", 7, None),)
    assert fast_answers[9]["error"][0] == 1062
    assert fast_answers[13]["error"][0] == 1054
    assert fast_answers[13]["error"][1].startswith("target: commerce.")
    assert _without_ids(fast_answers, fast_id) == _without_ids(normal_answers, normal_id)


def test_a_large_one_shard_result_is_relayed_whole(proxy, normal_proxy) -> None:
    customer_id = _fresh_id()
    first_order = _fresh_id() * 10_000
    conn = proxy.connect("commerce", autocommit=True)
    normal = normal_proxy.connect("commerce", autocommit=True)
    try:
        for start in range(0, 4000, 500):
            values = ", ".join(
                f"({first_order + i}, {customer_id}, '{'s' * 100}{i:08d}', {i})" for i in range(start, start + 500)
            )
            query(conn, f"insert into corder(order_id, customer_id, sku, price) values {values}")
        sql = f"select order_id, customer_id, sku, price from corder where customer_id = {customer_id} order by order_id"
        answers = [_answer(conn, sql) for _ in range(3)]  # ~450 KB: relayed in pieces
        reference = _answer(normal, sql)
    finally:
        conn.close()
        normal.close()
    assert len(reference["rows"]) == 4000
    for answer in answers:
        assert answer == reference


def test_other_statements_on_the_same_connection_keep_their_order(proxy) -> None:
    customer_id = _fresh_id()
    conn = proxy.connect("commerce", autocommit=True)
    try:
        point = f"select customer_id, tenant_id from customer where customer_id = {customer_id}"
        query(conn, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'order', 1)")
        assert query(conn, point) == ((customer_id, 1),)
        assert query(conn, "set @marker = 42") == ()
        assert query(conn, point) == ((customer_id, 1),)
        query(conn, "begin")  # in a transaction: the normal path, on the transaction's connection
        query(conn, f"update customer set tenant_id = 2 where customer_id = {customer_id}")
        assert query(conn, point) == ((customer_id, 2),)
        query(conn, "rollback")
        assert query(conn, point) == ((customer_id, 1),)
        assert query(conn, "select database()") == (("commerce",),)
        (version,), = query(conn, "select version()")
        assert query(conn, "select version(), 'v from x'") == ((version, "v from x"),)  # the proxy's, too
        conn.ping()
        assert query(conn, point) == ((customer_id, 1),)
        query(conn, "set max_execution_time = 5000")  # a timed statement: the normal path
        assert query(conn, point) == ((customer_id, 1),)
    finally:
        conn.close()


def test_the_statement_after_a_normal_path_one_takes_the_fast_path(metered_proxy) -> None:
    """The command loop answers a two-shard SELECT; the client's next command, often arriving
    before that loop has finished unwinding, is still the fast path's (on uvloop, 15-17 of these
    100 took the normal path while the loop kept the commands it had buffered)."""
    proxy, metrics = metered_proxy
    conn = proxy.connect("commerce", autocommit=True)
    try:
        point = "select customer_id from customer where customer_id = %s"
        with conn.cursor() as cur:

            def point_selects() -> list[Any]:  # ids on both shards: the links to each open first
                return [(cur.execute(point, (n,)), cur.fetchall()) for n in range(10)]

            fast_answer(metrics, point_selects, statements=10)
            before = fast_path_statements(metrics)
            for n in range(100):
                cur.execute("select customer_id from customer where customer_id in (1, 2, 3, 4) order by customer_id")
                cur.fetchall()
                cur.execute(point, (n,))
                cur.fetchall()
        assert fast_path_statements(metrics) - before == 100
    finally:
        conn.close()


def test_kill_query_stops_a_fast_path_select_at_its_shard(proxy, local_cluster) -> None:
    customer_id = _fresh_id()
    tag = f"fast_{uuid.uuid4().hex[:10]}"
    victim, killer = proxy.connect("commerce", autocommit=True), proxy.connect("commerce", autocommit=True)
    try:
        query(victim, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'kill', 1)")
        sleeper = f"select customer_id, sleep({{}}) as `{tag}` from customer where customer_id = {customer_id}"
        for _ in range(3):  # the shape is cached (then the fast path answers it)
            assert query(victim, sleeper.format(0)) == ((customer_id, 0),)
        outcome = run_in_thread(victim, sleeper.format(30))
        assert wait_for(lambda: any(shard_threads_running(local_cluster, tag).values())), "the select never started"
        listed = [r for r in query(killer, "show full processlist") if r[0] == victim.thread_id()]
        assert listed and listed[0][4] == "Query" and tag in listed[0][7], listed
        killed_at = time.monotonic()
        assert query(killer, f"kill query {victim.thread_id()}") == ()
        assert outcome.done.wait(10)
        assert time.monotonic() - killed_at < 5  # it sleeps 30 s (the bound was 1 s)
        assert isinstance(outcome.error, pymysql.err.OperationalError)
        assert outcome.error.args == (1317, "Query execution was interrupted")
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()))
        assert query(victim, sleeper.format(0)) == ((customer_id, 0),)  # the session goes on
        listed = [r for r in query(killer, "show processlist") if r[0] == victim.thread_id()]
        assert listed[0][4] == "Sleep", listed
    finally:
        victim.close()
        killer.close()


def test_a_shard_connection_killed_under_a_fast_path_select_fails_that_statement_only(proxy, local_cluster) -> None:
    customer_id = _fresh_id()
    tag = f"lost_{uuid.uuid4().hex[:10]}"
    conn = proxy.connect("commerce", autocommit=True)
    try:
        query(conn, f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'lost', 1)")
        sleeper = f"select customer_id, sleep({{}}) as `{tag}` from customer where customer_id = {customer_id}"
        for _ in range(3):
            query(conn, sleeper.format(0))
        outcome = run_in_thread(conn, sleeper.format(30))
        assert wait_for(lambda: any(shard_threads_running(local_cluster, tag).values()))
        running = shard_threads_running(local_cluster, tag)
        endpoint = next(e for e in commerce_endpoints(local_cluster) if running[f"{e.host}:{e.port}"])
        side = shard_connection(endpoint)
        try:
            query(side, f"kill connection {running[f'{endpoint.host}:{endpoint.port}'][0]}")
        finally:
            side.close()
        assert outcome.done.wait(10)
        assert isinstance(outcome.error, pymysql.err.OperationalError), outcome.error
        code, message = outcome.error.args
        assert message.startswith("target: commerce."), message
        assert code in (1927, 1105), outcome.error.args  # killed (the shard said so), or unavailable
        for _ in range(5):  # the session goes on, on another shard connection
            assert query(conn, sleeper.format(0)) == ((customer_id, 0),)
    finally:
        conn.close()


class _Collected:
    """A ShardLink's relay that keeps the response."""

    def __init__(self) -> None:
        self.done: asyncio.Future[tuple[bytes, int, ShardErr | None]] = asyncio.get_running_loop().create_future()

    def response_part(self, link: ShardLink, data: bytes) -> None:
        raise AssertionError("a one-row answer comes whole")

    def response_done(self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None) -> None:
        self.done.set_result((data, rows, error))

    def link_lost(self, link: ShardLink, cause: str) -> None:
        self.done.set_exception(ConnectionError(cause))


def test_a_shard_link_logs_in_with_a_password_and_speaks_utf8mb4(local_cluster) -> None:
    endpoint = commerce_endpoints(local_cluster)[0]
    user = f"fp_{uuid.uuid4().hex[:8]}"
    admin = shard_connection(endpoint)
    try:
        query(admin, f"create user '{user}'@'%' identified by 's3cret!'")
        query(admin, f"grant select on *.* to '{user}'@'%'")
    finally:
        admin.close()

    def pool(password: str) -> ShardPool:
        return ShardPool(ShardAddress("commerce", "x", endpoint.host, endpoint.port, user, password, endpoint.database))

    async def run() -> tuple[bytes, int, ShardErr | None]:
        with pytest.raises(LinkError, match=r"\(1045\) Access denied"):
            await ShardLink.open(pool("wrong"))
        link = await ShardLink.open(pool("s3cret!"))
        try:
            relay = _Collected()
            link.query(b"select current_user(), database(), @@collation_connection, @@autocommit", relay)
            return await relay.done
        finally:
            link.close()

    data, rows, error = asyncio.run(run())
    assert error is None and rows == 1
    assert f"{user}@%".encode() in data and endpoint.database.encode() in data
    assert b"utf8mb4_general_ci" in data


def test_a_shard_link_carries_the_settings_it_was_opened_with(local_cluster) -> None:
    e = commerce_endpoints(local_cluster)[0]
    pool = ShardPool(ShardAddress.of("commerce", "x", e))

    async def run() -> bytes:
        link = await ShardLink.open(pool, (("sql_mode", "'ANSI_QUOTES'"), ("time_zone", "'+05:00'")))
        try:
            relay = _Collected()
            link.query(b"select @@session.time_zone, @@session.sql_mode", relay)
            data, _, error = await relay.done
            assert error is None
        finally:
            link.close()
        with pytest.raises(LinkError, match=r"\(1193\) Unknown system variable"):  # never used, then
            await ShardLink.open(pool, (("no_such_variable", "1"),))
        return data

    data = asyncio.run(run())
    assert b"+05:00" in data and b"ANSI_QUOTES" in data


@pytest.fixture
def session(local_cluster) -> ProxySession:
    """A session of an in-process ClusterState (nothing started: routing needs no I/O)."""
    s = ProxySession(ClusterState(local_cluster.config, local_cluster.endpoints))
    s.use_target("commerce")
    return s


def _planned(session: ProxySession, sql: str) -> str:
    plan_statement(session.state, session.database, sql)  # into the plan cache
    return sql


def test_only_cached_one_shard_statements_of_a_plain_session_qualify(session: ProxySession) -> None:
    point = "select customer_id, email from customer where customer_id = 5"
    assert fast_route(session, point) is None  # not planned yet
    _planned(session, point)
    route = fast_route(session, point)
    assert route is not None and route.keyspace == "commerce" and route.plan == "Route/EqualUnique"
    assert route.query.decode().endswith("where customer_id = 5")
    other_value = fast_route(session, point.replace("= 5", "= 6"))  # same shape, its own shard query
    assert other_value is not None and other_value.query.decode().endswith("= 6")

    insert = _planned(session, "insert into customer(customer_id, email, tenant_id) values (5, 'a', 1)")
    route = fast_route(session, insert)
    assert route is not None and route.inserted_table == "customer" and route.shard == fast_route(session, point).shard  # type: ignore[union-attr]
    # Not one shard, lookup rows to write, or a sequence to call: the normal path.
    assert fast_route(session, _planned(session, "select customer_id from customer where tenant_id = 3")) is None
    assert fast_route(session, _planned(session, "insert into corder(order_id, customer_id) values (1, 5)")) is None
    assert fast_route(session, _planned(session, "insert into customer(email) values ('no id')")) is None
    assert fast_route(session, _planned(session, "select @@version, customer_id from customer where customer_id = 5")) is None
    assert fast_route(session, point + "; " + point) is None


@pytest.mark.parametrize("state", ["transaction", "autocommit off", "timeout", "olap", "twopc insert"])
def test_a_session_with_state_takes_the_normal_path(session: ProxySession, state: str) -> None:
    point = _planned(session, "select customer_id from customer where customer_id = 5")
    insert = _planned(session, "insert into customer(customer_id, email, tenant_id) values (5, 'a', 1)")
    assert fast_route(session, point) is not None
    if state == "transaction":
        session.begin_transaction()
    elif state == "autocommit off":
        session.autocommit = False
    elif state == "timeout":
        session.max_execution_time = 100
    elif state == "olap":
        session.workload = "olap"
    else:
        session.transaction_mode = "twopc"
        assert fast_route(session, point) is not None  # reads are not made atomic
        point = insert
    assert fast_route(session, point) is None


def test_a_session_with_set_variables_is_routed_with_them(session: ProxySession) -> None:
    point = _planned(session, "select customer_id from customer where customer_id = 5")
    assert fast_route(session, point).settings == ()  # type: ignore[union-attr]
    session.settings = {"time_zone": "'+05:00'", "sql_mode": "'TRADITIONAL'"}
    route = fast_route(session, point)
    assert route is not None and route.settings == (("sql_mode", "'TRADITIONAL'"), ("time_zone", "'+05:00'"))
    # Literals the planner reads by the default sql_mode, which this session may not have.
    quoted = _planned(session, "select customer_id from customer where customer_id = 5 and email = 'it''s'")
    assert fast_route(session, quoted) is None


def test_targeted_and_unsharded_sessions_send_the_statement_as_written(session: ProxySession) -> None:
    session.use_target("commerce:80-")
    sql = "select customer_id from customer where tenant_id = 3"  # a scatter, were it planned
    route = fast_route(session, sql)
    assert route is not None and (route.keyspace, route.shard, route.plan) == ("commerce", "80-", "Targeted")
    assert route.query == sql.encode()
    insert = "insert into customer_events(id, tenant_id, message) values (1, 2, 'm')"
    assert fast_route(session, insert).inserted_table == "customer_events"  # type: ignore[union-attr]
    assert fast_route(session, "insert into lookup.product(sku) values ('x')") is None  # another keyspace's table
    session.use_target("lookup")
    route = fast_route(session, "select sku from product where price > 10")
    assert route is not None and (route.keyspace, route.shard, route.plan) == ("lookup", "0", "Unsharded")
    assert fast_route(session, "select database()") is None  # the proxy answers it
    assert fast_route(session, "select database(), 'rows from the past'") is None  # no FROM: the text's is a string


# 2020-01-01 00:00:00 read in time zone +05:00.
_EPOCH_AT_PLUS_5 = 1577836800 - 5 * 3600


def test_client_libraries_with_session_variables_take_the_fast_path(metered_proxy, normal_proxy) -> None:
    proxy, metrics = metered_proxy
    customer_id = _fresh_id()
    setup = proxy.connect("commerce", autocommit=True)
    try:
        query(setup, f"insert into customer(customer_id, email, tenant_id, created_at) "
                     f"values ({customer_id}, 'tz', 1, '2020-01-01 00:00:00')")
    finally:
        setup.close()
    point = f"select customer_id, unix_timestamp(created_at) from customer where customer_id = {customer_id}"
    long_email = "insert into customer(customer_id, email, tenant_id) values ({}, repeat('x', 300), 1)"

    # PyMySQL as the JDBC driver's sessions look: sql_mode and time zone SET at connect.
    def pymysql_session(p: ProxyProcess) -> pymysql.connections.Connection:
        return p.connect("commerce", autocommit=True, sql_mode="NO_ENGINE_SUBSTITUTION",
                         init_command="SET time_zone = '+05:00'")

    fast, normal = pymysql_session(proxy), pymysql_session(normal_proxy)
    try:
        assert fast_answer(metrics, lambda: query(fast, point)) == ((customer_id, _EPOCH_AT_PLUS_5),)
        assert query(normal, point) == ((customer_id, _EPOCH_AT_PLUS_5),)
        ids = iter(range(customer_id + 1, customer_id + 100))

        def insert_long() -> tuple[int, int]:
            with fast.cursor() as c:
                return c.execute(long_email.format(next(ids))), fast._result.warning_count

        # Not strict: the long value is cut to 128 bytes with a warning, not refused (1406).
        assert fast_answer(metrics, insert_long) == (1, 1)
        assert query(fast, f"select length(email) from customer where customer_id = {customer_id + 1}") == ((128,),)
    finally:
        fast.close()
        normal.close()

    # SQLAlchemy (PyMySQL underneath) in autocommit, its own SETs at connect.
    engine = sa.create_engine(
        f"mysql+pymysql://root:@{proxy.host}:{proxy.port}/commerce", isolation_level="AUTOCOMMIT",
        connect_args={"init_command": "SET time_zone = '+05:00', sql_mode = 'TRADITIONAL'"},
    )
    try:
        with engine.connect() as c:
            rows = fast_answer(metrics, lambda: [tuple(r) for r in c.execute(sa.text(point))])
            assert rows == [(customer_id, _EPOCH_AT_PLUS_5)]

            def insert_long_refused() -> str:
                with pytest.raises(sa.exc.DataError) as refused:  # strict: refused as MariaDB refuses it
                    c.execute(sa.text(long_email.format(customer_id + 200)))
                return str(refused.value.orig.args)

            assert "1406" in fast_answer(metrics, insert_long_refused)
    finally:
        engine.dispose()

    # mysql-connector, which SETs time_zone and sql_mode itself.
    conn = mysql.connector.connect(
        host=proxy.host, port=proxy.port, user="root", password="", database="commerce", autocommit=True,
        time_zone="+05:00", sql_mode="ANSI_QUOTES", use_pure=True,
    )
    try:
        def connector_point() -> list[Any]:
            cur = conn.cursor()
            cur.execute(point)
            rows = cur.fetchall()
            cur.close()
            return rows

        assert fast_answer(metrics, connector_point) == [(customer_id, _EPOCH_AT_PLUS_5)]
    finally:
        conn.close()


def test_unsharded_and_targeted_sessions_answer_on_the_fast_path_as_on_the_normal_path(
    metered_proxy, normal_proxy
) -> None:
    proxy, metrics = metered_proxy
    sku = f"FP-{uuid.uuid4().hex[:12]}"
    customer_id = _fresh_id()
    statements = {
        "lookup": [
            f"insert into product(sku, description, price) values ('{sku}', 'fast', 7)",
            f"select sku, description, price from product where sku = '{sku}'",
            "select sku, price from product where price between 10 and 30 order by sku",
            "select no_such_column from product",
            f"insert into product(sku, description, price) values ('{sku}', 'again', 7)",  # 1062
        ],
        "commerce:-80": [
            f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'targeted', 1)",
            f"select customer_id, email from customer where customer_id = {customer_id}",
            f"select count(*) from customer where customer_id in ({customer_id}, {customer_id + 1})",
        ],
    }

    def masked(answer: dict[str, Any], own_sku: str, own_id: int) -> str:
        return repr(answer).replace(own_sku, "<sku>").replace(str(own_id), "<id>")

    for target, sqls in statements.items():
        fast, normal = proxy.connect(target, autocommit=True), normal_proxy.connect(target, autocommit=True)
        try:
            for sql in sqls:
                normal_sql = sql.replace(sku, sku + "n").replace(str(customer_id), str(customer_id + 7))
                if sql.startswith("insert"):  # the first writes, the next ones are duplicates (1062)
                    assert masked(_answer(fast, sql), sku, customer_id) == masked(
                        _answer(normal, normal_sql), sku + "n", customer_id + 7), sql
                reference = masked(_answer(normal, normal_sql), sku + "n", customer_id + 7)
                got = fast_answer(metrics, lambda sql=sql, conn=fast: masked(_answer(conn, sql), sku, customer_id))
                assert got == reference, (sql, got, reference)
        finally:
            fast.close()
            normal.close()


def _prepared_answers(conn: Any, statements: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """mysql-connector's server-side prepared statements (COM_STMT_PREPARE/EXECUTE, binary rows)."""
    out: list[Any] = []
    for sql, params in statements:
        cur = conn.cursor(prepared=True)
        try:
            cur.execute(sql, params)
            out.append((cur.description, cur.fetchall() if cur.with_rows else cur.rowcount))
        except mysql.connector.Error as e:
            out.append(("error", e.errno, e.msg))
        finally:
            cur.close()
    return out


def test_prepared_statements_answer_in_the_binary_protocol_as_on_the_normal_path(metered_proxy, normal_proxy) -> None:
    proxy, metrics = metered_proxy
    customer_id = _fresh_id()
    first_order = _fresh_id() * 10_000
    setup = proxy.connect("commerce", autocommit=True)
    try:
        query(setup, f"insert into customer(customer_id, email, tenant_id, created_at) "
                     f"values ({customer_id}, NULL, 7, '2021-03-04 05:06:07.089')")
        for start in range(0, 3000, 500):
            values = ", ".join(f"({first_order + i}, {customer_id}, '{'s' * 100}{i:08d}', {i})"
                               for i in range(start, start + 500))
            query(setup, f"insert into corder(order_id, customer_id, sku, price) values {values}")
    finally:
        setup.close()
    typed = ("select customer_id, email, tenant_id, created_at, cast(tenant_id as unsigned) as u, tenant_id * 1.5 as d, "
             "cast(tenant_id as double) as f, cast(created_at as time) as t, cast(created_at as date) as dt, "
             "-tenant_id as neg, null as n from customer where customer_id = ?")
    statements = [
        (typed, (customer_id,)),
        (typed, (customer_id + 1,)),  # no row
        ("select customer_id, no_such_column from customer where customer_id = ?", (customer_id,)),  # 1054
        ("select order_id, sku, price from corder where customer_id = ? order by order_id", (customer_id,)),  # ~350 KB
        ("insert into customer(customer_id, email, tenant_id) values (?, ?, ?)", (customer_id, "dup", 1)),  # 1062
    ]

    def connect(p: ProxyProcess) -> Any:
        return mysql.connector.connect(host=p.host, port=p.port, user="root", password="", database="commerce",
                                       autocommit=True, use_pure=True)

    fast, normal = connect(proxy), connect(normal_proxy)
    try:
        reference = _prepared_answers(normal, statements)
        answer = fast_answer(metrics, lambda: _prepared_answers(fast, statements), times=2, statements=len(statements))
    finally:
        fast.close()
        normal.close()
    assert answer == reference
    row = reference[0][1][0]
    assert row[0] == customer_id and row[1] is None and row[3] == datetime.datetime(2021, 3, 4, 5, 6, 7, 89000), row
    assert reference[1][1] == [] and reference[2][:2] == ("error", 1054) and reference[4][:2] == ("error", 1062)
    assert len(reference[3][1]) == 3000


def _ids_by_shard(session: ProxySession, count: int) -> dict[str, list[int]]:
    """Fresh customer ids, ``count`` for each commerce shard (as the proxy routes them)."""
    # (An id other than the tenant's: equal literals share one bind variable, another shape.)
    shape = _planned(session, "insert into customer(customer_id, email, tenant_id) values (2, 'a', 1)")
    by_shard: dict[str, list[int]] = {}
    while len(by_shard) < 2 or any(len(ids) < count for ids in by_shard.values()):
        i = _fresh_id()
        route = fast_route(session, shape.replace("(2,", f"({i},"))
        assert route is not None
        ids = by_shard.setdefault(route.shard, [])
        if len(ids) < count:
            ids.append(i)
    return by_shard


def test_a_multi_row_insert_to_one_shard_answers_as_on_the_normal_path(session, metered_proxy, normal_proxy) -> None:
    proxy, metrics = metered_proxy
    ids, others = _ids_by_shard(session, 12).values()

    def statements(first: list[int]) -> list[str]:
        rows = ", ".join(f"({i}, 'multi', {n})" for n, i in enumerate(first[:3]))
        return [
            f"insert into customer(customer_id, email, tenant_id) values {rows}",
            f"insert into customer(customer_id, email, tenant_id) values {rows}",  # 1062
            f"insert ignore into customer(customer_id, email, tenant_id) values {rows}, ({first[3]}, 'new', 9)",
            f"insert into customer(customer_id, email, tenant_id) values {rows} on duplicate key update tenant_id = 5",
        ]

    two_shards = _planned(session, statements([ids[0], others[0], ids[1], ids[2]])[0])
    split = fast_route(session, two_shards)  # split per shard, run as the normal path runs it
    assert split is not None and split.several is not None and len(split.several) == 2
    assert fast_route(session, _planned(session, statements(ids)[0])) is not None

    fast, normal = proxy.connect("commerce", autocommit=True), normal_proxy.connect("commerce", autocommit=True)
    try:
        for sql in statements(ids[8:]):  # planned, links open
            _answer(fast, sql)
        before = fast_path_statements(metrics)
        fast_answers = [_answer(fast, sql) for sql in statements(ids)]
        counted = fast_path_statements(metrics) - before
        normal_answers = [_answer(normal, sql) for sql in statements(ids[4:])]
    finally:
        fast.close()
        normal.close()
    assert fast_answers[0]["rowcount"] == 3 and fast_answers[1]["error"][0] == 1062, fast_answers
    assert fast_answers[2]["rowcount"] == 1 and fast_answers[2]["warnings"] == 3, fast_answers
    assert fast_answers[3]["rowcount"] == 6, fast_answers  # three rows updated: 2 each
    text = repr(fast_answers)
    for a, b in zip(ids[:4], ids[4:8], strict=True):
        text = text.replace(str(a), str(b))
    assert text == repr(normal_answers)
    assert counted == 4, counted


def test_a_prepared_select_item_holding_a_parameter_is_named_by_the_prepared_text_on_either_path(
    metered_proxy, normal_proxy
) -> None:
    # MySQL names an unaliased `? + tenant_id` by the prepared text; the fast path relays the
    # shard's column definitions (named by the bound value), so such a statement goes to the loop
    proxy, _ = metered_proxy
    statements = [("select customer_id, ? + tenant_id from customer where customer_id = ?", (1.5, _fresh_id()))]

    def connect(p: ProxyProcess) -> Any:
        return mysql.connector.connect(host=p.host, port=p.port, user="root", password="", database="commerce",
                                       autocommit=True, use_pure=True)

    fast, normal = connect(proxy), connect(normal_proxy)
    try:
        got = [_prepared_answers(fast, statements) for _ in range(3)]  # the plan is cached after the first
        reference = _prepared_answers(normal, statements)
    finally:
        fast.close()
        normal.close()
    assert [d[0] for d in reference[0][0]] == ["customer_id", "? + tenant_id"]
    assert all(g == reference for g in got), (got, reference)


def test_a_statement_reading_a_user_variable_the_session_set_answers_with_its_value(metered_proxy) -> None:
    # the fast path's shard links never hold the session's user variables: once the session set
    # one, a statement naming `@` takes the normal path, which writes the value into it (a sharded
    # session's statement is planned from that text; an unsharded one's would go as written)
    proxy, _ = metered_proxy
    customer_id, sku = _fresh_id(), f"UV-{uuid.uuid4().hex[:12]}"
    cases = [
        ("commerce", f"insert into customer(customer_id, email, tenant_id) values ({customer_id}, 'v@x', 3)",
         f"set @key = {customer_id}", "select customer_id, tenant_id from customer where customer_id = @key",
         ((customer_id, 3),)),
        ("lookup", f"insert into product(sku, description, price) values ('{sku}', 'uv', 3)",
         f"set @key = '{sku}'", "select sku, price from product where sku = @key", ((sku.encode(), 3),)),
    ]
    for target, insert, set_key, sql, row in cases:
        conn = proxy.connect(target, autocommit=True)
        try:
            query(conn, insert)
            assert _answer(conn, sql)["rows"] == ()  # never set: NULL, no row (either path)
            query(conn, set_key)
            for _ in range(3):  # the plan is cached after the first
                assert _answer(conn, sql)["rows"] == row, target
        finally:
            conn.close()
