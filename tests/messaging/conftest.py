"""Fixtures for messaging tests: shard pools over the session's real local cluster, message
tables created per test (small ack waits and poll intervals so behaviour shows in < 1 s), and
a service/manager harness that reads deliveries the way the front end does."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from proxy.cdc.table_feed import TableChangeFeed
from proxy.engine.result import Result
from proxy.messaging import change_watch
from proxy.messaging.manager import MessageManager
from proxy.messaging.service import MessagingService
from proxy.pools import ShardAddress, ShardPool, ShardPools

FAST = "vt_ack_wait=0.5,vt_purge_after=1,vt_batch_size=2,vt_cache_size=10,vt_poller_interval=0.2"
MESSAGE_DDL = """CREATE TABLE {name} (
  id BIGINT NOT NULL,
  priority TINYINT NOT NULL DEFAULT 50,
  epoch BIGINT NOT NULL DEFAULT 0,
  time_next BIGINT DEFAULT 0,
  time_acked BIGINT DEFAULT NULL,
  tenant_id BIGINT,
  message JSON{extra},
  PRIMARY KEY (id),
  INDEX poller_idx (time_acked, priority, time_next DESC)
) ENGINE=InnoDB COMMENT '{comment}'"""


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shard_pools(local_cluster) -> AsyncIterator[ShardPools]:
    addresses = [
        ShardAddress.of(ks, shard, e)
        for (ks, shard), e in sorted(local_cluster.endpoints.items())
    ]
    pools = ShardPools(addresses, maxsize=16)
    try:
        yield pools
    finally:
        await pools.close()


async def run_sql(pool: ShardPool, sql: str) -> Result:
    async with pool.connection() as sc:
        return await sc.execute(sql)


@dataclass
class TableMaker:
    pools: ShardPools
    created: list[tuple[str, str, str]]
    prefix: str

    async def create(
        self,
        keyspace: str = "lookup",
        comment: str = f"vitess_message,{FAST}",
        extra: str = "",
        suffix: str = "",
        shards: list[str] | None = None,
    ) -> str:
        """A fresh message table on every given shard (default: all shards of the keyspace)."""
        name = (self.prefix + suffix)[:64]
        for shard in shards or [s for ks, s in self.pools.pools if ks == keyspace]:
            pool = self.pools.get(keyspace, shard)
            await run_sql(pool, f"DROP TABLE IF EXISTS {name}")
            await run_sql(pool, MESSAGE_DDL.format(name=name, extra=extra, comment=comment))
            self.created.append((keyspace, shard, name))
        return name


@pytest_asyncio.fixture(loop_scope="session")
async def tables(shard_pools, request) -> AsyncIterator[TableMaker]:
    prefix = "m_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:50]
    maker = TableMaker(shard_pools, [], prefix)
    try:
        yield maker
    finally:
        for ks, shard, name in maker.created:
            await run_sql(shard_pools.get(ks, shard), f"DROP TABLE IF EXISTS {name}")


SHARDS = {"commerce": ["-80", "80-"], "lookup": ["0"]}


@pytest_asyncio.fixture(loop_scope="session")
async def service(shard_pools) -> AsyncIterator[MessagingService]:
    svc = MessagingService(shard_pools, SHARDS)
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


class Stream:
    """A subscription read the way the front end reads it: fields, then batch by batch.

    A read that times out stays pending and is picked up by the next read, so waiting for
    "nothing arrives" never cancels (and thereby ends) the subscription."""

    def __init__(self, it: AsyncIterator[Result]) -> None:
        self.it = it
        self.fields: list = []
        self._pending: asyncio.Future[Result] | None = None

    async def open(self) -> Stream:
        first = await self.it.__anext__()
        self.fields = first.fields
        return self

    async def _next(self, within: float) -> Result | None:
        if self._pending is None:
            self._pending = asyncio.ensure_future(self.it.__anext__())
        done, _ = await asyncio.wait({self._pending}, timeout=within)
        if not done:
            return None
        done_future, self._pending = self._pending, None
        return done_future.result()

    async def batch(self, within: float = 5.0) -> list[tuple]:
        result = await self._next(within)
        if result is None:
            raise TimeoutError(f"no batch within {within}s")
        return [tuple(None if v is None else v.decode() for v in row) for row in result.rows]

    async def rows(self, count: int, within: float = 5.0) -> list[tuple]:
        got: list[tuple] = []
        deadline = time.monotonic() + within
        while len(got) < count:
            got.extend(await self.batch(max(deadline - time.monotonic(), 0.001)))
        return got

    async def nothing_for(self, seconds: float) -> None:
        result = await self._next(seconds)
        assert result is None, f"unexpected delivery: {result.rows if result else None}"

    async def close(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            if not pending.done():
                pending.cancel()  # ends the subscription (its generator's finally runs)
                try:
                    await pending
                except (asyncio.CancelledError, StopAsyncIteration):
                    pass
            elif pending.exception() is not None:
                # The stream already ended with an error nobody read: the test did not expect it.
                raise pending.exception()  # type: ignore[misc]
        await self.it.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def subscribe(service) -> AsyncIterator[Callable[..., Awaitable[Stream]]]:
    opened: list[Stream] = []

    async def open_stream(keyspace: str, table: str, shards=None, where=None) -> Stream:
        s = await Stream(service.subscribe(keyspace, table, shards, where)).open()
        opened.append(s)
        return s

    try:
        yield open_stream
    finally:
        for s in opened:
            await s.close()


def now_ns() -> int:
    return time.time_ns()


async def until(condition: Callable[[], bool], within: float = 10.0, what: str = "condition") -> None:
    """Wait for a background effect (a manager's poll, a purge pass, a binlog watch) instead
    of sleeping a fixed time that a slower or busier machine outlasts."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within}s")
        await asyncio.sleep(0.01)


async def first_poll_over(*managers: MessageManager, within: float = 10.0) -> None:
    """A subscriber's arrival makes its manager poll at once; until that poll is over a row
    written meanwhile may be found by it (not by the mechanism a test means to show), and its
    count is not settled. (A fixed 0.3 s sleep raced it: a poll held 0.3 s failed 3 tests.)"""
    def over(m: MessageManager) -> bool:  # (several arrivals may have asked for a second poll)
        return m.counters.polls >= 1 and not m._polling and not m._poll_requested.is_set()

    await until(lambda: all(over(m) for m in managers), within, "the subscribers' first poll")


@pytest.fixture
def watch_opened(monkeypatch) -> Callable[..., Awaitable[None]]:
    """``await watch_opened(table)``: until a binlog change watch of ``table`` has opened its
    feed (its start positions read): every commit into the table after that reaches it.

    The watch starts the shards' decoder processes first; a fixed sleep raced them (a watch
    started 1 s late failed 4 tests). The real feed runs; it only reports that it opened."""
    opened: set[str] = set()

    class ReportingFeed(TableChangeFeed):
        def __init__(self, endpoints: Any, keyspace: str, table: str, *args: Any, **kwargs: Any) -> None:
            super().__init__(endpoints, keyspace, table, *args, **kwargs)
            self.reported_table = table

        async def __aenter__(self) -> TableChangeFeed:
            feed = await super().__aenter__()
            opened.add(self.reported_table)
            return feed

    monkeypatch.setattr(change_watch, "TableChangeFeed", ReportingFeed)

    async def wait(table: str, within: float = 20.0) -> None:
        await until(lambda: table in opened, within, f"the change watch of {table} open")

    return wait


@pytest.fixture
def lookup_pool(shard_pools) -> ShardPool:
    return shard_pools.get("lookup", "0")
