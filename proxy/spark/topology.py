"""What the data source knows about the cluster: shard names, the vschema, shard endpoints.

Shard names come from the proxy (`SHOW VITESS_SHARDS`). The vschema (for shard pruning and
write routing) and the shards' own endpoints (for the change stream, which reads binlogs) come
from the cluster YAML the proxy runs with (`config` option); without it, reads use every shard
and writes let the proxy route.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxy.spark.connect import connect
from proxy.spark.options import ProxyAddress


@dataclass(frozen=True)
class ShardEndpointSpec:
    """A shard's MariaDB address (picklable, matches proxy.cdc's endpoint protocol)."""

    host: str
    port: int
    user: str
    password: str
    database: str

    @property
    def socket(self) -> None:
        """Executors reach the shards over the network (they may run on other machines): never a
        Unix socket."""
        return None


def proxy_shards(address: ProxyAddress, keyspace: str) -> list[str]:
    """The keyspace's shard names, as the proxy reports them (`SHOW VITESS_SHARDS`)."""
    conn = connect(address, keyspace)
    try:
        cur = conn.cursor()
        cur.execute("SHOW VITESS_SHARDS")
        names = [_text(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()
    shards = [name.partition("/")[2] for name in names if name.partition("/")[0] == keyspace]
    if not shards:
        raise LookupError(f"the proxy at {address.host}:{address.port} has no keyspace {keyspace!r}")
    return shards


def load_vschema(config_path: Path) -> Any:
    """The vschema of the cluster YAML at `config_path` (as the proxy builds it)."""
    from proxy.config import load_config
    from vschema.loader import build_vschema

    config = load_config(config_path)
    return build_vschema(
        {name: (ks.vschema, list(ks.shards)) for name, ks in config.keyspaces.items()},
        config.routing_rules or None,
    )


def topology_endpoints(
    config_path: Path,
) -> tuple[dict[tuple[str, str], ShardEndpointSpec], dict[tuple[str, str], ShardEndpointSpec]]:
    """(serving, known) shard endpoints from the cluster's stored serving topology (a reshard
    switched: its targets serve, its sources are known until ``complete``); the cluster YAML's
    shards where nothing was stored (proxy/resharding/topology.py)."""
    from proxy.config import load_config
    from proxy.resharding.topology import read_topology

    topologies = asyncio.run(read_topology(load_config(config_path)))

    def spec(e: Any) -> ShardEndpointSpec:
        return ShardEndpointSpec(e.host, e.port, e.user, e.password, e.database)

    serving = {key: spec(e) for t in topologies.values() for key, e in t.serving_endpoints.items()}
    known = {key: spec(e) for t in topologies.values() for key, e in t.endpoints.items()}
    return serving, known


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
