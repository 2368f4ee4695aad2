"""A small VCursor over aiomysql for engine tests: one autocommit pool per shard,
rows kept as raw text-protocol bytes (no converters), like the proxy's own VCursor."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiomysql
import pymysql

from proxy.engine.result import Field, Result
from proxy.engine.sequence import SequenceAllocator
from proxy.errors import ShardError
from proxy.schema_tracker import COLUMNS_QUERY, tables_from_rows
from vschema.tracked_schema import TrackedSchema


def fields_of(cursor: Any) -> list[Field]:
    result = cursor._result
    if result is None or not getattr(result, "fields", None):
        return []
    out = []
    for f in result.fields:
        db = f.db.decode() if isinstance(f.db, bytes) else f.db
        out.append(Field(name=f.name, type=f.type_code, charset=f.charsetnr, length=f.length,
                         flags=f.flags, decimals=f.scale, table=f.table_name,
                         org_table=f.org_table, db=db or "", org_name=f.org_name))
    return out


def _shard_error(keyspace: str, shard: str, e: pymysql.err.MySQLError) -> ShardError:
    code = e.args[0] if e.args and isinstance(e.args[0], int) else 1105
    return ShardError(keyspace, shard, code, str(e.args[-1]))


class ScratchConnection:
    """One aiomysql connection held for a Compute primitive's temporary tables."""

    def __init__(self, keyspace: str, shard: str, conn: Any, log: list[tuple[str, str, str]]) -> None:
        self.keyspace, self.shard, self.conn, self.log = keyspace, shard, conn, log
        self.broken = False

    async def execute(self, sql: str) -> Result:
        self.log.append((self.keyspace, self.shard, sql))
        async with self.conn.cursor() as cur:
            try:
                await cur.execute(sql)
            except pymysql.err.MySQLError as e:
                raise _shard_error(self.keyspace, self.shard, e) from e
            rows = list(await cur.fetchall()) if cur.description else []
            return Result(fields=fields_of(cur), rows=[tuple(r) for r in rows])

    async def stream(self, sql: str) -> AsyncIterator[Result]:
        yield await self.execute(sql)


class ShardVCursor:
    def __init__(self, vschema: Any, endpoints: dict[tuple[str, str], Any]) -> None:
        self._vschema = vschema
        self._endpoints = endpoints
        self._pools: dict[tuple[str, str], aiomysql.Pool] = {}
        self.sequences = SequenceAllocator()
        self.statements: list[tuple[str, str, str]] = []  # (keyspace, shard, sql) log

    @property
    def vschema(self) -> Any:
        return self._vschema

    async def pool(self, keyspace: str, shard: str) -> aiomysql.Pool:
        key = (keyspace, shard)
        p = self._pools.get(key)
        if p is None:
            ep = self._endpoints[key]
            p = await aiomysql.create_pool(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                                           db=ep.database, autocommit=True, conv={}, use_unicode=False,
                                           charset="utf8mb4", minsize=1, maxsize=8)
            self._pools[key] = p
        return p

    async def close(self) -> None:
        for p in self._pools.values():
            p.close()
            await p.wait_closed()

    async def execute_shard(self, keyspace: str, shard: str, sql: str) -> Result:
        self.statements.append((keyspace, shard, sql))
        pool = await self.pool(keyspace, shard)
        async with pool.acquire() as conn, conn.cursor() as cur:
            try:
                await cur.execute(sql)
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args and isinstance(e.args[0], int) else 1105
                raise ShardError(keyspace, shard, code, str(e.args[-1])) from e
            rows = list(await cur.fetchall()) if cur.description else []
            return Result(fields=fields_of(cur), rows=[tuple(r) for r in rows],
                          affected_rows=max(cur.rowcount, 0) if not cur.description else 0,
                          insert_id=cur.lastrowid or 0)

    async def execute_multi(self, keyspace: str, queries: Sequence[tuple[str, str]]) -> list[Result]:
        import asyncio

        return list(await asyncio.gather(*(self.execute_shard(keyspace, s, q) for s, q in queries)))

    async def stream_shard(self, keyspace: str, shard: str, sql: str) -> AsyncIterator[Result]:
        self.statements.append((keyspace, shard, sql))
        pool = await self.pool(keyspace, shard)
        conn = await pool.acquire()
        finished = False
        try:
            cur = await conn.cursor(aiomysql.SSCursor)
            try:
                await cur.execute(sql)
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args and isinstance(e.args[0], int) else 1105
                raise ShardError(keyspace, shard, code, str(e.args[-1])) from e
            fields = fields_of(cur)
            first = True
            while True:
                rows = await cur.fetchmany(200)
                if not rows:
                    break
                yield Result(fields=fields if first else [], rows=[tuple(r) for r in rows])
                first = False
            if first:
                yield Result(fields=fields)
            finished = True
        finally:
            if not finished:
                conn.close()  # unread rows: drop the connection rather than drain it
            pool.release(conn)

    async def tracked_schema(self, keyspaces: Sequence[str] = ("commerce", "lookup")) -> TrackedSchema:
        """Each keyspace's columns from its first shard, as the proxy's schema tracker reads them."""
        schema = TrackedSchema({})
        for ks in keyspaces:
            shard = self._vschema.shards(ks)[0]
            res = await self.execute_shard(ks, shard, COLUMNS_QUERY.format(db="database()"))
            schema = schema.replace_keyspace(ks, tables_from_rows(res.rows))
        return schema

    @property
    def in_transaction(self) -> bool:
        return False

    @asynccontextmanager
    async def scratch(self, keyspace: str, shard: str) -> AsyncIterator[ScratchConnection]:
        pool = await self.pool(keyspace, shard)
        conn = await pool.acquire()
        sc = ScratchConnection(keyspace, shard, conn, self.statements)
        try:
            yield sc
        finally:
            if sc.broken:
                conn.close()
            pool.release(conn)

    async def next_sequence_values(self, keyspace: str, table: str, count: int) -> int:
        shard = self._vschema.shards(keyspace)[0]

        async def run(sql: str) -> Result:
            return await self.execute_shard(keyspace, shard, sql)

        return await self.sequences.next_values(keyspace, table, count, run)
