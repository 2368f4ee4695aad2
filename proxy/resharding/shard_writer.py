"""Writing copied and replicated rows into a target shard, with the applied binlog position.

Each target keeps, per (workflow, source shard), the GTID position of the source's binlog it has
applied, in the sidecar table ``reshard_pos`` (``_shardgate.reshard_pos``, or the keyspace
database's ``_shardgate_reshard_pos`` where ``_shardgate`` cannot be created). Replicated changes
and their position are committed in one transaction: after a crash the target resumes from
exactly what it holds, neither losing nor repeating a change (Vitess's VReplication keeps its
``pos`` in ``_vt.vreplication`` the same way).

PyMySQL connections (blocking; every call runs in a thread): rows travel as typed Python values,
rendered back by :func:`proxy.resharding.row_routing.value_literal`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pymysql

from proxy.cdc.binlog_decoder import ShardEndpointLike, connect_shard, connection_kwargs
from proxy.pools import ShardAddress, ShardPool
from proxy.sidecar_tables import ensure_sidecar_table
from sqltext.quoting import sql_literal

logger = logging.getLogger(__name__)

POSITION_TABLE = "reshard_pos"


def _create_position_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " workflow varbinary(255) not null,"
        " source_shard varbinary(255) not null,"
        " gtid varbinary(4096) not null,"
        " applied_at datetime(6) not null,"
        " source_commit_time double not null default 0,"
        " primary key (workflow, source_shard)"
        ") engine=InnoDB comment 'shardgate: Reshard binlog position applied per source (proxy/resharding/shard_writer.py)'"
    )


async def position_table(keyspace: str, shard: str, endpoint: ShardEndpointLike) -> str:
    """The qualified name of ``reshard_pos`` on the shard (created where missing)."""
    e = endpoint
    pool = ShardPool(
        ShardAddress(keyspace, shard, e.host, e.port, e.user, e.password, e.database, e.socket), maxsize=1
    )
    try:
        async with pool.connection() as sc:
            return await ensure_sidecar_table(sc, e.database, POSITION_TABLE, _create_position_table)
    finally:
        await pool.close()


class ShardWriter:
    """One connection to a shard that rows are written into."""

    def __init__(self, keyspace: str, shard: str, endpoint: ShardEndpointLike, positions: str, session_sql: Sequence[str] = ()) -> None:
        self.keyspace = keyspace
        self.shard = shard
        self.endpoint = endpoint
        self.positions = positions
        self._session_sql = tuple(session_sql)
        self._conn: pymysql.Connection | None = None
        # One connection, used from worker threads: the streams of several sources (a merge)
        # write to the same target, one at a time.
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, keyspace: str, shard: str, endpoint: ShardEndpointLike, session_sql: Sequence[str] = ()) -> ShardWriter:
        writer = cls(keyspace, shard, endpoint, await position_table(keyspace, shard, endpoint), session_sql)
        await asyncio.to_thread(writer._connection)  # fails here when the shard is unreachable
        return writer

    def _connection(self) -> pymysql.Connection:
        if self._conn is None or not self._conn.open:
            conn = connect_shard(**connection_kwargs(self.endpoint), database=self.endpoint.database, autocommit=True)
            try:
                with conn.cursor() as cur:
                    for sql in self._session_sql:
                        cur.execute(sql)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _run(self, statements: Sequence[str]) -> None:
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                if len(statements) == 1:  # one statement is atomic in autocommit: two round trips fewer
                    cur.execute(statements[0])
                    return
                cur.execute("begin")
                for sql in statements:
                    cur.execute(sql)
                cur.execute("commit")
        except BaseException:
            # A failed statement leaves the transaction open; the connection goes with it (MariaDB
            # rolls back on disconnect) and the next call opens a fresh one.
            self._conn = None
            conn.close()
            raise

    async def write(self, statements: Sequence[str]) -> None:
        """Run ``statements`` in one transaction."""
        if statements:
            async with self._lock:
                await asyncio.to_thread(self._run, statements)

    def position_sql(self, workflow: str, source: str, gtid: str, commit_time: float) -> str:
        return (
            f"insert into {self.positions} (workflow, source_shard, gtid, applied_at, source_commit_time) values "
            f"({sql_literal(workflow)}, {sql_literal(source)}, {sql_literal(gtid)}, utc_timestamp(6), {float(commit_time)!r}) "
            "on duplicate key update gtid = values(gtid), applied_at = values(applied_at), "
            "source_commit_time = values(source_commit_time)"
        )

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        conn = self._connection()
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())

    async def query(self, sql: str) -> list[tuple[Any, ...]]:
        async with self._lock:
            return await asyncio.to_thread(self._query, sql)

    async def applied(self, workflow: str) -> dict[str, tuple[str, float]]:
        """source shard -> (applied GTID position, its last transaction's commit time)."""
        rows = await self.query(
            f"select source_shard, gtid, source_commit_time from {self.positions} where workflow = {sql_literal(workflow)}"
        )
        return {_str(s): (_str(g), float(t)) for s, g, t in rows}

    async def forget(self, workflow: str) -> None:
        await self.write([f"delete from {self.positions} where workflow = {sql_literal(workflow)}"])

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await asyncio.to_thread(conn.close)


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
