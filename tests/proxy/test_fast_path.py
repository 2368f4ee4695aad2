"""The fast path (proxy.fast_path) answers point selects and single-row INSERTs exactly as
the normal path does, hands everything else to it, and keeps KILL QUERY, the process
list and large results working."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from proxy.cluster_state import ClusterState
from proxy.fast_path.routing import fast_route
from proxy.fast_path.shard_link import LinkError, ShardErr, ShardLink
from proxy.planning import plan_statement
from proxy.pools import ShardAddress, ShardPool
from proxy.session import ProxySession
from tests.proxy.sessions_support import (
    commerce_endpoints,
    query,
    run_in_thread,
    shard_connection,
    shard_threads_running,
    wait_for,
)
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy


@pytest.fixture(scope="module")
def normal_proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    """A proxy with the fast path turned off: the reference answers."""
    log = tmp_path_factory.mktemp("normal-proxy") / "proxy.log"
    p = start_proxy(local_cluster.config.path, local_cluster.endpoints, log, extra_env={"SHARDGATE_FAST_PATH": "0"})
    try:
        yield p
    finally:
        stop_proxy(p)


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
        conn.ping()
        assert query(conn, point) == ((customer_id, 1),)
        query(conn, "set max_execution_time = 5000")  # a timed statement: the normal path
        assert query(conn, point) == ((customer_id, 1),)
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
        assert time.monotonic() - killed_at < 1.0
        assert isinstance(outcome.error, pymysql.err.OperationalError)
        assert outcome.error.args == (1317, "Query execution was interrupted")
        assert wait_for(lambda: not any(shard_threads_running(local_cluster, tag).values()), timeout=2)
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


@pytest.mark.parametrize(
    "state",
    ["transaction", "autocommit off", "settings", "timeout", "targeted", "olap", "twopc insert"],
)
def test_a_session_with_state_takes_the_normal_path(session: ProxySession, state: str) -> None:
    point = _planned(session, "select customer_id from customer where customer_id = 5")
    insert = _planned(session, "insert into customer(customer_id, email, tenant_id) values (5, 'a', 1)")
    assert fast_route(session, point) is not None
    if state == "transaction":
        session.begin_transaction()
    elif state == "autocommit off":
        session.autocommit = False
    elif state == "settings":
        session.settings = {"sql_mode": "''"}
    elif state == "timeout":
        session.max_execution_time = 100
    elif state == "targeted":
        session.use_target("commerce:-80")
    elif state == "olap":
        session.workload = "olap"
    else:
        session.transaction_mode = "twopc"
        assert fast_route(session, point) is not None  # reads are not made atomic
        point = insert
    assert fast_route(session, point) is None
