"""Catch-up: targets follow a source shard's binlog, change by change (Vitess's VReplication).

One :class:`~proxy.cdc.vstream.VStream` per source shard, started at the oldest position any of
its targets has applied. Each source transaction is split by target (:class:`RowRouter`); a target
gets its rows as ``REPLACE`` (inserts, and updates' after images) and ``DELETE`` by primary key
(deletes, and updates whose key or target changed), together with the source position after the
transaction, in one target transaction. A target that already holds a transaction (its saved
position includes the GTID) skips it, so a restart neither loses nor repeats a change. Idle
sources still advance every target's position (stream heartbeats), which is what ``lag`` and the
switch's "caught up to the final position" read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from proxy.cdc.binlog_decoder import ShardEndpointLike
from proxy.cdc.events import CommitEvent, EventGroup, RowEvent, RowOp
from proxy.cdc.positions import Gtid, GtidPosition, Vgtid
from proxy.cdc.vstream import VStream
from proxy.resharding.row_routing import SIDECAR_PREFIX, RowRouter, delete_sql, replace_sql
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.table_schema import TableSchema

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 0.5


def reached(position: GtidPosition, goal: GtidPosition) -> bool:
    """Whether ``position`` includes every transaction of ``goal``."""
    return all(position.includes(gtid) for gtid in goal)


def oldest(positions: list[GtidPosition]) -> GtidPosition:
    """Per replication domain, the earliest of ``positions`` (where every one can resume from)."""
    by_domain: dict[int, Gtid] = {}
    for position in positions:
        for gtid in position:
            current = by_domain.get(gtid.domain)
            if current is None or gtid.seq < current.seq:
                by_domain[gtid.domain] = gtid
    return GtidPosition(by_domain.values())


@dataclass
class SourceProgress:
    """Where each target is in one source's binlog; for lag and the switch."""

    applied: dict[str, GtidPosition] = field(default_factory=dict)
    last_commit_time: float = 0.0  # the source commit time of the last change applied
    last_event_at: float = field(default_factory=time.time)  # when the stream last showed progress


class CatchupStream:
    def __init__(
        self,
        workflow: str,
        keyspace: str,
        source: str,
        endpoint: ShardEndpointLike,
        tables: Mapping[str, TableSchema],
        router: RowRouter,
        writers: Mapping[str, ShardWriter],
        stop_at: GtidPosition | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.workflow = workflow
        self.keyspace = keyspace
        self.source = source
        self.endpoint = endpoint
        self.tables = tables
        self.router = router
        self.writers = writers
        # Where to stop; may be set while the stream runs (the switch sets it once writes are
        # denied): it is checked after every transaction and idle heartbeat.
        self.stop_at = stop_at
        self.heartbeat_seconds = heartbeat_seconds
        self.progress = SourceProgress()
        self.live = asyncio.Event()  # set once the binlog stream delivered its first group

    async def load_positions(self, copy_start: str) -> None:
        """Each target's applied position of this source (the copy's start where none yet)."""
        for target, writer in self.writers.items():
            applied = await writer.applied(self.workflow)
            if self.source in applied:
                gtid, commit_time = applied[self.source]
            else:
                # Recorded at once, so lag and the switch see it even while the source stays idle.
                gtid, commit_time = copy_start, time.time()
                await writer.write([writer.position_sql(self.workflow, self.source, gtid, commit_time)])
            self.progress.applied[target] = GtidPosition.parse(gtid)
            self.progress.last_commit_time = max(self.progress.last_commit_time, commit_time)

    def lag_seconds(self) -> float:
        """Seconds between now and the source commit of the newest change applied (0 when an idle
        source's heartbeat found every target holding everything)."""
        last = self.progress.last_commit_time
        return max(0.0, time.time() - last) if last else 0.0

    def caught_up_to(self, goal: GtidPosition) -> bool:
        return all(reached(p, goal) for p in self.progress.applied.values())

    async def run(self) -> None:
        """Apply the source's changes until cancelled, or until every target reached ``stop_at``."""
        if self.stop_at is not None and self.caught_up_to(self.stop_at):
            return
        start = oldest(list(self.progress.applied.values()))
        key = (self.keyspace, self.source)
        stream = VStream(
            {key: self.endpoint},
            [f"{self.keyspace}.*"],
            start=Vgtid.from_positions({key: start}),
            heartbeat_interval=self.heartbeat_seconds,
            shard_heartbeat_period=self.heartbeat_seconds,
        )
        async with stream:
            async for group in stream:
                self.live.set()
                assert group.vgtid is not None
                position = GtidPosition.parse(group.vgtid.position_of(self.keyspace, self.source) or "")
                if group.is_heartbeat:
                    await self._advance_idle(position)
                else:
                    await self._apply(group, position)
                self.progress.last_event_at = time.time()
                if self.stop_at is not None and self.caught_up_to(self.stop_at):
                    return

    async def _advance_idle(self, position: GtidPosition) -> None:
        """No change for a while: record the position every target has reached anyway."""
        behind = [t for t, p in self.progress.applied.items() if p != position and reached(position, p)]
        if self.stop_at is not None and not reached(self.stop_at, position):
            return  # never record past the stop position (a vdiff compares at exactly it)
        if not behind:
            return
        # An idle source whose targets hold everything: no lag, as of now.
        self.progress.last_commit_time = time.time()
        await asyncio.gather(
            *(
                self.writers[t].write(
                    [self.writers[t].position_sql(self.workflow, self.source, str(position), self.progress.last_commit_time)]
                )
                for t in behind
            )
        )
        for t in behind:
            self.progress.applied[t] = position

    async def _apply(self, group: EventGroup, position: GtidPosition) -> None:
        gtid = next((Gtid.parse(e.gtid) for e in group.events if isinstance(e, CommitEvent)), None)
        statements: dict[str, list[str]] = {t: [] for t in self.writers}
        for event in group.events:
            if isinstance(event, RowEvent):
                self._statements(event, statements)
        writes = []
        for target, sqls in statements.items():
            if gtid is not None and self.progress.applied[target].includes(gtid):
                continue  # this target committed the transaction before a restart
            writer = self.writers[target]
            sqls.append(writer.position_sql(self.workflow, self.source, str(position), group.commit_time))
            writes.append((target, writer.write(sqls)))
        await asyncio.gather(*(w for _, w in writes))
        for target, _ in writes:
            self.progress.applied[target] = position
        self.progress.last_commit_time = group.commit_time

    def _statements(self, event: RowEvent, out: dict[str, list[str]]) -> None:
        table_name = event.table_name.split(".", 1)[1]
        table = self.tables.get(table_name)
        if table is None or table_name.startswith(SIDECAR_PREFIX):
            if not table_name.startswith(SIDECAR_PREFIX):
                logger.warning(
                    "change to a table the workflow did not copy ignored",
                    extra={"workflow": self.workflow, "table": table_name},
                )
            return
        route = self.router.route(table_name)
        pk = table.pk_columns
        for change in event.changes:
            before, after = change.before, change.after
            if event.op is RowOp.INSERT and after is not None:
                for t in self.router.targets_of(route, after):
                    out[t].append(replace_sql(table_name, table.columns, [after]))
            elif event.op is RowOp.DELETE and before is not None:
                for t in self.router.targets_of(route, before):
                    out[t].append(delete_sql(table_name, pk, [before]))
            elif before is not None and after is not None:
                old_targets = self.router.targets_of(route, before)
                new_targets = self.router.targets_of(route, after)
                moved = any(before[c] != after[c] for c in pk)
                for t in old_targets:
                    if moved or t not in new_targets:
                        out[t].append(delete_sql(table_name, pk, [before]))
                for t in new_targets:
                    out[t].append(replace_sql(table_name, table.columns, [after]))
