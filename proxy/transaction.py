"""A session's multi-shard transaction: one pinned connection per shard touched.

Commit is best-effort across shards, like Vitess's default (non-2PC) mode: shards
commit one after another and a failure is reported naming the shards that did and
did not commit, so nothing is silently half-applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from proxy.errors import ProxyError
from proxy.pools import ShardConnection, ShardPools

logger = logging.getLogger(__name__)


class ShardTransaction:
    def __init__(
        self,
        pools: ShardPools,
        begin_sql: str = "begin",
        settings: Callable[[], Mapping[str, str]] = dict,
        next_isolation: str | None = None,
    ) -> None:
        self.pools = pools
        self.begin_sql = begin_sql
        self.settings = settings
        self.next_isolation = next_isolation  # SET TRANSACTION ... for this transaction only
        self.conns: dict[tuple[str, str], ShardConnection] = {}

    async def connection(self, keyspace: str, shard: str) -> ShardConnection:
        key = (keyspace, shard)
        sc = self.conns.get(key)
        if sc is not None:
            return sc
        pool = self.pools.get(keyspace, shard)
        sc = await pool.acquire()
        try:
            await sc.apply_settings(self.settings())
            if self.next_isolation:
                await sc.execute(f"set transaction {self.next_isolation}")
            await sc.execute(self.begin_sql)
        except BaseException:
            sc.broken = True
            pool.release(sc)
            raise
        self.conns[key] = sc
        return sc

    async def commit(self) -> None:
        committed: list[str] = []
        try:
            for (ks, shard), sc in list(self.conns.items()):
                try:
                    await sc.execute("commit")
                except ProxyError as e:
                    failed = f"{ks}/{shard}"
                    rest = [f"{k}/{s}" for (k, s) in self.conns if f"{k}/{s}" not in committed and f"{k}/{s}" != failed]
                    await self._rollback_quietly(exclude=set(committed) | {failed})
                    raise ProxyError(
                        e.code,
                        f"commit failed on shard {failed}: {e.message}; "
                        f"committed: [{', '.join(committed)}]; rolled back: [{', '.join(rest)}]",
                        e.sqlstate,
                    ) from e
                committed.append(f"{ks}/{shard}")
        finally:
            self.release_all()

    async def rollback(self) -> None:
        try:
            errors = await self._rollback_quietly(exclude=set())
            if errors:
                raise errors[0]
        finally:
            self.release_all()

    async def _rollback_quietly(self, exclude: set[str]) -> list[ProxyError]:
        errors: list[ProxyError] = []
        for (ks, shard), sc in self.conns.items():
            if f"{ks}/{shard}" in exclude:
                continue
            try:
                await sc.execute("rollback")
            except ProxyError as e:
                # The connection is discarded below; MySQL rolls back on disconnect.
                sc.broken = True
                logger.warning("rollback failed", extra={"keyspace": ks, "shard": shard, "error": str(e)})
                errors.append(e)
        return errors

    def release_all(self) -> None:
        conns, self.conns = self.conns, {}
        for sc in conns.values():
            sc.pool.release(sc)
