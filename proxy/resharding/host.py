"""The workflow host: runs the Reshard workflows found in the store, in ``shardgate up``/``serve``.

Every ``poll_seconds`` it reads the workflows and the serving topology, then:

- (``up`` only) starts the local instances of shards the topology knows and the cluster file does
  not (a workflow's targets: started on ``create``, and again on every ``up``), and stops those of
  shards the topology forgot (a cancelled workflow's targets, a completed one's sources; the data
  dirs stay);
- for every workflow in state Copying/Running/Switched, tries to take its lock (one host per
  workflow, whatever the number of proxies), then copies what is left and follows the binlogs
  (:class:`WorkflowStreams`) until the workflow leaves that state (a vdiff, a switch, cancel...) or
  the host stops. A stream that fails (a shard down) is retried after ``retry_seconds``: the
  positions on the targets make the restart exact.

Progress (rows copied per table, lag per source and target) is published to /metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from proxy.cluster import LocalCluster
from proxy.config import ClusterConfig
from proxy.observability import metrics
from proxy.resharding.cluster_view import ClusterView
from proxy.resharding.streams import WorkflowStreams
from proxy.resharding.topology import KeyspaceTopology
from proxy.resharding.workflow import Workflow, WorkflowChanged, WorkflowState

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
RETRY_SECONDS = 2.0
METRICS_SECONDS = 2.0


def runnable(workflow: Workflow) -> bool:
    return workflow.state.streams_forward or workflow.state is WorkflowState.SWITCHED


@dataclass
class _Running:
    task: asyncio.Task[None] | None = None
    streams: WorkflowStreams | None = None


class WorkflowHost:
    def __init__(
        self,
        config: ClusterConfig,
        local_cluster: LocalCluster | None = None,
        *,
        poll_seconds: float = POLL_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self.config = config
        self.view = ClusterView(config)
        self.local_cluster = local_cluster
        self.poll_seconds = poll_seconds
        self.retry_seconds = retry_seconds
        self._running: dict[str, _Running] = {}
        self._stopped_shards: set[tuple[str, str]] = set()

    async def run(self) -> None:
        """Until cancelled; cancels and awaits every workflow task on the way out."""
        try:
            while True:
                try:
                    await self.poll_once()
                except Exception as e:  # the store shard down: try again at the next poll
                    logger.warning("reshard host poll failed", extra={"error": str(e)})
                await asyncio.sleep(self.poll_seconds)
        finally:
            await self.stop_all()
            await self.view.close()

    async def poll_once(self) -> None:
        workflows = await self.view.store.list()
        topologies = await self.view.topologies()
        if self.local_cluster is not None:
            await self._local_instances(topologies)
        wanted = {w.name: w for w in workflows if runnable(w)}
        for name, running in list(self._running.items()):
            if name not in wanted or running.task is None or running.task.done():
                await self._stop(name)
        for name, workflow in wanted.items():
            if name not in self._running:
                entry = _Running()
                entry.task = asyncio.create_task(self._host(workflow, entry), name=f"reshard-{name}")
                self._running[name] = entry
        self._publish()

    async def _local_instances(self, topologies: dict[str, KeyspaceTopology]) -> None:
        cluster = self.local_cluster
        assert cluster is not None
        store = self.config.vschema_store_location
        known = set()
        for keyspace, topology in topologies.items():
            for shard, spec in topology.shards.items():
                key = (keyspace, shard)
                known.add(key)
                if spec.local is None:
                    continue
                wanted = spec.local.spec(keyspace, shard)
                try:
                    current = cluster.local_shard(keyspace, shard)
                except KeyError:
                    current = None
                if current is not None and current.port == wanted.port and cluster.is_running(keyspace, shard):
                    continue
                if current is not None and current.port != wanted.port and cluster.is_running(keyspace, shard):
                    if key == store:
                        logger.error("a reshard shard replaces the vschema store's shard; not started", extra={"shard": shard})
                        continue
                    await cluster.stop_shard(keyspace, shard)  # a retired shard of the same name
                logger.info("starting reshard shard", extra={"keyspace": keyspace, "shard": shard, "port": wanted.port})
                await cluster.start_added_shard(wanted)
                self._stopped_shards.discard(key)
        for local in cluster.local_shards:
            key = local.key
            if key in known or key == store or key in self._stopped_shards:
                continue
            if cluster.is_running(*key):
                logger.info("stopping retired shard (data dir kept)", extra={"keyspace": key[0], "shard": key[1]})
                await cluster.stop_shard(*key)
                self._stopped_shards.add(key)

    async def _host(self, workflow: Workflow, entry: _Running) -> None:
        name = workflow.name
        async with self.view.store.locked(name, 0) as held:
            if not held:
                return  # another host runs it
            while True:
                current = await self.view.store.get(name)
                if current is None or not runnable(current):
                    return
                streams = WorkflowStreams(self.config, self.view.store, current, await self.view.endpoints(current.keyspace),
                                          await self.view.vschema(current.keyspace))
                entry.streams = streams
                try:
                    await streams.open()
                    if current.state is WorkflowState.COPYING:
                        await streams.copy()
                    logger.info("reshard streams following", extra={"workflow": name, "reversed": current.reversed})
                    await streams.follow()
                except asyncio.CancelledError:
                    raise
                except WorkflowChanged:
                    return  # the next poll sees the new state
                except Exception as e:
                    logger.warning(
                        "reshard streams failed; retrying",
                        extra={"workflow": name, "error": f"{type(e).__name__}: {e}", "retry_seconds": self.retry_seconds},
                    )
                finally:
                    await streams.close()
                await asyncio.sleep(self.retry_seconds)

    async def _stop(self, name: str) -> None:
        entry = self._running.pop(name, None)
        if entry is None:
            return
        if entry.task is not None:
            entry.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entry.task

    async def stop_all(self) -> None:
        for name in list(self._running):
            await self._stop(name)

    def _publish(self) -> None:
        for name, entry in self._running.items():
            streams = entry.streams
            if streams is None:
                continue
            for (source, table), rows in streams.copy_progress.rows.items():
                metrics.RESHARD_ROWS_COPIED.labels(name, source, table).set(rows)
            for source, stream in streams.catchups.items():
                metrics.RESHARD_LAG_SECONDS.labels(name, source).set(stream.lag_seconds())
