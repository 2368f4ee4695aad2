"""SQL VSTREAM through the proxy: row changes of a sharded table, resumable by position."""

from __future__ import annotations

import uuid

import pymysql
import pymysql.cursors
import pytest


def _open_vstream(proxy, sql: str):
    conn = proxy.connect("commerce", cursorclass=pymysql.cursors.SSCursor, autocommit=True)
    cur = conn.cursor()
    cur.execute("set workload='olap'")
    cur.execute(sql)
    return conn, cur


def _write(proxy, *statements: str) -> None:
    conn = proxy.connect("commerce", autocommit=True)
    try:
        with conn.cursor() as c:
            for s in statements:
                c.execute(s)
    finally:
        conn.close()


def _base_id() -> int:
    return 500_000 + uuid.uuid4().int % 400_000 * 10


def test_vstream_fields_are_op_table_columns_and_vgtid(proxy) -> None:
    conn, cur = _open_vstream(proxy, "vstream * from customer limit 1")
    try:
        assert [d[0] for d in cur.description] == ["op", "customer_id", "email", "tenant_id", "created_at", "vgtid"]
        _write(proxy, f"insert into customer(customer_id, email, tenant_id) values ({_base_id()}, 'f', 1)")
        assert len(cur.fetchall()) == 1
    finally:
        conn.close()


def test_vstream_shows_insert_update_delete_images(proxy) -> None:
    n = _base_id()
    conn, cur = _open_vstream(proxy, "vstream * from customer limit 3")
    try:
        _write(
            proxy,
            f"insert into customer(customer_id, email, tenant_id) values ({n}, 'a@x', 1)",
            f"update customer set tenant_id = 2 where customer_id = {n}",
            f"delete from customer where customer_id = {n}",
        )
        rows = cur.fetchall()
    finally:
        conn.close()
    assert [(r[0], int(r[1]), r[3]) for r in rows] == [("+", n, 1), ("*", n, 2), ("-", n, 2)]


def test_vstream_resumes_after_a_saved_position(proxy) -> None:
    n = _base_id()
    conn, cur = _open_vstream(proxy, "vstream * from customer limit 1")
    try:
        _write(proxy, f"insert into customer(customer_id, email, tenant_id) values ({n}, 'first', 1)")
        (first,) = cur.fetchall()
    finally:
        conn.close()
    saved = first[-1]
    # written while nobody is streaming
    _write(
        proxy,
        f"insert into customer(customer_id, email, tenant_id) values ({n + 1}, 'missed1', 1)",
        f"insert into customer(customer_id, email, tenant_id) values ({n + 2}, 'missed2', 1)",
    )
    conn, cur = _open_vstream(proxy, f"vstream * from customer where pos > '{saved}' limit 2")
    try:
        rows = cur.fetchall()
    finally:
        conn.close()
    assert sorted(int(r[1]) for r in rows) == [n + 1, n + 2]


def test_vstream_under_oltp_is_refused(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        with pytest.raises(pymysql.err.MySQLError) as e, conn.cursor() as c:
            c.execute("vstream * from customer")
        assert e.value.args[0] == 1235 and "OLAP" in e.value.args[1]
    finally:
        conn.close()


def test_vstream_where_other_than_pos_is_refused(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        with pytest.raises(pymysql.err.MySQLError) as e, conn.cursor() as c:
            c.execute("set workload='olap'")
            c.execute("vstream * from customer where customer_id = 1")
        assert "VT03017" in e.value.args[1]
    finally:
        conn.close()


def test_vstream_from_snapshot_copies_current_rows_then_streams_changes(proxy) -> None:
    n = _base_id()
    _write(proxy, f"insert into customer(customer_id, email, tenant_id) values ({n}, 'before', 5)")
    conn = proxy.connect("commerce", autocommit=True)
    with conn.cursor() as c:
        c.execute("select count(*) from customer")
        (existing,) = c.fetchone()
    conn.close()
    conn, cur = _open_vstream(proxy, f"vstream * from customer where pos > 'snapshot' limit {existing + 1}")
    try:
        _write(proxy, f"insert into customer(customer_id, email, tenant_id) values ({n + 1}, 'after', 6)")
        rows = cur.fetchall()
    finally:
        conn.close()
    copied, streamed = rows[:existing], rows[existing:]
    assert all(r[0] == "+" for r in rows)
    assert n in {int(r[1]) for r in copied}
    assert copied[-1][-1] is not None and all(r[-1] is None for r in copied[:-1])  # resume point after the copy
    assert [int(r[1]) for r in streamed] == [n + 1]
