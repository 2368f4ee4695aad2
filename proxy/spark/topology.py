"""What the data source knows about the cluster: shard names, the vschema, shard endpoints.

Shard names come from the proxy (`SHOW VITESS_SHARDS`). The vschema (for shard pruning and
write routing) and the shards' own endpoints (for the change stream, which reads binlogs) come
from the cluster YAML the proxy runs with (`config` option); without it, reads use every shard
and writes let the proxy route.
"""

from __future__ import annotations

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


def shard_endpoints(config_path: Path) -> dict[tuple[str, str], ShardEndpointSpec]:
    """Every shard's own MariaDB endpoint, from the cluster YAML."""
    from proxy.cluster import cluster_endpoints
    from proxy.config import load_config

    return {
        key: ShardEndpointSpec(e.host, e.port, e.user, e.password, e.database)
        for key, e in cluster_endpoints(load_config(config_path)).items()
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
