"""A message manager's own shard links for its claims (the conditional postpone UPDATE).

A claim is one autocommit UPDATE answering one OK packet, sent once per batch (about one per
50 messages in bench_messaging). Through the shard pool it went through aiomysql's layers
(pool acquire, the ``ShardConnection.stream`` generator, a packet read awaited at a time):
67-88 us of proxy CPU per 50-id claim against 32-39 us over a ``ShardLink`` (the fast path's
connection: one write, the OK framed in ``data_received``, one future), measured on one shard
of this machine, 1000 claims alternating (BENCHMARKS.md, msgproxy). So the manager keeps up to
its postpone cap of idle links of its own, opened on first use with no session settings (a
pooled connection carries the settings of the client session that used it last).

Where no link can be had (the pool is not a ``ShardPool``, or opening one failed less than
``RETRY_AFTER_S`` ago) ``affected_rows`` answers None and the caller takes the pool.
"""

from __future__ import annotations

import asyncio
import logging

from proxy.errors import ShardError
from proxy.fast_path.shard_link import LinkError, OkAnswer, ShardLink, lenenc
from proxy.pools import ShardPool

logger = logging.getLogger(__name__)

# After a link could not be opened, claims take the pool for this long before the next try.
RETRY_AFTER_S = 1.0


class ClaimLinks:
    """Idle links of one manager to its shard, at most ``size`` kept."""

    def __init__(self, pool: object, size: int) -> None:
        self.pool = pool if isinstance(pool, ShardPool) else None
        self.size = size
        self.idle: list[ShardLink] = []
        self._failed_at = float("-inf")
        self._closed = False

    async def _take(self) -> ShardLink | None:
        idle = self.idle
        while idle:
            link = idle.pop()
            if link.transport is not None and not link.broken:
                return link
        pool = self.pool
        if pool is None or self._closed:
            return None
        loop = asyncio.get_running_loop()
        if loop.time() - self._failed_at < RETRY_AFTER_S:
            return None
        try:
            return await ShardLink.open(pool)
        except (LinkError, OSError, TimeoutError) as e:
            self._failed_at = loop.time()
            logger.info("messaging: claim link not opened", extra={"shard": pool.name, "error": str(e)})
            return None

    async def affected_rows(self, sql: str) -> int | None:
        """Run ``sql`` (a statement answering OK) on a link: the rows it changed; None when no
        link is at hand (the caller runs it on the pool). A shard error is raised as the pool
        raises it (``ShardError``, ``ShardUnavailable``)."""
        link = await self._take()
        if link is None:
            return None
        answer = OkAnswer(asyncio.get_running_loop())
        keep = False
        try:
            link.query(sql.encode(), answer)
            data, error = await answer.done
            # The shard's error leaves the link in step; a lost link or a result set does not.
            keep = error is None or isinstance(error, ShardError)
        finally:
            if keep and not self._closed and len(self.idle) < self.size:
                self.idle.append(link)
            else:
                link.close()  # cancelled, lost or out of step mid-response: never reused
        if error is not None:
            raise error
        affected, _ = lenenc(data, 5)
        return affected

    def reopen(self) -> None:
        """The manager opens again after ``close``: links may be kept again."""
        self._closed = False

    def close(self) -> None:
        """Close the idle links; those of claims still running close when their answer comes."""
        self._closed = True
        for link in self.idle:
            link.close()
        self.idle.clear()
