"""The MySQL protocol as the proxy speaks it, each mysql-mimic shortcoming fixed."""

from __future__ import annotations

import datetime
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid

import mysql.connector
import pymysql
import pymysql.cursors
import pytest


def _read_packet(sock: socket.socket) -> bytes:
    header = b""
    while len(header) < 4:
        chunk = sock.recv(4 - len(header))
        if not chunk:
            return b""
        header += chunk
    n = struct.unpack("<I", header[:3] + b"\x00")[0]
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            break
        body += chunk
    return body


def test_wrong_password_is_1045_and_closes_the_connection(proxy) -> None:
    with pytest.raises(pymysql.err.OperationalError) as e:
        pymysql.connect(host=proxy.host, port=proxy.port, user="root", password="wrong")
    assert e.value.args[0] == 1045
    assert "Access denied for user 'root'" in e.value.args[1]


def test_failed_login_cannot_run_queries_on_a_raw_socket(proxy) -> None:
    """After "Access denied" the server closes the socket: a COM_QUERY sent anyway gets nothing back."""
    from pymysql.connections import _auth

    sock = socket.create_connection((proxy.host, proxy.port), timeout=5)
    try:
        greeting = _read_packet(sock)
        # salt: 8 bytes after version+thread id, then 12 more after the capability block
        v_end = greeting.index(b"\x00", 1)
        salt1 = greeting[v_end + 5 : v_end + 13]
        rest = greeting[v_end + 13 + 1 + 2 + 1 + 2 + 2 + 1 + 10 :]
        salt = salt1 + rest[:12]
        scramble = _auth.scramble_native_password(b"not-the-password", salt)
        caps = 0x0200 | 0x8000 | 0x00080000 | 0x0001  # PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | LONG_PASSWORD
        payload = (
            struct.pack("<IIB", caps, 1 << 24, 45)
            + b"\x00" * 23
            + b"root\x00"
            + bytes([len(scramble)])
            + scramble
            + b"mysql_native_password\x00"
        )
        sock.sendall(struct.pack("<I", len(payload))[:3] + b"\x01" + payload)
        reply = _read_packet(sock)
        assert reply[0] == 0xFF and struct.unpack("<H", reply[1:3])[0] == 1045
        query = b"\x03select 1"
        try:
            sock.sendall(struct.pack("<I", len(query))[:3] + b"\x00" + query)
        except OSError:
            return  # already closed: what we want
        try:
            assert _read_packet(sock) == b""
        except ConnectionResetError:
            pass  # closed by the server: what we want
    finally:
        sock.close()


def test_dml_ok_packet_carries_rowcount_and_lastrowid(proxy) -> None:
    conn = proxy.connect("lookup")
    table = f"t_ok_{uuid.uuid4().hex[:8]}"
    try:
        with conn.cursor() as c:
            c.execute(f"create table {table} (id bigint auto_increment primary key, v int)")
            c.execute(f"insert into {table}(v) values (1), (2), (3)")
            assert c.rowcount == 3
            assert c.lastrowid == 1
            c.execute(f"insert into {table}(v) values (4)")
            assert c.lastrowid == 4
            c.execute(f"update {table} set v = v + 1 where id <= 2")
            assert c.rowcount == 2
    finally:
        with conn.cursor() as c:
            c.execute(f"drop table if exists {table}")
        conn.close()


def test_autocommit_status_flag_follows_set_autocommit_and_a_statement_that_uses_a_table(proxy) -> None:
    conn = proxy.connect("lookup", autocommit=True)
    try:
        assert conn.get_autocommit() is True
        conn.autocommit(False)
        assert conn.get_autocommit() is False
        with conn.cursor() as c:
            c.execute("select 1")  # uses no table: opens no transaction, as in MariaDB
            c.execute("set @probe = 1")  # PyMySQL reads status flags from OK packets only
            assert not conn.server_status & 0x0001
            c.execute("select count(*) from information_schema.schemata")
            c.execute("set @probe = 2")
        assert conn.server_status & 0x0001  # SERVER_STATUS_IN_TRANS after a statement that uses a table
        conn.commit()
        assert not conn.server_status & 0x0001
        conn.autocommit(True)
        assert conn.get_autocommit() is True
    finally:
        conn.close()


def test_begin_sets_in_transaction_flag_and_commit_clears_it(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        with conn.cursor() as c:
            c.execute("begin")
            assert conn.server_status & 0x0001
            c.execute("commit")
            assert not conn.server_status & 0x0001
    finally:
        conn.close()


def test_multi_statement_text_returns_every_result(proxy) -> None:
    conn = proxy.connect("lookup", client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as c:
            c.execute("select 1; select 2, 3")
            assert c.fetchall() == ((1,),)
            assert c.nextset()
            assert c.fetchall() == ((2, 3),)
            assert not c.nextset()
    finally:
        conn.close()


def test_multi_statement_stops_at_the_first_error_and_reports_it(proxy) -> None:
    conn = proxy.connect("lookup", client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as c:
            c.execute("select 1; select * from no_such_table_here; select 3")
            assert c.fetchall() == ((1,),)
            with pytest.raises(pymysql.err.ProgrammingError) as e:
                c.nextset()
            assert e.value.args[0] == 1146
    finally:
        conn.close()


def test_prepared_statement_injection_attempt_is_inert(proxy) -> None:
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="", database="lookup")
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("select sku from product where sku = ?", ("x' OR '1'='1",))
        assert cur.fetchall() == []
        cur.execute("select ?, ?", ("it's", 'say "hi" \\ back'))
        assert cur.fetchall() == [("it's", 'say "hi" \\ back')]
    finally:
        conn.close()


def test_prepared_statement_binds_typed_parameters(proxy) -> None:
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="", database="lookup")
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("select ? + 1, ?, ?", (41, 2.5, None))
        row = cur.fetchall()[0]
        assert row[0] == 42 and float(row[1]) == 2.5 and row[2] is None
    finally:
        conn.close()


def test_result_rows_flow_before_the_statement_finishes(proxy) -> None:
    """The first rows of a slow result reach the client long before the last one is produced."""
    conn = proxy.connect("lookup", cursorclass=pymysql.cursors.SSCursor)
    try:
        with conn.cursor() as c:
            # Rows are produced one by one with a sleep in between (MariaDB evaluates
            # SLEEP per row); 1500 rows cross the proxy's 1000-row chunk size.
            start = time.monotonic()
            c.execute("select seq, repeat('x', 100), if(seq = 1400, sleep(2), 0) from seq_1_to_1500")
            first = c.fetchone()
            first_at = time.monotonic() - start
            rest = c.fetchall()
            total = time.monotonic() - start
        assert first[0] == 1 and len(rest) == 1499
        assert first_at < 1.0 < total, (first_at, total)
    finally:
        conn.close()


_STREAMING_CLIENT = """
import sys, pymysql, pymysql.cursors
conn = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user="root", database="lookup",
                       cursorclass=pymysql.cursors.SSCursor)
c = conn.cursor()
c.execute("select a.seq from seq_1_to_100000 a, seq_1_to_50 b")
c.fetchone()
print("reading", flush=True)
sys.stdin.read()  # stays connected without reading until killed
"""


def _running_big_queries(conn) -> int:
    with conn.cursor() as c:
        c.execute(
            "select count(*) from information_schema.processlist "
            "where info like 'select a.seq from seq_1_to_100000%'"
        )
        return int(c.fetchone()[0])


def test_client_killed_mid_result_releases_the_shard_connection(proxy) -> None:
    client = subprocess.Popen(
        [sys.executable, "-c", _STREAMING_CLIENT, str(proxy.port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    check = proxy.connect("lookup", autocommit=True)
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == b"reading"
        assert _running_big_queries(check) == 1
        client.send_signal(signal.SIGKILL)
        client.wait()
        deadline = time.monotonic() + 10
        while _running_big_queries(check):
            assert time.monotonic() < deadline, "the shard query was not stopped"
            time.sleep(0.2)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        check.close()


def test_prepared_statement_binds_dates_and_binary_safely(proxy) -> None:
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="", database="lookup")
    try:
        cur = conn.cursor(prepared=True)
        when = datetime.datetime(2026, 11, 22, 8, 30, 15, 123456)
        cur.execute("select ?, hex(?)", (when, b"\x00'\\\xff"))
        got_when, got_hex = cur.fetchall()[0]
        assert str(got_when).startswith("2026-11-22 08:30:15")
        assert got_hex == "00275CFF"
    finally:
        conn.close()


def test_a_large_relayed_result_arrives_intact_and_in_order(proxy, local_cluster) -> None:
    """Rows forwarded as the shard's own packets (sequence ids wrap many times) equal a direct read."""
    sql = "select seq, md5(seq), if(seq % 7 = 0, null, repeat('y', seq % 300)) from seq_1_to_200000"
    e = local_cluster.endpoint("lookup", "0")
    direct = pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, database=e.database)
    via = proxy.connect("lookup", cursorclass=pymysql.cursors.SSCursor)
    try:
        with direct.cursor() as d, via.cursor() as v:
            d.execute(sql)
            v.execute(sql)
            assert list(v.fetchall_unbuffered()) == list(d.fetchall())
    finally:
        direct.close()
        via.close()
