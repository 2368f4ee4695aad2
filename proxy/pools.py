"""Per-shard connection pools (aiomysql) that return text-protocol results.

Connections are opened with no value converters and ``use_unicode=False`` so rows
arrive as the raw bytes the shard sent (see ``proxy.engine.result``): nothing is
decoded unless a primitive needs to compare or compute.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiomysql
import pymysql

from proxy.engine.result import Field, Result
from proxy.errors import ProxyError, ShardError, ShardUnavailable

logger = logging.getLogger(__name__)

# Client-side codes meaning "the connection, not the statement, failed".
_CONNECTION_ERRORS = {2002, 2003, 2006, 2013, 2014, 2055}
STREAM_BATCH_ROWS = 1000


@dataclass(frozen=True, slots=True)
class ShardAddress:
    keyspace: str
    shard: str
    host: str
    port: int
    user: str
    password: str
    database: str


def _text(v: str | bytes) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def fields_of(result: object) -> list[Field]:
    return [
        Field(
            name=_text(f.name),
            type=f.type_code,
            charset=f.charsetnr,
            length=f.length,
            flags=f.flags,
            decimals=f.scale,
            table=_text(f.table_name),
            org_table=_text(f.org_table),
            db=_text(f.db),
            org_name=_text(f.org_name),
        )
        for f in result.fields  # type: ignore[attr-defined]
    ]


class ShardConnection:
    """One checked-out shard connection; statements run on it in order."""

    def __init__(self, pool: ShardPool, conn: aiomysql.Connection) -> None:
        self.pool = pool
        self.conn = conn
        self.broken = False

    @property
    def keyspace(self) -> str:
        return self.pool.address.keyspace

    @property
    def shard(self) -> str:
        return self.pool.address.shard

    def _translate(self, exc: BaseException) -> Exception:
        return self.pool.translate(exc, self)

    async def execute(self, sql: str) -> Result:
        try:
            await self.conn.query(sql)
        except (pymysql.err.MySQLError, OSError, asyncio.IncompleteReadError) as e:
            raise self._translate(e) from e
        r = self.conn._result  # aiomysql keeps the last MySQLResult here
        if r is None or not r.description:
            return Result(
                affected_rows=max(r.affected_rows or 0, 0) if r else 0,
                insert_id=(r.insert_id or 0) if r else 0,
                warnings=(r.warning_count or 0) if r else 0,
                info=(r.message or b"").decode("utf-8", "replace") if r else "",
            )
        return Result(fields=fields_of(r), rows=list(r.rows or ()), warnings=r.warning_count or 0)

    async def stream(
        self, sql: str, batch_rows: int = STREAM_BATCH_ROWS, keep_on_abandon: bool = False
    ) -> AsyncIterator[Result]:
        """Unbuffered read: chunks of at most ``batch_rows`` rows, fields first.

        If the consumer stops early the connection is marked broken (closing it is
        the only way to stop MySQL sending the rest of a large result), unless
        ``keep_on_abandon`` (a connection pinned to a transaction): then the rest is
        read and dropped so the transaction survives."""
        finished = False
        try:
            try:
                await self.conn.query(sql, unbuffered=True)
            except (pymysql.err.MySQLError, OSError, asyncio.IncompleteReadError) as e:
                raise self._translate(e) from e
            r = self.conn._result
            if r is None or not r.description:
                finished = True
                yield Result(affected_rows=max(r.affected_rows or 0, 0) if r else 0,
                             insert_id=(r.insert_id or 0) if r else 0)
                return
            fields: list[Field] | None = fields_of(r)
            read_row = r._read_rowdata_packet_unbuffered
            while True:
                rows = []
                try:
                    while len(rows) < batch_rows:
                        row = await read_row()
                        if row is None:
                            finished = True
                            break
                        rows.append(row)
                except (pymysql.err.MySQLError, OSError, asyncio.IncompleteReadError) as e:
                    raise self._translate(e) from e
                # The first chunk carries the fields with the first rows, so a small
                # result is one chunk (and one write to the client).
                if fields is not None:
                    yield Result(fields=fields, rows=rows)
                    fields = None
                elif rows:
                    yield Result(rows=rows)
                if finished:
                    return
        finally:
            if not finished and not self.broken:
                r = self.conn._result
                if keep_on_abandon and r is not None and getattr(r, "unbuffered_active", False):
                    await self._interrupt(r)
                else:
                    self.broken = True


    async def _interrupt(self, r: object) -> None:
        """Stop the running statement but keep the connection and its transaction:
        KILL QUERY from a side connection, then read what was already sent."""
        try:
            async with self.pool.connection() as side:
                await side.execute(f"kill query {self.conn.server_thread_id[0]}")
            await r._finish_unbuffered_query()  # type: ignore[attr-defined]
        except ProxyError:
            self.broken = True
        except pymysql.err.MySQLError as e:
            if not (e.args and e.args[0] in (1317, 1927)):  # interrupted, as intended
                self.broken = True
        except (OSError, asyncio.IncompleteReadError):
            self.broken = True


class ShardPool:
    """A pool of connections to one shard's primary."""

    def __init__(self, address: ShardAddress, minsize: int = 1, maxsize: int = 32) -> None:
        self.address = address
        self.minsize = minsize
        self.maxsize = maxsize
        self._pool: aiomysql.Pool | None = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return f"{self.address.keyspace}/{self.address.shard}"

    async def _ensure_pool(self) -> aiomysql.Pool:
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is None:
                a = self.address
                try:
                    self._pool = await aiomysql.create_pool(
                        minsize=0,
                        maxsize=self.maxsize,
                        host=a.host,
                        port=a.port,
                        user=a.user,
                        password=a.password,
                        db=a.database,
                        autocommit=True,
                        conv={},
                        use_unicode=False,
                        charset="utf8mb4",
                        pool_recycle=3600,
                        connect_timeout=5,
                    )
                except (pymysql.err.MySQLError, OSError) as e:
                    raise self.translate(e, None) from e
        return self._pool

    def translate(self, exc: BaseException, conn: ShardConnection | None) -> Exception:
        a = self.address
        code = exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None
        if isinstance(exc, (OSError, asyncio.IncompleteReadError)) or code in _CONNECTION_ERRORS or (
            isinstance(exc, pymysql.err.InterfaceError)
        ):
            if conn is not None:
                conn.broken = True
            logger.warning("shard unavailable", extra={"keyspace": a.keyspace, "shard": a.shard, "error": str(exc)})
            return ShardUnavailable(a.keyspace, a.shard, str(exc.args[-1] if exc.args else exc))
        if isinstance(exc, pymysql.err.MySQLError) and isinstance(code, int):
            return ShardError(a.keyspace, a.shard, code, str(exc.args[1]) if len(exc.args) > 1 else str(exc))
        return ShardUnavailable(a.keyspace, a.shard, repr(exc))

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[ShardConnection]:
        sc = await self.acquire()
        try:
            yield sc
        finally:
            self.release(sc)

    async def acquire(self) -> ShardConnection:
        pool = await self._ensure_pool()
        try:
            conn = await pool.acquire()
        except (pymysql.err.MySQLError, OSError) as e:
            raise self.translate(e, None) from e
        return ShardConnection(self, conn)

    def release(self, sc: ShardConnection) -> None:
        assert self._pool is not None
        if sc.broken:
            sc.conn.close()
        self._pool.release(sc.conn)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()
            self._pool = None


class ShardPools:
    """All shard pools of a cluster, keyed by (keyspace, shard)."""

    def __init__(self, addresses: list[ShardAddress], maxsize: int = 32) -> None:
        self.pools = {(a.keyspace, a.shard): ShardPool(a, maxsize=maxsize) for a in addresses}

    def get(self, keyspace: str, shard: str) -> ShardPool:
        try:
            return self.pools[(keyspace, shard)]
        except KeyError:
            from proxy.errors import ProxyError

            raise ProxyError(1105, f"no such shard: {keyspace}/{shard}") from None

    async def close(self) -> None:
        await asyncio.gather(*(p.close() for p in self.pools.values()), return_exceptions=False)
