"""Row changes of one table across its keyspace's shards — what the messaging manager
needs to learn at once about message rows written directly on a shard.

``changes()`` yields ``TableRowChange(shard, op, row, vgtid)``: ``row`` is the after image
for inserts and updates and the before image for deletes (so the row can be evicted by its
key). A feed made with ``row_images=False`` decodes no row at all and offers ``touches()``
instead: one ``TableTouch(shard, op, received_at)`` per committed transaction and kind of
change (what a "new messages, poll now" wake-up needs, at a fraction of the decoding).
``on_ddl(keyspace, statement)``, if given, is called for every DDL the stream sees (the
proxy's schema tracker re-reads the keyspace).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from proxy.cdc.binlog_decoder import ALL_ROW_OPS, ShardEndpointLike
from proxy.cdc.events import DdlEvent, EventGroup, RowOp
from proxy.cdc.positions import Vgtid
from proxy.cdc.start_positions import ShardKey
from proxy.cdc.vstream import VStream


@dataclass(frozen=True, slots=True)
class TableRowChange:
    shard: str
    op: RowOp
    row: dict[str, Any]
    vgtid: Vgtid


@dataclass(frozen=True, slots=True)
class TableTouch:
    """A committed transaction changed the table on ``shard`` (``op``: how); its commit was
    read from the binlog at ``received_at`` (this host's ``time.time()``)."""

    shard: str
    op: RowOp
    received_at: float


class TableChangeFeed:
    def __init__(
        self,
        endpoints: Mapping[ShardKey, ShardEndpointLike],
        keyspace: str,
        table: str,
        start: str | Vgtid = "current",
        row_ops: frozenset[str] = ALL_ROW_OPS,
        on_ddl: Callable[[str, str], None] | None = None,
        row_images: bool = True,
        end_shards_at_journal: bool = False,
        skip_annotated: bytes = b"",
    ) -> None:
        """``end_shards_at_journal``: a shard's feed ends at a resharding journal (for a follower
        that is restarted on the new shards anyway, as messaging's change watch is).
        ``skip_annotated``: statements whose text holds these bytes are not read (touches only)."""
        if skip_annotated and row_images:
            raise ValueError("skip_annotated drops rows: for a feed without row images only")
        shards = {key: ep for key, ep in endpoints.items() if key[0] == keyspace}
        self._on_ddl = on_ddl
        self._row_images = row_images
        self._stream = VStream(
            shards, [f"{keyspace}.{table}"], start=start, row_ops=row_ops, row_images=row_images,
            end_shards_at_journal=end_shards_at_journal, skip_annotated=skip_annotated,
        )

    @property
    def vgtid(self) -> Vgtid:
        return self._stream.vgtid

    async def __aenter__(self) -> TableChangeFeed:
        await self._stream.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stream.aclose()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def _groups(self) -> AsyncIterator[EventGroup]:
        async for group in self._stream:
            if group.vgtid is None:
                continue
            if self._on_ddl is not None and group.row_count == 0:
                for e in group.events:
                    if isinstance(e, DdlEvent):
                        self._on_ddl(e.keyspace, e.statement)
            yield group

    async def touches(self) -> AsyncIterator[TableTouch]:
        """One item per committed transaction and kind of row change of the table."""
        async for group in self._groups():
            for op in dict.fromkeys(event.op for event in group.row_events()):
                yield TableTouch(group.shard, op, group.received_at)

    async def changes(self) -> AsyncIterator[TableRowChange]:
        if not self._row_images:
            raise ValueError("a feed without row images has touches(), not changes()")
        async for group in self._groups():
            vgtid = group.vgtid
            assert vgtid is not None
            for event in group.row_events():
                for change in event.changes:
                    row = change.before if event.op is RowOp.DELETE else change.after
                    assert row is not None
                    yield TableRowChange(group.shard, event.op, row, vgtid)
