"""Learning of message rows written *around* the proxy at once, from the shards' binlogs.

A commit through this proxy already notifies the managers. Rows inserted directly on a shard,
or committed through another proxy process, are otherwise found by the next poll. With a change
watch (Vitess's messager does the same with a vstream on the table) every committed insert into
the table wakes that shard's manager, which then polls: the row itself decides, as always,
whether and when it is sent.

What it reads is the least that answers "were rows inserted, and when was that commit read":
only insert events (the claim and ack updates of every message would otherwise be read too),
and of those not a single row (``TableChangeFeed(row_images=False)``): the shard's decoder
process never decodes a row, and the proxy process receives one small item per transaction.
Decoding every inserted message a second time cost 55 µs of decoder CPU and 10 µs of proxy
CPU per message in ``bench_messaging`` (2 shards, 100-row inserts), about half the machine's
throughput; see BENCHMARKS.md. The manager drops the wake-up when a poll has started since the
commit was read, or when it is the commit of one of the proxy's own inserts, already cached
from its values (``MessageManager.binlog_insert``).

The watch runs while the table has subscribers, and a failed binlog stream is retried after
``RETRY_SECONDS`` (Vitess: 5 s).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from proxy.cdc.binlog_decoder import ShardEndpointLike
from proxy.cdc.table_feed import TableChangeFeed

logger = logging.getLogger(__name__)

RETRY_SECONDS = 5.0
_INSERTS = frozenset({"insert"})


class TableChangeWatch:
    """Calls ``on_insert(shard, received_at)`` for every committed transaction that inserted
    into one table (``received_at``: when the shard's binlog showed its commit, ``time.time()``)."""

    def __init__(
        self,
        endpoints: Mapping[tuple[str, str], ShardEndpointLike],
        keyspace: str,
        table: str,
        on_insert: Callable[[str, float], None],
        on_ddl: Callable[[str, str], None] | None = None,
        skip_annotated: bytes = b"",
    ) -> None:
        """``skip_annotated``: this process's mark for the table (``own_mark.needle``): the
        decoders drop its own INSERTs' rows unread."""
        self.endpoints = endpoints
        self.keyspace = keyspace
        self.table = table
        self.on_insert = on_insert
        self.on_ddl = on_ddl  # (keyspace, statement) for each DDL the binlog shows
        self.skip_annotated = skip_annotated
        self.failures = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                # A resharding switch ends a source's feed at its journal; the messaging service
                # then starts a watch on the new shards (MessagingService.set_shards).
                async with TableChangeFeed(
                    self.endpoints, self.keyspace, self.table, row_ops=_INSERTS, on_ddl=self.on_ddl, row_images=False,
                    end_shards_at_journal=True, skip_annotated=self.skip_annotated,
                ) as feed:
                    async for touch in feed.touches():
                        self.on_insert(touch.shard, touch.received_at)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a shard stream failed: the poller still covers us
                self.failures += 1
                logger.warning(
                    "message change watch failed; retrying",
                    extra={"keyspace": self.keyspace, "table": self.table, "error": repr(e), "retry_s": RETRY_SECONDS},
                )
            await asyncio.sleep(RETRY_SECONDS)
