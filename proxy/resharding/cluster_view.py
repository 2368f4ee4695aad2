"""What a workflow command needs of the cluster: the store, the keyspace's topology, shard endpoints.

Every ``shardgate reshard`` verb and the workflow host open one :class:`ClusterView`: a pool to the
vschema-store shard (the workflows, copy state and serving topology live there) and the stored
serving topology (:mod:`proxy.resharding.topology`), which knows every shard of a keyspace,
including targets the cluster file does not list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from proxy.cluster.layout import cluster_endpoints
from proxy.config import ClusterConfig, ShardEndpoint
from proxy.live_vschema import stored_vschema_doc
from proxy.pools import ShardAddress, ShardConnection, ShardPool
from proxy.resharding.topology import (
    KeyspaceTopology,
    TopologyConflict,
    load_topology,
    save_topology,
)
from proxy.resharding.workflow import WorkflowStore, store_address

_CAS_ATTEMPTS = 5


class ClusterView:
    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        keyspace, shard = config.vschema_store_location
        self.store_pool = ShardPool(store_address(config, cluster_endpoints(config)[(keyspace, shard)]), maxsize=4)
        self.store = WorkflowStore(self.store_pool)

    async def close(self) -> None:
        await self.store_pool.close()

    @asynccontextmanager
    async def store_connection(self) -> AsyncIterator[ShardConnection]:
        async with self.store_pool.connection() as sc:
            yield sc

    async def vschema(self, keyspace: str) -> Mapping[str, Any]:
        """The keyspace's vschema in force: the stored one (ALTER VSCHEMA changes it, every proxy
        routes by it), else the cluster file's. Rows are placed by it."""
        async with self.store_connection() as sc:
            doc = await stored_vschema_doc(sc, self.store_pool.address.database, keyspace)
        return doc if doc is not None else self.config.keyspaces[keyspace].vschema

    async def topologies(self) -> dict[str, KeyspaceTopology]:
        async with self.store_connection() as sc:
            return await load_topology(sc, self.config)

    async def topology(self, keyspace: str) -> KeyspaceTopology:
        return (await self.topologies())[keyspace]

    async def endpoints(self, keyspace: str) -> dict[str, ShardEndpoint]:
        """Every known shard of ``keyspace`` by name."""
        topology = await self.topology(keyspace)
        return {shard: spec.endpoint for shard, spec in topology.shards.items()}

    async def change_topology(
        self, keyspace: str, change: Callable[[KeyspaceTopology], KeyspaceTopology]
    ) -> KeyspaceTopology:
        """Apply ``change(topology) -> topology`` with compare-and-set, retrying a concurrent change."""
        for attempt in range(_CAS_ATTEMPTS):
            current = await self.topology(keyspace)
            wanted = change(current)
            if wanted == current:
                return current
            try:
                async with self.store_connection() as sc:
                    return await save_topology(sc, keyspace, wanted, current.version)
            except TopologyConflict:
                if attempt == _CAS_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")


def shard_pool(keyspace: str, shard: str, endpoint: ShardEndpoint) -> ShardPool:
    """A small pool to one shard (the deny triggers and the journal run through it)."""
    e = endpoint
    return ShardPool(ShardAddress.of(keyspace, shard, e), maxsize=2)
