"""Learning of message rows written *around* the proxy at once, from the shards' binlogs.

A commit through this proxy already notifies the managers. Rows inserted directly on a shard,
or committed through another proxy process, are otherwise found by the next poll. With a change
watch (Vitess's messager does the same with a vstream on the table) every insert of an unacked
row wakes that shard's manager, which then polls: the row itself decides, as always, whether and
when it is sent. Only inserts are read: the claim and ack updates of every message would
otherwise be decoded too (2.5x the cost), and a rescheduling UPDATE is found by the next poll. The watch runs while the table has subscribers, and a
failed binlog stream is retried after ``RETRY_SECONDS`` (Vitess: 5 s).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from proxy.cdc.binlog_decoder import ShardEndpointLike
from proxy.cdc.events import RowOp
from proxy.cdc.table_feed import TableChangeFeed

logger = logging.getLogger(__name__)

RETRY_SECONDS = 5.0
_INSERTS = frozenset({"insert"})


def wants_delivery(row: Mapping[str, object], now_ns: int) -> bool:
    """An after image worth a poll: unacked, and not one of our own postpones (claims push
    ``time_next`` into the future with ``epoch > 0``; acks set ``time_acked``)."""
    if row.get("time_acked"):
        return False
    epoch = row.get("epoch") or 0
    time_next = row.get("time_next")
    return not (isinstance(epoch, int) and epoch > 0 and isinstance(time_next, int) and time_next > now_ns)


class TableChangeWatch:
    """Calls ``on_change(shard)`` for every insert/update of an unacked row of one table."""

    def __init__(
        self,
        endpoints: Mapping[tuple[str, str], ShardEndpointLike],
        keyspace: str,
        table: str,
        on_change: Callable[[str], None],
        on_ddl: Callable[[str, str], None] | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.keyspace = keyspace
        self.table = table
        self.on_change = on_change
        self.on_ddl = on_ddl  # (keyspace, statement) for each DDL the binlog shows
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
                    self.endpoints, self.keyspace, self.table, row_ops=_INSERTS, on_ddl=self.on_ddl,
                    end_shards_at_journal=True,
                ) as feed:
                    async for change in feed.changes():
                        if change.op is not RowOp.DELETE and wants_delivery(change.row, time.time_ns()):
                            self.on_change(change.shard)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a shard stream failed: the poller still covers us
                self.failures += 1
                logger.warning(
                    "message change watch failed; retrying",
                    extra={"keyspace": self.keyspace, "table": self.table, "error": repr(e), "retry_s": RETRY_SECONDS},
                )
            await asyncio.sleep(RETRY_SECONDS)
