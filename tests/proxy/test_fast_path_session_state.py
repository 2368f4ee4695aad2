"""What a statement leaves in its session for the next one (its warnings and error, ROW_COUNT(),
FOUND_ROWS()) when the fast path answers it and the normal path the next, against the oracle
MariaDB of tests/proxy/test_wire_differential.py through the same client (PyMySQL).

Each sequence runs once on the proxy first: its statements' plans are then cached, and the
second run, the one compared, answers the point selects and one-shard writes on the fast path.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import mysql.connector
import pymysql

from tests.proxy.sessions_support import fast_answer, fast_path_statements
from tests.proxy.test_wire_differential import NOTES_DDL, ORACLE_DB, _direct, wire  # noqa: F401  (the fixture)
from vschema.vindexes.hash import hash_uint64

WARNINGS_AND_ERRORS = [
    "delete from notes where id >= 4000 and id < 4100",
    "set sql_mode = ''",
    "insert into notes (id, owner, n, body) values (4001, 'w', 1, 'this body is far longer than forty characters')",
    "show warnings",
    "show count(*) warnings",
    "select @@warning_count",
    "select row_count()",  # uses no table: the warnings stay
    "show warnings",
    "begin",
    "set @x = 1",
    "use commerce",
    "commit",
    "show count(*) warnings",
    "select id, cast('abc' as signed) from notes where id = 4001",  # its EOF counts the warning
    "show warnings",
    "show warnings limit 0",
    "select id, n from notes where id = 4001",  # uses a table: the warnings go
    "show warnings",
    "select @@warning_count, @@error_count",
    "insert into notes (id, owner, n, body) values (4001, 'w', 2, 'again')",  # 1062
    "show warnings",
    "show errors",
    "show count(*) errors",
    "select @@error_count",
    "update notes set n = n + 1 where id = 4001",
    "show warnings",
    # in a transaction, on both shards: read on the connection of the statement that warned
    "insert into notes (id, owner, n, body) values (4002, 'w', 1, 'b'), (4003, 'w', 1, 'c'), (4004, 'w', 1, 'd')",
    "begin",
    "select id from notes where id = 4002",
    "select id from notes where id = 4003",
    "select id, n + 'x2' from notes where id = 4002",
    "show warnings",
    "select id, n + 'x3' from notes where id = 4003",
    "show warnings",
    "select id, n + 'x4' from notes where id = 4004",
    "show warnings",
    "update notes set owner = 'w2', body = 'this body is far longer than forty characters, too' where id = 4002",
    "show warnings",
    "insert into notes (id, owner, n, body) values (4003, 'w', 1, 'again')",
    "show errors",
    "commit",
    "set sql_mode = DEFAULT",
]

IN_TRANSACTION = [
    "delete from notes where id >= 4300 and id < 4400",
    "insert into notes (id, owner, n, body) values (4301, 't', 1, 'a')",
    "select @@in_transaction",
    "begin",
    "select @@in_transaction",
    "select id from notes where id = 4301",
    "select @@in_transaction, @@autocommit",
    "commit",
    "select @@in_transaction",
    "set autocommit = 0",
    "select @@in_transaction",
    "select id from notes where id = 4301 for update",
    "select @@session.in_transaction",
    "rollback",
    "update notes set n = 2 where id = 4301",
    "select @@in_transaction",
    "commit",
    "set autocommit = 1",
    "start transaction read only",
    "select @@in_transaction",
    "rollback",
    "select @@in_transaction",
    # autocommit=0: only a statement that uses a table opens a transaction
    "set autocommit = 0",
    "select 1",
    "select 'rows from the past'",
    "select @@in_transaction",
    "select id from notes where id = 4301",
    "select @@in_transaction",
    "rollback",
    "set autocommit = 1",
]

# Which statements "use a table" (and so clear the warnings before them) by MariaDB's rule, not by
# the statement's look: a FROM in a string or comment, FROM DUAL, a FROM after a newline or a quote, a
# subquery's.
WARNINGS_AND_TABLE_USE = [
    "delete from notes where id >= 4400 and id < 4500",
    "insert into notes (id, owner, n, body) values (4401, 'u', 1, 'a')",
    "select id, cast('abc' as signed) from notes where id = 4401",
    "select 'rows from the past'",
    "select 1 /* from notes */",
    "select 1 from dual",
    "show count(*) warnings",
    "select id\nfrom notes where id = 4401",
    "show count(*) warnings",
    "select id, cast('abc' as signed) from notes where id = 4401",
    "select (select n from notes where id = 4401) as n",
    "show count(*) warnings",
    "select id, cast('abc' as signed) from notes where id = 4401",
    "select 'a', 'b' from notes where id = 4401",
    "show warnings",
]

ROW_COUNTS = [
    "delete from notes where id >= 4100 and id < 4200",
    "insert into notes (id, owner, n, body) values (4101, 'rc', 1, 'a')",
    "select row_count()",
    "insert into notes (id, owner, n, body) values (4102, 'rc', 2, 'b'), (4103, 'rc', 3, 'c'), "
    "(4104, 'rc', 4, 'd'), (4105, 'rc', 5, 'e')",  # rows on both shards
    "select row_count()",
    "update notes set n = n + 1 where id = 4101",
    "select row_count() as changed",
    "update notes set n = n + 1 where id = 4101 and n < 0",
    "select row_count()",
    "update notes set n = n + 1 where id in (4101, 4102, 4103, 4104, 4105)",
    "select row_count()",
    "delete from notes where id = 4105",
    "select row_count(), row_count() + 1",
    "select id, n from notes where id = 4101",
    "select found_rows(), row_count()",
    "select id, n from notes where id = 4199",
    "select found_rows()",
    "insert into notes (id, owner, n, body) values (4101, 'rc', 1, 'a')",  # 1062
    "select row_count()",
    "begin",
    "update notes set n = 0 where id = 4101",
    "select row_count()",
    "commit",
    "select row_count()",
]

# ROW_COUNT() and FOUND_ROWS() after the normal path's statements and the proxy's own answers (SET,
# @@variables, SHOW), whichever pooled connection the next statement runs on.
COUNTS_ON_EITHER_PATH = [
    "delete from notes where id >= 6030 and id < 6040",
    "insert into notes (id, owner, n, body) values (6031, 'c', 1, 'a'), (6032, 'c', 1, 'b'), (6033, 'c', 1, 'c')",
    "select id from notes where id in (6031, 6032, 6033) order by id",
    "set @x = 1",
    "select row_count(), found_rows()",
    "select id from notes where id = 6031",
    "update notes set n = n + 1 where id = 6031",
    "select row_count(), found_rows()",
    "select id from notes where id in (6031, 6032, 6033) order by id",
    "update notes set n = n + 1 where id in (6031, 6032, 6033)",
    "set sql_mode = DEFAULT",
    "select found_rows(), row_count()",
    "select id from notes where id = 6039",
    "show warnings",
    "select row_count(), found_rows()",
    "select id from notes where id = 6039",
    "show count(*) warnings",  # MariaDB's SELECT @@warning_count: FOUND_ROWS() 1
    "select row_count(), found_rows()",
    "begin",
    "select row_count(), found_rows()",
    "commit",
    "select @@warning_count",
    "select row_count(), found_rows()",
    "insert into notes (id, owner, n, body) values (6031, 'c', 1, 'a')",
    "select row_count(), found_rows()",
    "delete from notes where id in (6032, 6033)",
    "select row_count()",
    "select found_rows()",  # a SELECT of one row: FOUND_ROWS() 1 after it
    "select found_rows()",
    "show warnings",  # the DELETE of both shards left none: none from another statement
    "select @@warning_count, @@error_count",
]


def _step(conn: pymysql.connections.Connection, sql: str) -> tuple[Any, ...]:
    """The rows (or error number) a statement answers, its warning count and status flags
    (in a transaction, autocommit)."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall() if cur.description else None
            return rows, conn._result.warning_count, conn.server_status & 0x03
    except pymysql.err.MySQLError as e:
        return "error", e.args[0], conn.server_status & 0x03


def _oracle_sql(sql: str) -> str:
    return f"use {ORACLE_DB}" if sql == "use commerce" else sql


def _differences(wire, steps: list[str]) -> list[str]:  # noqa: F811
    with wire.proxy.connect("commerce", autocommit=True, charset="utf8mb4") as warm, \
            _direct(wire.lookup_ep, ORACLE_DB) as oc:
        with oc.cursor() as cur:
            cur.execute(NOTES_DDL)
        for sql in steps:  # plans cached, the same rows before on both sides
            _step(warm, sql)
            _step(oc, _oracle_sql(sql))
    with wire.proxy.connect("commerce", autocommit=True, charset="utf8mb4") as pc, \
            _direct(wire.lookup_ep, ORACLE_DB) as oc:
        failures = []
        for sql in steps:
            ours, theirs = _step(pc, sql), _step(oc, _oracle_sql(sql))
            if ours != theirs:
                failures.append(f"{sql}\n  proxy  {ours}\n  oracle {theirs}")
    return failures


def test_a_fast_path_statements_warnings_and_error_are_shown_as_mariadb_shows_them(wire) -> None:  # noqa: F811
    failures = _differences(wire, WARNINGS_AND_ERRORS)
    assert not failures, "\n\n".join(failures)


def test_only_statements_that_use_a_table_clear_a_fast_path_statements_warnings(wire) -> None:  # noqa: F811
    failures = _differences(wire, WARNINGS_AND_TABLE_USE)
    assert not failures, "\n\n".join(failures)


def test_in_transaction_says_whether_a_transaction_is_open_on_either_path(wire) -> None:  # noqa: F811
    failures = _differences(wire, IN_TRANSACTION)
    assert not failures, "\n\n".join(failures)


def test_row_count_and_found_rows_after_fast_path_statements_are_mariadbs(wire) -> None:  # noqa: F811
    failures = _differences(wire, ROW_COUNTS)
    assert not failures, "\n\n".join(failures)


def _connector(host: str, port: int, user: str, password: str, db: str) -> Any:
    return mysql.connector.connect(host=host, port=port, user=user, password=password, database=db, autocommit=True,
                                   use_pure=True, charset="utf8mb4", collation="utf8mb4_general_ci")


Step = tuple[str, str, tuple[Any, ...]]  # how (text, prepared, ping, reset), the statement, its parameters

PREPARED_PING_RESET: list[Step] = [
    ("text", "delete from notes where id >= 4200 and id < 4300", ()),
    ("prepared", "insert into notes (id, owner, n, body) values (?, ?, ?, ?)", (4201, "p", 1, "a")),
    ("text", "select row_count()", ()),
    ("prepared", "update notes set n = ? where id = ?", (7, 4201)),
    ("text", "select row_count()", ()),
    ("prepared", "update notes set n = ? where id = ?", (None, 4201)),  # 1048 in strict mode
    ("text", "show errors", ()),
    ("prepared", "select id from notes where id = ? and n = ?", (4201, "abc")),  # warning 1292
    ("text", "show warnings", ()),
    ("ping", "", ()),
    ("text", "show warnings", ()),
    ("prepared", "insert into notes (id, owner, n, body) values (?, ?, ?, ?)", (4201, "p", 1, "a")),  # 1062
    ("ping", "", ()),
    ("text", "show count(*) errors", ()),
    ("reset", "", ()),
    ("text", "show errors", ()),
    ("text", "select row_count()", ()),
    # named by a parameter (the normal path's): its EOF's warning count is the shard's
    ("prepared", "select id, cast(? as signed) from notes where id = ?", ("abc", 4201)),
    ("prepared", "select id, n + ? from notes where id = ?", ("1x", 4201)),
]


def _connector_steps(conn: Any, steps: list[Step]) -> list[Any]:
    out: list[Any] = []
    for how, sql, params in steps:
        try:
            if how == "ping":
                conn.ping()
                out.append("pong")
                continue
            if how == "reset":
                conn.cmd_reset_connection()
                out.append("reset")
                continue
            cur = conn.cursor(prepared=how == "prepared")
            try:
                cur.execute(sql, params or None)
                rows = [tuple(r) for r in cur.fetchall()] if cur.description else cur.rowcount
                out.append((rows, cur.warning_count if hasattr(cur, "warning_count") else None))
            finally:
                cur.close()
        except mysql.connector.Error as e:
            out.append(("error", e.errno))
    return out


def test_prepared_statements_pings_and_resets_leave_what_mariadb_leaves(wire) -> None:  # noqa: F811
    def run(connect: Callable[[], Any]) -> list[Any]:
        conn = connect()
        try:
            return _connector_steps(conn, PREPARED_PING_RESET)
        finally:
            conn.close()

    proxy = lambda: _connector(wire.proxy.host, wire.proxy.port, "root", "", "commerce")  # noqa: E731
    ep = wire.lookup_ep
    oracle = lambda: _connector(ep.host, ep.port, ep.user, ep.password, ORACLE_DB)  # noqa: E731
    run(proxy)  # plans cached
    run(oracle)  # the same rows before
    ours, theirs = run(proxy), run(oracle)
    failures = [f"{step[0]} {step[1]} {step[2]}\n  proxy  {a}\n  oracle {b}"
                for step, a, b in zip(PREPARED_PING_RESET, ours, theirs, strict=True) if a != b]
    assert not failures, "\n\n".join(failures)


def test_a_warned_statements_link_serves_its_warnings_then_goes_back_to_the_fast_path(metered_proxy) -> None:
    """SHOW WARNINGS after a fast-path statement that warned is read on that statement's link, and
    the link goes back to the session's next point selects (which stay on the fast path: none
    waits for a link another statement's warnings hold)."""
    proxy, metrics = metered_proxy
    warned = "select customer_id, cast('abc' as signed) as v from customer where customer_id = %s"
    point = "select customer_id from customer where customer_id = %s"
    base = 710_000_000 + uuid.uuid4().int % 100_000_000
    low = [i for i in range(base, base + 200) if hash_uint64(i)[0] < 0x80][:25]  # on -80
    high = [i for i in range(base, base + 200) if hash_uint64(i)[0] >= 0x80][:25]  # on 80-
    ids = [i for pair in zip(low, high, strict=True) for i in pair]
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("insert into customer (customer_id, email) values " + ", ".join(f"({i}, 'w')" for i in ids))

            def both() -> list[Any]:  # ids on both shards: the links to each open first
                out = []
                for n in ids[:4]:
                    cur.execute(warned, (n,))
                    out.append(cur.fetchall())  # (its warning count: 0 on the normal path, which plans it)
                    cur.execute(point, (n,))
                    out.append(cur.fetchall())
                return out

            fast_answer(metrics, both, statements=8)
            before = fast_path_statements(metrics)
            for n in ids:
                cur.execute(warned, (n,))
                cur.fetchall()
                assert conn._result.warning_count == 1  # the EOF's count, as MariaDB sends it
                cur.execute("show warnings")
                assert cur.fetchall() == (("Warning", 1292, "Truncated incorrect INTEGER value: 'abc'"),)
                cur.execute(point, (n,))
                cur.fetchall()
        # the warned selects, the SHOW WARNINGS read on their links and the point selects
        assert fast_path_statements(metrics) - before == 150
    finally:
        with conn.cursor() as cur:
            cur.execute("delete from customer where customer_id in (" + ", ".join(map(str, ids)) + ")")
        conn.close()


def test_show_errors_after_a_write_to_several_shards_reads_the_shard_error_it_failed_with(metered_proxy) -> None:
    """An INSERT whose rows go to both shards, one of them a duplicate: the fast path runs it on
    its links (both idle: opened first), and SHOW ERRORS reads the error on the link it came from."""
    proxy, metrics = metered_proxy
    base = 720_000_000 + uuid.uuid4().int % 100_000_000
    low = [i for i in range(base, base + 100) if hash_uint64(i)[0] < 0x80][:2]  # on -80
    high = [i for i in range(base, base + 100) if hash_uint64(i)[0] >= 0x80][:2]  # on 80-
    insert = "insert into customer (customer_id, email) values ({}, 'a'), ({}, 'b')"
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as cur:
            fast_answer(metrics, lambda: [cur.execute("select customer_id from customer where customer_id = %s", (i,))
                                          for i in (low[0], high[0])], statements=2)
            cur.execute(insert.format(low[0], high[0]))
            before = fast_path_statements(metrics)
            try:
                cur.execute(insert.format(low[1], high[0]))  # high[0]: a duplicate on 80-
                raise AssertionError("no duplicate key error")
            except pymysql.err.IntegrityError as e:
                assert e.args[0] == 1062
            assert fast_path_statements(metrics) - before == 2  # one statement to each shard
            cur.execute("show errors")
            assert cur.fetchall() == (("Error", 1062, f"Duplicate entry '{high[0]}' for key 'PRIMARY'"),)
            cur.execute("show count(*) errors")
            assert cur.fetchall() == ((1,),)
            cur.execute("select customer_id from customer where customer_id = %s", (low[1],))
            assert cur.fetchall() == ()  # rolled back on -80
    finally:
        with conn.cursor() as cur:
            cur.execute(f"delete from customer where customer_id in ({', '.join(map(str, low + high))})")
        conn.close()


def test_a_session_whose_last_table_statement_left_nothing_shows_no_other_statements_warnings(wire) -> None:  # noqa: F811
    """Warnings left on the shards' pooled connections by another session's statements (the
    normal path's, on both shards) are not this session's: a new session has none, and a
    fast-path statement that left none leaves none to show, whichever connection the normal
    path would read them on."""
    point = "select id, n from notes where id = 6001"
    reads = ["show warnings", "show errors", "show count(*) warnings", "show warnings limit 1",
             "select @@warning_count", "select @@warning_count, @@error_count"]
    with wire.proxy.connect("commerce", autocommit=True, charset="utf8mb4") as setup, setup.cursor() as cur:
        cur.execute("delete from notes where id >= 6000 and id < 6100")
        cur.execute("insert into notes (id, owner, n, body) values " + ", ".join(
            f"({i}, 's', 1, 'b{i}')" for i in range(6001, 6011)))
        cur.execute(point)  # its plan cached
    with wire.proxy.connect("commerce", autocommit=True, charset="utf8mb4") as other, other.cursor() as cur:
        for i in range(6001, 6011):  # each its first run (its own column name): the normal path's
            cur.execute(f"select id, cast('abc' as signed) as w{i} from notes where id = {i}")
            assert len(cur.fetchall()) == 1  # with a warning, on a pooled connection to its shard
    with wire.proxy.connect("commerce", autocommit=True, charset="utf8mb4") as conn:
        fresh = [_step(conn, sql) for sql in reads]
        after_point = [_step(conn, sql) for sql in [point, *reads]][1:]
    empty = [((), 0, 2), ((), 0, 2), (((0,),), 0, 2), ((), 0, 2), (((0,),), 0, 2), (((0, 0),), 0, 2)]
    assert fresh == empty
    assert after_point == empty


def test_row_count_and_found_rows_after_the_normal_paths_statements_are_mariadbs(wire) -> None:  # noqa: F811
    failures = _differences(wire, COUNTS_ON_EITHER_PATH)
    assert not failures, "\n\n".join(failures)
