"""A small asyncio client of topics through the proxy's MySQL port (aiomysql).

::

    async with TopicClient("127.0.0.1", 15306, keyspace="commerce") as client:
        await client.publish("orders", b"created 1", b"created 2")        # durable when it returns
        page = await client.poll("orders", from_time=ms, limit=100)      # list[Message]
        follower = client.follow("orders", after=saved_position)
        async for message in follower:                                   # every message, in order
            handle(message)
            saved_position = follower.position                           # save to resume after it
        await follower.close()

A follower is ``SET WORKLOAD = OLAP; STREAM * FROM topic WHERE message_id > '<position>'`` on a
connection of its own; nothing is acknowledged or shared: every follower gets every message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import aiomysql

from proxy.topics.ids import first_id_at, is_id
from proxy.topics.schema import DEFAULT_MAX_POLL_BYTES, capped_read_sql
from proxy.topics.service import Message
from sqltext.quoting import bytes_literal, quote_identifier


def _start_condition(after: str | None, inclusive: bool, from_time: int | None) -> str:
    if after is not None and from_time is not None:
        raise ValueError("give after or from_time, not both")
    if from_time is not None:
        return f"message_id >= '{first_id_at(int(from_time))}'"
    if after is None:
        return "message_id >= ''"
    if not is_id(after):
        raise ValueError(f"not a message id: {after!r}")
    return f"message_id {'>=' if inclusive else '>'} '{after.lower()}'"


class TopicFollower:
    """An async iterator of a topic's messages from a position; ``position`` is the id of the
    last message handed out (resume with ``follow(topic, after=position)``)."""

    def __init__(self, client: TopicClient, topic: str, condition: str, position: str | None) -> None:
        self._client = client
        self._topic = topic
        self._condition = condition
        self.position = position
        self._conn: aiomysql.Connection | None = None
        self._cursor: Any = None

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._messages()

    async def _open(self) -> None:
        conn = await self._client._connect()
        try:
            async with conn.cursor() as cur:
                await cur.execute("SET WORKLOAD = OLAP")
            cursor = await conn.cursor(aiomysql.SSCursor)
            await cursor.execute(f"STREAM * FROM {quote_identifier(self._topic)} WHERE {self._condition}")
        except BaseException:
            conn.close()
            raise
        self._conn, self._cursor = conn, cursor

    async def _messages(self) -> AsyncIterator[Message]:
        if self._cursor is None:
            await self._open()
        while True:
            row = await self._cursor.fetchone()
            if row is None:
                return
            message = Message(row[0], int(row[1]), bytes(row[2]))
            self.position = message.id
            yield message

    async def close(self) -> None:
        conn, self._conn, self._cursor = self._conn, None, None
        if conn is not None:
            conn.close()


class TopicClient:
    def __init__(self, host: str, port: int, *, user: str = "root", password: str = "", keyspace: str) -> None:
        self.host, self.port, self.user, self.password, self.keyspace = host, port, user, password, keyspace
        self._conn: aiomysql.Connection | None = None

    async def _connect(self) -> aiomysql.Connection:
        return await aiomysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                      db=self.keyspace, autocommit=True)

    async def __aenter__(self) -> TopicClient:
        self._conn = await self._connect()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def _cursor(self) -> Any:
        if self._conn is None:
            self._conn = await self._connect()
        return self._conn.cursor()

    async def publish(self, topic: str, *payloads: bytes | str, ttl_seconds: int | None = None) -> int:
        """Publish (one INSERT, autocommit: durable when it returns); returns how many."""
        if not payloads:
            return 0
        values = [p.encode() if isinstance(p, str) else p for p in payloads]
        # Hex literals: binary-safe, and no client-side escaping of bytes (aiomysql's is broken
        # with current PyMySQL).
        ttl = "" if ttl_seconds is None else f", {int(ttl_seconds)}"
        rows = ",".join(f"({bytes_literal(v)}{ttl})" for v in values)
        cols = "payload" if ttl_seconds is None else "payload, ttl_seconds"
        async with await self._cursor() as cur:
            return int(await cur.execute(f"INSERT INTO {quote_identifier(topic)} ({cols}) VALUES {rows}"))

    async def poll(
        self, topic: str, *, after: str | None = None, inclusive: bool = False, from_time: int | None = None,
        limit: int = 100, max_bytes: int = DEFAULT_MAX_POLL_BYTES,
    ) -> list[Message]:
        """Up to ``limit`` messages after (or at, ``inclusive``) an id, or from a time in ms, and
        at most ``max_bytes`` of payload (but always the first message, whatever its size)."""
        cond = _start_condition(after, inclusive, from_time)
        async with await self._cursor() as cur:
            await cur.execute(capped_read_sql(topic, "message_id, publish_time, payload", cond, limit, max_bytes))
            return [Message(r[0], int(r[1]), bytes(r[2])) for r in await cur.fetchall()]

    def follow(self, topic: str, *, after: str | None = None, from_time: int | None = None) -> TopicFollower:
        return TopicFollower(self, topic, _start_condition(after, False, from_time), after)
