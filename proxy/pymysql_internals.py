"""PyMySQL's private API, used from this module only (the adapter): the unbuffered result a
query leaves on the connection (its column definitions with flags and charset, which
``cursor.description`` drops), and the connection's socket and buffered reader, which the
Spark source reads rows from in bulk and the CDC binlog reader replaces with a faster one, and
the switch that makes a result's values arrive undecoded (the Reshard copy writes them back as
they came).
PyMySQL offers none of these publicly; if a release renames them, this is the one place."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pymysql
import pymysql.cursors


def unbuffered_result(conn: pymysql.Connection) -> Any:
    """The result of the connection's last ``query(..., unbuffered=True)`` (a
    ``pymysql.connections.MySQLResult``, or None)."""
    return conn._result  # type: ignore[attr-defined]


def result_fields(cur: pymysql.cursors.Cursor) -> Any:
    """The column definitions (``FieldDescriptorPacket``s) of a cursor's current result."""
    return cur._result.fields  # type: ignore[attr-defined]


@contextmanager
def raw_values(conn: pymysql.Connection) -> Iterator[None]:
    """Results read inside come as the text protocol sent them: every value ``bytes`` (or None),
    nothing decoded or converted (the connection's ``use_unicode`` and ``decoders``, which
    PyMySQL reads when a result's columns arrive, are set aside meanwhile)."""
    use_unicode, decoders = conn.use_unicode, conn.decoders  # type: ignore[attr-defined]
    conn.use_unicode, conn.decoders = False, {}  # type: ignore[attr-defined]
    try:
        yield
    finally:
        conn.use_unicode, conn.decoders = use_unicode, decoders  # type: ignore[attr-defined]


def buffered_reader(conn: pymysql.Connection) -> Any:
    """The file-like reader the connection reads packets through."""
    return conn._rfile  # type: ignore[attr-defined]


def raw_socket(conn: object) -> socket.socket:
    sock: socket.socket = conn._sock  # type: ignore[attr-defined]
    return sock


def replace_reader(conn: object, reader: object) -> None:
    """Make the connection read its packets through ``reader`` (nothing may be in flight)."""
    conn._rfile = reader  # type: ignore[attr-defined]


def intercept_packets(conn: object, wrap: Callable[[Callable[[], Any]], Callable[[], Any]]) -> None:
    """Route the connection's packet reads (``_read_packet()``, also what python-mysql-replication
    reads binlog events with) through ``wrap(original)``."""
    conn._read_packet = wrap(conn._read_packet)  # type: ignore[attr-defined]


__all__ = [
    "buffered_reader", "intercept_packets", "raw_socket", "raw_values", "replace_reader", "result_fields",
    "unbuffered_result",
]  # fmt: skip
