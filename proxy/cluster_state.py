"""What every session of one proxy process shares: the cluster's topology and vschema,
the tracked schema, the shard pools and the services that keep them current (live vschema,
schema tracking, messaging, topics, 2PC resolver, observability, processlist).

A plain object: it answers questions about the cluster (which shards a keyspace has, where
a statement that any shard can answer goes) and starts/stops its services, but executes no
client statement; ``proxy.executor`` does that.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proxy import twopc
from proxy.config import ClusterConfig, ShardEndpoint
from proxy.engine.sequence import SequenceAllocator
from proxy.errors import ProxyError
from proxy.fast_path.shard_link import LinkPools
from proxy.http_listener import HttpListener, start_http_listener
from proxy.live_vschema import LiveVSchema
from proxy.messaging.dml import MessageDml
from proxy.messaging.service import MessagingService
from proxy.observability.metrics import TOPOLOGY_VERSION
from proxy.observability.service import Observability
from proxy.pools import ShardAddress, ShardPools
from proxy.processlist import ProcessList
from proxy.resharding.topology import KeyspaceTopology, cluster_topology, read_topology
from proxy.resharding.write_hold import WriteHold
from proxy.schema_tracker import SchemaTracker
from proxy.topics.service import TopicService, TopicWrite
from proxy.worker_peers import WorkerSlot
from vschema.loader import build_vschema
from vschema.model import VSchema

if TYPE_CHECKING:
    from vschema.tracked_schema import TrackedSchema

logger = logging.getLogger(__name__)

# A keyspace and one of its shards.
ShardTarget = tuple[str, str]


class ClusterState:
    """Everything the sessions of one process share."""

    def __init__(
        self,
        config: ClusterConfig,
        endpoints: Mapping[tuple[str, str], ShardEndpoint],
        pool_size: int = 32,
        worker: WorkerSlot | None = None,
    ) -> None:
        self.config = config
        # The client sessions (SHOW PROCESSLIST, KILL); a worker reaches its siblings' too.
        self.processlist = ProcessList(worker, config.transaction_timeout)
        self.endpoints = dict(endpoints)
        # Which shards serve each keyspace (proxy/resharding/topology.py): the cluster file's
        # until a reshard's switch stores another; the live vschema's poll follows the store.
        self.file_topology = cluster_topology(config, self.endpoints)
        self.topology: dict[str, KeyspaceTopology] = dict(self.file_topology)
        self.vschema: VSchema = build_vschema(
            {name: (ks.vschema, self.shard_names(name)) for name, ks in config.keyspaces.items()},
            config.routing_rules or None,
        )
        # The vschema reads route by: the same object unless a reads-only resharding switch
        # sends a keyspace's reads to other shards than its writes (see ProxySession.routing_vschema).
        self.read_vschema: VSchema = self.vschema
        addresses = [
            ShardAddress.of(ks, shard, e)
            for (ks, shard), e in sorted(self.endpoints.items())
        ]
        self.pools = ShardPools(addresses, maxsize=pool_size)
        self.fast_links = LinkPools(self.pools, maxsize=pool_size)  # the fast path's shard connections
        # The cluster's vschema lives in the cluster (the files only seed it): read at start,
        # changed by ALTER VSCHEMA / CREATE QUEUE, followed from every proxy process.
        self.live_vschema = LiveVSchema(
            self, *config.vschema_store_location, poll_seconds=config.vschema_store.poll_seconds
        )
        self.sequences = SequenceAllocator()
        self.messaging = MessagingService(
            self.pools,
            {ks: self.shard_names(ks) for ks in config.keyspaces},
            watch_changes=config.messaging.binlog_watch,
            on_ddl=self.ddl_seen,
        )
        self.schema_tracker = SchemaTracker(
            self.pools,
            {ks: self.shard_names(ks) for ks in config.keyspaces},
            {key: e.database for key, e in self.endpoints.items()},
            refresh_seconds=config.schema_tracking.refresh_seconds,
        )
        self.topics = TopicService(self, config.topics)
        # Writes refused by a source shard at a resharding switch wait for the new topology.
        self.write_hold = WriteHold(self.shard_names, config.resharding.write_hold_seconds)
        self.observability = Observability(self)
        self.http: HttpListener | None = None  # when config.http is set
        # Global variables as a shard has them, read once (proxy.system_variables).
        self.global_variables: dict[str, Any] = {}

    @property
    def schema(self) -> TrackedSchema:
        """The shards' tables and columns (schema tracking): immutable, replaced on change."""
        return self.schema_tracker.schema

    async def start(self) -> None:
        await self.live_vschema.start()
        for keyspace in self.config.keyspaces:  # a stored topology read at start: messaging follows it
            if self.topology[keyspace] != self.file_topology[keyspace]:
                await self.messaging.set_shards(keyspace, self.shard_names(keyspace))
        await self.processlist.start()
        await self.schema_tracker.start()
        twopc.start_for_proxy(self)  # the in-doubt transaction resolver, from start-up on
        await self.messaging.start()
        await self.topics.start()
        self.observability.start()
        if self.config.http is not None:
            self.http = await start_http_listener(
                self.config.http, self.config.users, [self.topics.mount_http, self.observability.mount_http]
            )

    async def close(self) -> None:
        await self.live_vschema.stop()
        if self.http is not None:
            await self.http.stop()
        await self.observability.stop()
        await self.topics.stop()
        await self.schema_tracker.close()
        await self.messaging.stop()
        await twopc.stop_for_proxy(self)
        await self.processlist.stop()
        await self.fast_links.close()
        await self.pools.close()

    # -- topology ------------------------------------------------------------------
    def shard_names(self, keyspace: str) -> list[str]:
        """The shards serving ``keyspace`` now, in key-range order."""
        return list(self.topology[keyspace].serving)

    def read_shard_names(self, keyspace: str) -> list[str]:
        """The shards serving reads of ``keyspace`` now (they differ from ``shard_names`` only
        after a reads-only resharding switch)."""
        return list(self.topology[keyspace].reads)

    def install_topology(
        self, topologies: Mapping[str, KeyspaceTopology], vschema: VSchema, read_vschema: VSchema | None = None
    ) -> set[str]:
        """Serve ``topologies`` with ``vschema`` (built on their serving shards) and
        ``read_vschema`` (on their read shards; default ``vschema``) from now on: pools for
        shards that start serving, then the swap (new statements plan and route by it), then
        the pools of shards that stopped serving retired (their connections close once idle:
        a transaction running there finishes there). Returns the keyspaces whose topology
        changed; held writes look again."""
        changed = {ks for ks, t in topologies.items() if self.topology.get(ks) != t}
        for ks in sorted(changed):
            t = topologies[ks]
            self.endpoints.update(t.endpoints)  # every known shard: CDC resumes on retired ones
            for shard in t.routed:
                e = t.endpoint(shard)
                address = ShardAddress.of(ks, shard, e)
                self.pools.ensure(address)
                twopc.manager_for(self).add_shard(address)  # a twopc decision may live there now
        before, self.topology = self.topology, dict(topologies)
        self.vschema = vschema
        self.read_vschema = vschema if read_vschema is None else read_vschema
        for ks in sorted(changed):
            serving = self.shard_names(ks)
            routed = topologies[ks].routed
            for shard in before[ks].routed:
                if shard not in routed:
                    self.pools.retire(ks, shard)
            self.schema_tracker.set_shards(ks, serving, {s: self.database_of(ks, s) for s in serving})
            TOPOLOGY_VERSION.labels(ks).set(topologies[ks].version)
            logger.info("serving topology installed", extra={"keyspace": ks, "version": topologies[ks].version,
                                                             "serving": ",".join(serving),
                                                             "reading": ",".join(topologies[ks].reads)})
        if changed:
            self.write_hold.topology_changed()
        return changed

    async def locate_shard(self, key: tuple[str, str]) -> ShardEndpoint | None:
        """Where any shard the topology knows listens, serving or not (a CDC stream resuming on
        a reshard's sources, or moving to its targets at the journal): from what this process
        follows, else from the store (the switch may be newer than the last poll)."""
        endpoint = self.endpoints.get(key)
        if endpoint is not None:
            return endpoint
        topology = (await read_topology(self.config, self.file_topology_endpoints)).get(key[0])
        spec = topology.shards.get(key[1]) if topology is not None else None
        return spec.endpoint if spec is not None else None

    @property
    def file_topology_endpoints(self) -> dict[tuple[str, str], ShardEndpoint]:
        return {key: e for t in self.file_topology.values() for key, e in t.endpoints.items()}

    async def topology_followed(self, keyspace: str) -> None:
        """After a topology change of ``keyspace``: message managers stop on retired shards and
        start on new ones, their subscribers carried over."""
        await self.messaging.set_shards(keyspace, self.shard_names(keyspace))

    def database_of(self, keyspace: str, shard: str) -> str:
        return self.endpoints[(keyspace, shard)].database

    def is_sharded(self, keyspace: str) -> bool:
        return bool(self.vschema.keyspaces[keyspace].sharded)

    def default_shard(self, keyspace: str | None, target: ShardTarget | None = None) -> ShardTarget:
        """Where a statement that any shard of ``keyspace`` can answer goes (SHOW, SET's
        check, a proxy-function SELECT): the session's ``target`` shard when it targets that
        keyspace (``USE ks:-80``), else the keyspace's first shard. No keyspace: the
        target's, else the first keyspace (sorted)."""
        if keyspace is None:
            keyspace = target[0] if target is not None else sorted(self.vschema.keyspaces)[0]
        if target is not None and target[0] == keyspace:
            return target
        return keyspace, self.shard_names(keyspace)[0]

    def table_shard(self, table: str, keyspace: str | None, target: ShardTarget | None) -> ShardTarget:
        """Where to ask about a table's definition: the session's target shard (when the
        table is in the targeted keyspace), else the first shard of the table's keyspace."""
        if target is not None and keyspace in (None, target[0]):
            return target
        t = self.vschema.find_table(table, keyspace)
        ks = t.keyspace if isinstance(t.keyspace, str) else t.keyspace.name
        return self.default_shard(ks)

    # -- keeping current -------------------------------------------------------------
    async def schema_changed(self, keyspace: str, ddl: str) -> None:
        """DDL ran on every shard of ``keyspace``: refresh what depends on the schema
        (a changed message-table comment takes effect without a restart)."""
        logger.info("schema changed", extra={"keyspace": keyspace, "ddl": ddl[:200]})
        try:
            await self.schema_tracker.refresh(keyspace)
        except ProxyError as e:  # the DDL ran; the timer reads the keyspace again
            logger.warning("schema tracking: refresh after DDL failed", extra={"keyspace": keyspace, "error": e.message})
        await self.messaging.reload(keyspace)

    def ddl_seen(self, keyspace: str) -> None:
        """A DDL on ``keyspace`` not made through ``schema_changed`` (a binlog DDL event in a
        CDC stream this proxy runs, a shard-targeted DDL): re-read its schema in the background."""
        self.schema_tracker.ddl_seen(keyspace)

    def committed(self, keyspace: str, write: MessageDml | TopicWrite) -> None:
        """A write to a message table or topic committed: wake its readers."""
        if isinstance(write, TopicWrite):
            self.topics.committed(write)
        elif write.kind == "insert":
            self.messaging.inserted(keyspace, write)
        elif write.kind == "ack":
            self.messaging.acked(keyspace, write.table, write.ids)


__all__ = ["ClusterState", "ShardTarget"]
