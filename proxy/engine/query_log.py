"""A VCursor that runs everything through the session's own VCursor and logs each
query sent to a shard, for ``VEXPLAIN QUERIES|ALL`` (Vitess's logging vcursor).

``#`` groups the queries of one call: the shard queries of one ``execute_multi`` share
it, and so do the streams a scatter opens together (``stream_shard`` calls made in one
step of the task, before it next yields to the event loop); each other call, and each
statement on a scratch connection (a Compute's temporary tables), gets the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.engine.result import Result
from proxy.engine.vcursor import ScratchConnection, VCursor

if TYPE_CHECKING:
    from vschema.model import VSchema


@dataclass(frozen=True, slots=True)
class LoggedQuery:
    group: int
    keyspace: str
    shard: str
    sql: str


class QueryLog:
    def __init__(self, inner: VCursor) -> None:
        self.inner = inner
        self.queries: list[LoggedQuery] = []
        self._groups = 0
        self._stream_group: int | None = None  # open until the task next yields

    def record(self, keyspace: str, shard: str, sql: str, group: int | None = None) -> int:
        """Log one query; without ``group`` it opens the next one. Returns the group."""
        if group is None:
            group = self._groups
            self._groups += 1
        self.queries.append(LoggedQuery(group, keyspace, shard, sql))
        return group

    @property
    def vschema(self) -> VSchema:
        return self.inner.vschema

    @property
    def in_transaction(self) -> bool:
        return self.inner.in_transaction

    async def execute_shard(self, keyspace: str, shard: str, sql: str) -> Result:
        self.record(keyspace, shard, sql)
        return await self.inner.execute_shard(keyspace, shard, sql)

    async def execute_multi(self, keyspace: str, queries: Sequence[tuple[str, str]]) -> list[Result]:
        group: int | None = None
        for shard, sql in queries:
            group = self.record(keyspace, shard, sql, group)
        return await self.inner.execute_multi(keyspace, queries)

    def stream_shard(self, keyspace: str, shard: str, sql: str) -> AsyncGenerator[Result, None]:
        if self._stream_group is None:
            self._stream_group = self.record(keyspace, shard, sql)
            asyncio.get_running_loop().call_soon(self._close_stream_group)
        else:
            self.record(keyspace, shard, sql, self._stream_group)
        return self.inner.stream_shard(keyspace, shard, sql)

    def _close_stream_group(self) -> None:
        self._stream_group = None

    @asynccontextmanager
    async def scratch(self, keyspace: str, shard: str) -> AsyncIterator[ScratchConnection]:
        async with self.inner.scratch(keyspace, shard) as conn:
            yield _LoggedScratch(self, conn, keyspace, shard)

    async def next_sequence_values(self, keyspace: str, table: str, count: int) -> int:
        return await self.inner.next_sequence_values(keyspace, table, count)


class _LoggedScratch:
    def __init__(self, log: QueryLog, conn: ScratchConnection, keyspace: str, shard: str) -> None:
        self._log = log
        self._conn = conn
        self._keyspace = keyspace
        self._shard = shard

    @property
    def broken(self) -> bool:
        return self._conn.broken

    @broken.setter
    def broken(self, value: bool) -> None:
        self._conn.broken = value

    async def execute(self, sql: str) -> Result:
        self._log.record(self._keyspace, self._shard, sql)
        return await self._conn.execute(sql)

    def stream(self, sql: str) -> AsyncGenerator[Result, None]:
        self._log.record(self._keyspace, self._shard, sql)
        return self._conn.stream(sql)
