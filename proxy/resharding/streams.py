"""Driving one workflow's data movement: schema, copy, then catch-up until stopped.

:class:`WorkflowStreams` is what the host (:mod:`proxy.resharding.host`) runs for a workflow in
state Copying/Running (sources -> targets) or Switched (the reverse stream, targets -> sources),
and what ``vdiff`` and the switch run up to a given position. It owns its connections and closes
them in ``close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from proxy.cdc.binlog_decoder import connect_shard, connection_kwargs
from proxy.cdc.positions import GtidPosition
from proxy.config import ClusterConfig, ShardEndpoint
from proxy.resharding.catchup import HEARTBEAT_SECONDS, CatchupStream, reached
from proxy.resharding.denied_writes import BYPASS_SQL
from proxy.resharding.row_copy import CopyProgress, copy_source
from proxy.resharding.row_routing import RowRouter
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.table_schema import TableSchema, create_tables, read_tables
from proxy.resharding.workflow import Workflow, WorkflowChanged, WorkflowState, WorkflowStore

logger = logging.getLogger(__name__)

# Idle streams report their position this often during a switch: the writes held meanwhile wait
# for it once the sources' last transaction is applied.
SWITCH_HEARTBEAT_SECONDS = 0.05
STREAM_START_SECONDS = 30.0


def _current_position(endpoint: ShardEndpoint) -> GtidPosition:
    conn = connect_shard(**connection_kwargs(endpoint))
    try:
        with conn.cursor() as cur:
            cur.execute("select @@gtid_binlog_pos")
            (pos,) = cur.fetchone()
        return GtidPosition.parse(str(pos or ""))
    finally:
        conn.close()


async def current_position(endpoint: ShardEndpoint) -> GtidPosition:
    """The shard's newest binlog position (``@@gtid_binlog_pos``)."""
    return await asyncio.to_thread(_current_position, endpoint)


@dataclass(frozen=True)
class SourceLag:
    source: str
    target: str
    applied: str
    source_position: str
    lag_seconds: float


class WorkflowStreams:
    def __init__(
        self,
        config: ClusterConfig,
        store: WorkflowStore,
        workflow: Workflow,
        endpoints: Mapping[str, ShardEndpoint],
        vschema: Mapping[str, Any] | None = None,
    ) -> None:
        """``vschema``: the keyspace's vschema in force (``ClusterView.vschema``); default the file's."""
        self.config = config
        self.store = store
        self.workflow = workflow
        self.endpoints = dict(endpoints)
        doc = config.keyspaces[workflow.keyspace].vschema if vschema is None else vschema
        self.router = RowRouter(workflow.keyspace, doc, workflow.streaming_targets)
        self.copy_progress = CopyProgress()
        self.catchups: dict[str, CatchupStream] = {}
        self._writers: dict[str, ShardWriter] = {}
        self._tables: list[TableSchema] = []

    async def open(self) -> None:
        wf = self.workflow
        self._tables = await read_tables(self.endpoints[wf.streaming_sources[0]])
        for table in self._tables:
            self.router.route(table.name)  # refuses a table with no shard to go to, before any write
        for target in wf.streaming_targets:
            await create_tables(self.endpoints[target], self._tables)
            # Writes pass the deny triggers: a switch leaves them on the shards that lost traffic,
            # which the reverse stream then keeps up to date.
            self._writers[target] = await ShardWriter.open(wf.keyspace, target, self.endpoints[target], (BYPASS_SQL,))

    async def close(self) -> None:
        writers, self._writers = self._writers, {}
        await asyncio.gather(*(w.close() for w in writers.values()), return_exceptions=True)

    # -- copy ----------------------------------------------------------------------------------

    async def copy(self) -> None:
        """Copy what is left (state Copying), then move the workflow to Running."""
        wf = self.workflow
        lock = asyncio.Lock()

        async def first_snapshot(source: str, gtid: str) -> None:
            async with lock:
                if source in self.workflow.copy_start:
                    return
                self.workflow = self.workflow.with_state(
                    self.workflow.state, copy_start={**self.workflow.copy_start, source: gtid}
                )
                if not await self.store.save(self.workflow, if_state=WorkflowState.COPYING):
                    raise WorkflowChanged(self.workflow.name)

        await asyncio.gather(
            *(
                copy_source(
                    wf, source, self.endpoints[source], self._tables, self.router, self._writers,
                    self.store, self.copy_progress, first_snapshot, self.config.resharding.copy_chunk_rows,
                )
                for source in wf.streaming_sources
            )
        )
        self.workflow = self.workflow.with_state(WorkflowState.RUNNING)
        if not await self.store.save(self.workflow, if_state=WorkflowState.COPYING):
            raise WorkflowChanged(self.workflow.name)  # leave the state as the command set it
        logger.info("copy finished", extra={"workflow": wf.name, "rows": self.copy_progress.total})

    # -- catch-up ------------------------------------------------------------------------------

    async def _streams(self, stop_at: Mapping[str, GtidPosition] | None, heartbeat_seconds: float = HEARTBEAT_SECONDS) -> list[CatchupStream]:
        wf = self.workflow
        by_name = {t.name: t for t in self._tables}
        streams = []
        for source in wf.streaming_sources:
            stream = CatchupStream(
                wf.name, wf.keyspace, source, self.endpoints[source], by_name, self.router, self._writers,
                stop_at=None if stop_at is None else stop_at[source], heartbeat_seconds=heartbeat_seconds,
            )
            start = wf.copy_start.get(source)
            if start is None:
                # The reverse stream starts where the switch left the (then final) targets.
                start = str(await current_position(self.endpoints[source]))
            await stream.load_positions(start)
            self.catchups[source] = stream
            streams.append(stream)
        return streams

    async def follow(self) -> None:
        """Apply the sources' changes to the targets until cancelled."""
        streams = await self._streams(None)
        await asyncio.gather(*(s.run() for s in streams))

    @asynccontextmanager
    async def follow_until_told(self) -> AsyncIterator[Callable[[Mapping[str, GtidPosition], float], Awaitable[None]]]:
        """Follow the sources (in a task) for the block, which gets ``finish(goal, timeout)``: stop
        at exactly ``goal`` once reached. The switch denies writes in between, so the streams are
        already running and only the last transactions remain (stall in milliseconds, not the
        seconds a stream takes to start)."""
        streams = await self._streams(None, heartbeat_seconds=SWITCH_HEARTBEAT_SECONDS)
        async def run_all() -> None:
            await asyncio.gather(*(s.run() for s in streams))

        task = asyncio.create_task(run_all(), name=f"reshard-switch-{self.workflow.name}")

        async def finish(goal: Mapping[str, GtidPosition], timeout_seconds: float) -> None:
            for stream in streams:
                stream.stop_at = goal[stream.source]
            async with asyncio.timeout(timeout_seconds):
                await asyncio.shield(task)

        try:
            # A binlog stream takes a moment to start (its decoder process): writes are only denied
            # once every stream is live, or the stall would include that start.
            async with asyncio.timeout(STREAM_START_SECONDS):
                live = asyncio.gather(*(s.live.wait() for s in streams))
                waiting: list[asyncio.Future[Any]] = [task, live]
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    live.cancel()
                    task.result()  # a stream failed: raise its error
            yield finish
        finally:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def catch_up_to(self, goal: Mapping[str, GtidPosition], timeout_seconds: float) -> None:
        """Apply exactly up to ``goal`` (per source shard) and stop; TimeoutError past the timeout."""
        streams = await self._streams(goal)
        async with asyncio.timeout(timeout_seconds):
            await asyncio.gather(*(s.run() for s in streams))

    async def lag(self) -> list[SourceLag]:
        """Per (source, target): applied position, the source's newest, seconds behind."""
        return await workflow_lag(self.workflow, self.endpoints, self._writers)


async def workflow_lag(
    workflow: Workflow, endpoints: Mapping[str, ShardEndpoint], writers: Mapping[str, ShardWriter]
) -> list[SourceLag]:
    now = time.time()
    out = []
    for source in workflow.streaming_sources:
        newest = await current_position(endpoints[source])
        for target in workflow.streaming_targets:
            applied_by_source = await writers[target].applied(workflow.name)
            gtid, commit_time = applied_by_source.get(source, ("", 0.0))
            applied = GtidPosition.parse(gtid)
            caught_up = reached(applied, newest)
            lag = 0.0 if caught_up else max(0.0, now - commit_time) if commit_time else float("inf")
            out.append(SourceLag(source, target, gtid, str(newest), lag))
    return out
