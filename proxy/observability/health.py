"""Shard health for ``/debug/health`` and the status page: a ``SELECT 1`` on a pooled
connection of every shard, cached ``ttl`` seconds so that probes hitting the endpoint
often cost the shards nothing more; concurrent requests share one round of pings."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from proxy.errors import ProxyError
from proxy.pools import ShardPool, ShardPools

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShardHealth:
    keyspace: str
    shard: str
    ok: bool
    ping_ms: float | None
    error: str


@dataclass(frozen=True, slots=True)
class Health:
    at: float  # epoch seconds of the check
    shards: tuple[ShardHealth, ...]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.shards)


class HealthCheck:
    def __init__(self, pools: ShardPools, ttl: float = 1.5, timeout: float = 2.0) -> None:
        self.pools = pools
        self.ttl = ttl
        self.timeout = timeout
        self._last: Health | None = None
        self._last_mono = 0.0
        self._running: asyncio.Task[Health] | None = None

    async def check(self) -> Health:
        if self._last is not None and time.monotonic() - self._last_mono < self.ttl:
            return self._last
        if self._running is None:
            self._running = asyncio.ensure_future(self._check_all())
        task = self._running
        try:
            # shielded: one waiter going away does not cancel the round the others wait for
            return await asyncio.shield(task)
        finally:
            if task.done() and self._running is task:
                self._running = None

    async def close(self) -> None:
        task, self._running = self._running, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _check_all(self) -> Health:
        shards = await asyncio.gather(*(self._ping(p) for _, p in sorted(self.pools.pools.items())))
        health = Health(time.time(), tuple(shards))
        self._last, self._last_mono = health, time.monotonic()
        return health

    async def _ping(self, pool: ShardPool) -> ShardHealth:
        a = pool.address
        error = ""
        for _attempt in range(2):  # an idle connection may be stale after the shard restarted
            started = time.perf_counter()
            try:
                async with asyncio.timeout(self.timeout):
                    async with pool.connection() as sc:
                        await sc.execute("select 1")
                return ShardHealth(a.keyspace, a.shard, True, (time.perf_counter() - started) * 1000, "")
            except ProxyError as e:
                error = e.message
            except TimeoutError:
                error = f"no answer within {self.timeout:g} s"
        logger.warning("shard unhealthy", extra={"keyspace": a.keyspace, "shard": a.shard, "error": error})
        return ShardHealth(a.keyspace, a.shard, False, None, error)
