"""A small asyncio client for shardgate message tables (over aiomysql, through the proxy).

Producer::

    async with MessageQueue("customer_events", host="127.0.0.1", port=15306, db="commerce") as q:
        await q.enqueue({"id": 1, "tenant_id": 7, "message": '{"hello": "world"}'})

Worker::

    async with MessageQueue("customer_events", host="127.0.0.1", port=15306, db="commerce") as q:
        async for msg in q:
            handle(msg.values)
            await q.ack([msg.id])

Receiving uses its own connection (``SET WORKLOAD = OLAP`` then ``STREAM * FROM t`` started with
an ``SSCursor``: rows arrive as the proxy sends them, for as long as the connection lives); acks
and enqueues use a second, ordinary connection, because a connection reading a stream cannot run
other statements. The stream's rows are read off the socket in bulk (every row that has arrived,
as the proxy reads its shards: ``RowPacketReader``), not with ``fetchone``: aiomysql's reader
cost 3.5-3.9 us of CPU a row, this one 2.0-2.2 with the same values (100k rows of 3 columns
delivered in batches of 50, as ``tests/benchmarks/bench_messaging.py`` receives them).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiomysql

from proxy import aiomysql_wire
from proxy.engine.result import decode_text_row, split_packets
from proxy.pools import RowPacketReader
from sqltext.quoting import quote_identifier

# Rows taken from the socket at most per read: whatever has arrived, up to this many.
READ_ROWS = 4096


@dataclass(frozen=True, slots=True)
class Message:
    id: Any
    values: dict[str, Any]  # every streamed column, ``id`` included


def _converter(encoding: str | None, converter: Callable[[Any], Any] | None) -> Callable[[bytes], Any]:
    """A column's text value as aiomysql gives it (``aiomysql_wire.value_converters``)."""
    if encoding is None:
        return converter if converter is not None else bytes
    if converter is None:
        return lambda value: value.decode(encoding)
    return lambda value: converter(value.decode(encoding))


class MessageQueue:
    def __init__(
        self,
        table: str,
        *,
        host: str = "127.0.0.1",
        port: int = 15306,
        user: str = "root",
        password: str = "",
        db: str | None = None,
        where: str | None = None,
    ) -> None:
        self.table = table
        self.where = where
        self._connect_args: dict[str, Any] = {
            "host": host, "port": port, "user": user, "password": password, "db": db, "autocommit": True,
        }  # fmt: skip
        self._commands: aiomysql.Connection | None = None
        self._stream_conn: aiomysql.Connection | None = None

    async def __aenter__(self) -> MessageQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in (self._stream_conn, self._commands):
            if conn is not None:
                conn.close()  # a streaming connection cannot be quit politely mid-result
        self._stream_conn = self._commands = None

    async def _command_connection(self) -> aiomysql.Connection:
        if self._commands is None:
            self._commands = await aiomysql.connect(**self._connect_args)
        return self._commands

    # -- receiving --------------------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[Message]:
        return self.messages()

    async def messages(self) -> AsyncIterator[Message]:
        """Messages as they become due, forever (until the connection or the proxy ends it)."""
        conn = await aiomysql.connect(**self._connect_args)
        self._stream_conn = conn
        try:
            async with conn.cursor() as cur:
                await cur.execute("SET WORKLOAD = OLAP")
            cur = await conn.cursor(aiomysql.SSCursor)
            sql = f"STREAM * FROM {quote_identifier(self.table)}"
            if self.where:
                sql += f" WHERE {self.where}"
            await cur.execute(sql)
            names = [d[0] for d in cur.description]
            id_at = names.index("id") if "id" in names else 0
            convert = [_converter(*c) for c in aiomysql_wire.value_converters(cur)]
            rows = RowPacketReader(conn)
            while True:
                block, eof = await rows.read(READ_ROWS)
                if block is not None:
                    for payload in split_packets(block.data):
                        row = [None if v is None else f(v) for f, v in zip(convert, decode_text_row(payload), strict=True)]
                        yield Message(id=row[id_at], values=dict(zip(names, row, strict=True)))
                if eof is not None:
                    return
        finally:
            conn.close()
            if self._stream_conn is conn:
                self._stream_conn = None

    # -- acking and enqueueing ----------------------------------------------------------------
    async def ack(self, ids: Iterable[Any]) -> int:
        """Ack messages by id; returns how many were still unacked (Vitess's ack DML)."""
        id_list = list(ids)
        if not id_list:
            return 0
        conn = await self._command_connection()
        in_list = ", ".join(conn.escape(i) for i in id_list)
        async with conn.cursor() as cur:
            return int(
                await cur.execute(
                    f"UPDATE {quote_identifier(self.table)} SET time_acked = {time.time_ns()}, time_next = NULL"
                    f" WHERE id IN ({in_list}) AND time_acked IS NULL"
                )
            )

    async def enqueue(
        self,
        messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        priority: int | None = None,
        deliver_at: float | None = None,
    ) -> int:
        """Insert one message (a column -> value mapping with ``id``) or several with the same
        columns. ``deliver_at`` (Unix seconds) schedules them; ``priority``: lower goes first."""
        rows = [messages] if isinstance(messages, Mapping) else list(messages)
        if not rows:
            return 0
        extra: dict[str, Any] = {}
        if priority is not None:
            extra["priority"] = priority
        if deliver_at is not None:
            extra["time_next"] = int(deliver_at * 1_000_000_000)
        columns = list(rows[0]) + [c for c in extra if c not in rows[0]]
        conn = await self._command_connection()
        values = ", ".join(
            "(" + ", ".join(conn.escape({**extra, **r}[c]) for c in columns) + ")" for r in rows
        )
        async with conn.cursor() as cur:
            return int(
                await cur.execute(
                    f"INSERT INTO {quote_identifier(self.table)} ({', '.join(quote_identifier(c) for c in columns)})"
                    f" VALUES {values}"
                )
            )
