"""SET of a system variable the shards do not know: MySQL's 1193, and the session goes on
with the settings it had."""

from __future__ import annotations

import subprocess

import pymysql
import pytest

from tests.proxy.sessions_support import query


def test_set_unknown_variable_is_1193_and_the_session_keeps_working(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        query(conn, "set time_zone = '+05:00'")
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, "SET @@session.nosuch = 1")
        assert e.value.args == (1193, "Unknown system variable 'nosuch'")
        # The session works, on every shard, with the settings it had before.
        assert query(conn, "select 1") == ((1,),)
        assert query(conn, "select @@time_zone") == (("+05:00",),)
        assert query(conn, "select count(*) from customer where customer_id < 0") == ((0,),)
        query(conn, "use `commerce:80-`")
        assert query(conn, "select @@session.time_zone") == (("+05:00",),)
    finally:
        conn.close()


def test_unknown_variable_error_carries_sqlstate_hy000_for_the_mariadb_client(proxy) -> None:
    out = subprocess.run(
        ["mariadb", "-h", proxy.host, "-P", str(proxy.port), "-uroot", "--force", "--skip-column-names"],
        input="SET @@session.nosuch = 1;\nselect 42;\n", capture_output=True, text=True, timeout=30,
    )
    assert "ERROR 1193 (HY000)" in out.stderr and "Unknown system variable 'nosuch'" in out.stderr, out.stderr
    assert out.stdout.strip() == "42"  # the next statement of the same session ran


def test_set_of_a_known_and_an_unknown_variable_changes_neither(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        before = query(conn, "select @@session.sql_mode")
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, "set sql_mode = 'ANSI_QUOTES', nosuch2 = 5")
        assert e.value.args[0] == 1193
        assert query(conn, "select @@session.sql_mode") == before
        assert query(conn, 'select "ok"') == (("ok",),)  # ANSI_QUOTES is not on: a string literal
    finally:
        conn.close()


def test_unknown_variable_inside_a_transaction_keeps_the_transaction(proxy) -> None:
    conn = proxy.connect("commerce")
    other = proxy.connect("commerce")
    try:
        query(conn, "begin")
        query(conn, "insert into customer(customer_id, email, tenant_id) values (91193001, 'uv', 1)")
        with pytest.raises(pymysql.err.OperationalError) as e:
            query(conn, "set @@session.nosuch = 1")
        assert e.value.args[0] == 1193
        assert query(conn, "select email from customer where customer_id = 91193001") == ((b"uv",),)
        query(conn, "commit")
        assert query(other, "select email from customer where customer_id = 91193001") == ((b"uv",),)
    finally:
        query(other, "delete from customer where customer_id = 91193001")
        conn.close()
        other.close()
