"""aiomysql's private wire API, used from this module only (the adapter): the shard pools
(``proxy.pools``) read results packet by packet and in bulk off the socket, and the 2PC
pipeline (``proxy.twopc.wire``) writes several commands in one round trip. aiomysql offers
neither publicly; if a release renames these, this module is the one place to change.

Also the settings a pooled connection carries (``ShardConnection.apply_settings``), kept on
the aiomysql connection itself so they live exactly as long as it does."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiomysql
from pymysql.constants import COMMAND

# A pymysql MysqlPacket (aiomysql reads pymysql's packet type).
Packet = Any

NO_SETTINGS: Mapping[str, str] = {}


def socket_reader(conn: aiomysql.Connection) -> asyncio.StreamReader:
    """The connection's stream reader, for reading row packets in bulk."""
    reader: asyncio.StreamReader = conn._reader
    return reader


async def send_query(conn: aiomysql.Connection, sql: str) -> None:
    """Write COM_QUERY without reading the answer. A client's statement reaches the proxy as
    bytes decoded with ``surrogateescape`` (``proxy.connection``): bytes that are not UTF-8 (a
    binary literal, ``_binary'\\xff'``) come back as they were sent; aiomysql's own encoding
    (strict) would fail on them."""
    await conn._execute_command(COMMAND.COM_QUERY, sql.encode(text_encoding(conn), "surrogateescape"))


async def read_packet(conn: aiomysql.Connection) -> Packet:
    """The next packet of the answer (an error packet raises pymysql's error)."""
    return await conn._read_packet()


def packet_payload(packet: Packet) -> bytes:
    payload: bytes = packet._data
    return payload


def value_converters(cursor: aiomysql.Cursor) -> list[tuple[str | None, Any]]:
    """Per column of the cursor's current result, the (encoding, converter) aiomysql applies to
    a text value: decoded with the encoding (None: kept as bytes), then the converter (None: none)."""
    converters: list[tuple[str | None, Any]] = cursor._result.converters
    return converters


def text_encoding(conn: aiomysql.Connection) -> str:
    encoding: str = conn._encoding
    return encoding


def write_commands(conn: aiomysql.Connection, data: bytes) -> None:
    """Write ready-made command packets (several, back to back) without reading."""
    conn._ensure_alive()
    conn._write_bytes(data)


def expect_new_answer(conn: aiomysql.Connection) -> None:
    """The next packet starts a new answer (sequence id 1), as after a command of its own."""
    conn._next_seq_id = 1


def transport_of(conn: aiomysql.Connection) -> asyncio.Transport | None:
    """The connection's socket transport (None once closed)."""
    writer = conn._writer
    if writer is None:
        return None
    transport: asyncio.Transport = writer.transport
    return transport


def has_unread(conn: aiomysql.Connection) -> bool:
    """Whether bytes the shard sent wait unread in the connection's reader."""
    reader = conn._reader
    return reader is None or bool(reader._buffer)


def set_server_status(conn: aiomysql.Connection, status: int) -> None:
    """The status flags of the last answer read on the connection past aiomysql (the pool
    closes a connection released while they say it is in a transaction)."""
    conn.server_status = status


def take_idle(pool: aiomysql.Pool) -> aiomysql.Connection | None:
    """An idle connection of ``pool`` without waiting: what ``Pool.acquire`` returns when one is
    free (the same checks: closed by the server, past ``pool_recycle``), or None when it
    would have to wait or open one (or another acquire is under way: it keeps its turn)."""
    cond = pool._cond
    if pool._closing or cond.locked() or cond._waiters:
        return None
    free = pool._free
    while free:
        conn = free.popleft()
        reader = conn._reader
        if (reader.at_eof() or reader.exception() or reader.eof_received
                or (pool._recycle > -1 and pool._loop.time() - conn.last_usage > pool._recycle)):
            conn.close()
            continue
        pool._used.add(conn)
        return conn
    return None


def give_back(pool: aiomysql.Pool, conn: aiomysql.Connection) -> bool:
    """``Pool.release`` of an open connection outside a transaction, without the task it
    starts to wake acquirers when none waits; False: ``Pool.release`` must do it."""
    cond = pool._cond
    if pool._closing or cond.locked() or cond._waiters or conn.closed or conn.get_transaction_status():
        return False
    if conn not in pool._used:
        return False
    pool._used.remove(conn)
    pool._free.append(conn)
    return True


def settings_of(conn: aiomysql.Connection) -> Mapping[str, str]:
    """The session variables ``conn`` was last set to (``NO_SETTINGS``: none, or unknown)."""
    settings: Mapping[str, str] = getattr(conn, "_shardgate_settings", NO_SETTINGS)
    return settings


def record_settings(conn: aiomysql.Connection, settings: Mapping[str, str]) -> None:
    conn._shardgate_settings = settings


__all__ = [
    "NO_SETTINGS",
    "Packet",
    "expect_new_answer",
    "give_back",
    "has_unread",
    "packet_payload",
    "read_packet",
    "record_settings",
    "send_query",
    "set_server_status",
    "settings_of",
    "socket_reader",
    "take_idle",
    "text_encoding",
    "transport_of",
    "value_converters",
    "write_commands",
]
