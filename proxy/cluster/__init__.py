"""Local MariaDB shard instances: the cluster `shardgate up` starts from a cluster YAML."""

from proxy.cluster.binaries import MariaDBBinaries, find_mariadb_binaries
from proxy.cluster.errors import (
    ClusterError,
    MariaDBNotInstalled,
    PortInUse,
    SchemaError,
    ShardStartError,
)
from proxy.cluster.layout import LocalShardSpec, ShardKey, cluster_endpoints, plan_local_shards
from proxy.cluster.local import LocalCluster
from proxy.cluster.ports import find_free_port_range, port_is_free

__all__ = [
    "ClusterError",
    "LocalCluster",
    "LocalShardSpec",
    "MariaDBBinaries",
    "MariaDBNotInstalled",
    "PortInUse",
    "SchemaError",
    "ShardKey",
    "ShardStartError",
    "cluster_endpoints",
    "find_free_port_range",
    "find_mariadb_binaries",
    "plan_local_shards",
    "port_is_free",
]
