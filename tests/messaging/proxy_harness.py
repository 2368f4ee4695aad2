"""End-to-end harness: message tables prepared on the real shards, proxy processes over them,
and a STREAM reader over aiomysql's SSCursor (the way applications subscribe)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomysql

from proxy.cluster_state import ClusterState
from proxy.messaging.manager import MessageManager
from proxy.pools import ShardPools
from proxy.server import ProxyServer
from tests.messaging.conftest import MESSAGE_DDL, run_sql
from tests.proxy_process import ProxyProcess, free_port, start_proxy, stop_proxy

# Vitess's end-to-end comment, used for every table of the acceptance scenarios.
VITESS_COMMENT = "vitess_message,vt_ack_wait=1,vt_purge_after=3,vt_batch_size=2,vt_cache_size=10,vt_poller_interval=1"
SHARDED_TABLE = "customer_events"  # commerce, hash vindex on id (examples/local)
COMMERCE_SHARDS = ("-80", "80-")
UNSHARDED_TABLES = {
    "unsharded_message": ("", VITESS_COMMENT),
    "vitess_message3": (",\n  msg1 VARCHAR(128),\n  msg2 BIGINT", VITESS_COMMENT),
    "vitess_message4": (",\n  msg1 VARCHAR(128),\n  msg2 BIGINT", VITESS_COMMENT.replace(
        "vitess_message,", "vitess_message,vt_message_cols=id|msg1,")),
}  # fmt: skip


async def prepare_tables(pools: ShardPools, comment: str = VITESS_COMMENT) -> str:
    """Give customer_events Vitess's test comment (or ``comment``), create the unsharded
    tables; returns the original comment of customer_events (restored by ``restore_tables``)."""
    original = await run_sql(
        pools.get("commerce", "-80"),
        "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
        f" AND TABLE_NAME = '{SHARDED_TABLE}'",
    )
    for shard in COMMERCE_SHARDS:
        pool = pools.get("commerce", shard)
        await run_sql(pool, f"ALTER TABLE {SHARDED_TABLE} COMMENT '{comment}'")
        await run_sql(pool, f"DELETE FROM {SHARDED_TABLE}")
    lookup = pools.get("lookup", "0")
    for name, (extra, comment) in UNSHARDED_TABLES.items():
        await run_sql(lookup, f"DROP TABLE IF EXISTS {name}")
        await run_sql(lookup, MESSAGE_DDL.format(name=name, extra=extra, comment=comment))
    return (original.rows[0][0] or b"").decode()


async def restore_tables(pools: ShardPools, comment: str) -> None:
    for shard in COMMERCE_SHARDS:
        pool = pools.get("commerce", shard)
        await run_sql(pool, f"DELETE FROM {SHARDED_TABLE}")
        await run_sql(pool, f"ALTER TABLE {SHARDED_TABLE} COMMENT '{comment}'")
    for name in UNSHARDED_TABLES:
        await run_sql(pools.get("lookup", "0"), f"DROP TABLE IF EXISTS {name}")


async def clear_tables(pools: ShardPools) -> None:
    for shard in COMMERCE_SHARDS:
        await run_sql(pools.get("commerce", shard), f"DELETE FROM {SHARDED_TABLE}")
    for name in UNSHARDED_TABLES:
        await run_sql(pools.get("lookup", "0"), f"DELETE FROM {name}")


def launch_proxy(cluster: Any, log_dir: Path, name: str) -> ProxyProcess:
    return start_proxy(cluster.config.path, cluster.endpoints, log_dir / f"{name}.log")


def end_proxy(p: ProxyProcess) -> None:
    stop_proxy(p)


async def connect(p: ProxyProcess, db: str | None) -> aiomysql.Connection:
    return await aiomysql.connect(host=p.host, port=p.port, user="root", password="", db=db, autocommit=True)


async def sql(p: ProxyProcess, db: str, statement: str) -> tuple[int, list[tuple]]:
    """One statement through the proxy on a fresh connection: (affected rows, rows)."""
    conn = await connect(p, db)
    try:
        async with conn.cursor() as cur:
            affected = await cur.execute(statement)
            rows = list(await cur.fetchall()) if cur.description else []
        return int(affected), rows
    finally:
        conn.close()


@dataclass
class ProxyStream:
    """``SET WORKLOAD = OLAP; STREAM * FROM t`` read by a background task into a queue, so a
    test can wait with a timeout without cancelling a half-read packet."""

    conn: aiomysql.Connection
    fields: list[tuple] = field(default_factory=list)
    queue: asyncio.Queue[tuple[float, tuple] | BaseException] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, p: ProxyProcess, db: str, statement: str, olap: bool = True) -> ProxyStream:
        conn = await connect(p, db)
        s = cls(conn)
        try:
            if olap:
                async with conn.cursor() as cur:
                    await cur.execute("SET WORKLOAD = OLAP")
            cur = await conn.cursor(aiomysql.SSCursor)
            await cur.execute(statement)
        except BaseException:
            conn.close()
            raise
        s.fields = list(cur.description or [])
        s.task = asyncio.ensure_future(s._read(cur))
        return s

    async def _read(self, cur: aiomysql.SSCursor) -> None:
        try:
            while True:
                row = await cur.fetchone()
                if row is None:
                    self.queue.put_nowait(EOFError("stream ended"))
                    return
                self.queue.put_nowait((time.monotonic(), tuple(row)))
        except Exception as e:  # handed to the test, which raises it
            self.queue.put_nowait(e)

    @property
    def names(self) -> list[str]:
        return [d[0] for d in self.fields]

    async def rows(self, count: int, within: float = 5.0) -> list[tuple]:
        got: list[tuple] = []
        deadline = time.monotonic() + within
        while len(got) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"got {len(got)} of {count} rows: {got}")
            try:
                async with asyncio.timeout(remaining):
                    item = await self.queue.get()
            except TimeoutError:
                raise TimeoutError(f"got {len(got)} of {count} rows: {got}") from None
            if isinstance(item, BaseException):
                raise item
            got.append(item[1])
        return got

    async def nothing_for(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                item = await self.queue.get()
        except TimeoutError:
            return
        raise AssertionError(f"unexpected delivery: {item}")

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.conn.close()


async def wait_until_no_subscribers(p: ProxyProcess, within: float = 10.0) -> None:
    """The proxy notices a closed stream at its next client check (every 0.2 s): wait for it, so
    a stream of the previous test never takes a message meant for the next one."""
    deadline = time.monotonic() + within
    while True:
        _, rows = await sql(p, "commerce", "SHOW VITESS_MESSAGES")
        if all(int(r[10]) == 0 for r in rows):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"subscribers still attached: {rows}")
        await asyncio.sleep(0.05)


@dataclass
class Served:
    """A proxy served in the test's own process (its state readable by the test) over the
    prepared message tables."""

    state: ClusterState
    port: int

    async def connect(self) -> aiomysql.Connection:
        return await aiomysql.connect(host="127.0.0.1", port=self.port, user="root", password="", db="commerce",
                                      autocommit=True)

    def manager(self, shard: str) -> MessageManager:
        return self.state.messaging.managers[("commerce", shard, SHARDED_TABLE)]

    def fast_statements(self, shard: str) -> int:
        links = self.state.fast_links.get("commerce", shard)
        assert links is not None
        return links.served

    def read_back(self) -> int:
        """Insert transactions the watch's decoders sent this proxy (whatever the manager did)."""
        total = 0
        for shard in COMMERCE_SHARDS:
            c = self.manager(shard).counters
            total += c.binlog_wakeups + c.binlog_covered
        return total

    def cached(self) -> int:
        return sum(self.manager(s).counters.inserts_cached for s in COMMERCE_SHARDS)


@contextlib.asynccontextmanager
async def served_in_process(cluster: Any, pools: ShardPools, comment: str = VITESS_COMMENT) -> AsyncIterator[Served]:
    """The message tables prepared (customer_events with ``comment``), a proxy serving them in
    this process; all undone after."""
    original = await prepare_tables(pools, comment)
    state = ClusterState(cluster.config, cluster.endpoints)
    await state.start()
    server = ProxyServer(state)
    port = free_port()
    await server.start_server(host="127.0.0.1", port=port)
    try:
        yield Served(state, port)
    finally:
        server.close()
        await server.wait_closed()
        await state.close()
        await restore_tables(pools, original)
