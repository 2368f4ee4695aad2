"""Relaying a shard's row packets: boundaries found by length, whatever the bytes inside look like."""

from __future__ import annotations

import MySQLdb
import MySQLdb.cursors

EOF_LOOKALIKE = bytes.fromhex("05000001fe00000200")


def test_rows_that_contain_eof_and_error_lookalike_bytes_relay_intact(proxy) -> None:
    conn = MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", database="commerce:-80")
    try:
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
        cur.execute(
            "SELECT X'FE', X'FF0000', X'05000001fe00000200' UNION ALL "
            "SELECT X'05000001fe00000200', '', NULL"
        )
        assert list(cur.fetchall()) == [(b"\xfe", b"\xff\x00\x00", EOF_LOOKALIKE), (EOF_LOOKALIKE, b"", None)]
    finally:
        conn.close()


def test_values_with_two_and_three_byte_lengths_relay_intact(proxy) -> None:
    conn = MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", database="commerce:-80")
    try:
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
        cur.execute("SELECT REPEAT('a', 70000), seq FROM seq_1_to_50 UNION ALL SELECT REPEAT('b', 300000), 0")
        rows = list(cur.fetchall())
        assert [len(r[0]) for r in rows] == [70000] * 50 + [300000]
        assert [int(r[1]) for r in rows] == [*range(1, 51), 0]
    finally:
        conn.close()
