"""Where each local shard lives: its port, data directory and replication identity.

This is pure planning from the configuration (no processes, no I/O), so `shardgate serve`, the CDC
reader and tests can compute a local cluster's endpoints without starting it. Local shards are
numbered in configuration order (keyspaces as listed, then shards as listed); shard number `i`
listens on `base_port + i` and gets `server_id = SERVER_ID_BASE + i` and `gtid_domain_id = i + 1`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from proxy.cluster.errors import ClusterError
from proxy.config import ClusterConfig, ShardEndpoint

LOCAL_HOST = "127.0.0.1"
LOCAL_USER = "root"
# Binlog readers (CDC) pick their own server_id; they must stay clear of this block.
SERVER_ID_BASE = 100

# Inside the data dir so it moves with it; the server is told to not list it as a database.
TMP_DIRNAME = ".tmp"

ShardKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class LocalShardSpec:
    keyspace: str
    shard: str
    ordinal: int
    port: int
    data_dir: Path
    server_id: int
    gtid_domain_id: int
    # The proxy reaches the shard over its Unix socket (`local.shard_transport: unix`, the
    # default) or over TCP; the shard listens on both either way.
    unix_socket: bool = True

    @property
    def key(self) -> ShardKey:
        return (self.keyspace, self.shard)

    @property
    def endpoint(self) -> ShardEndpoint:
        return ShardEndpoint(
            host=LOCAL_HOST,
            port=self.port,
            user=LOCAL_USER,
            password="",
            database=self.keyspace,
            socket=str(self.socket_path) if self.unix_socket else None,
        )

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "mariadbd.sock"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "mariadbd.pid"

    @property
    def error_log(self) -> Path:
        return self.data_dir / "mariadbd.err"

    @property
    def binlog_basename(self) -> Path:
        return self.data_dir / "binlog"

    @property
    def tmp_dir(self) -> Path:
        """The server's private tmpdir (see server_options for why not /tmp)."""
        return self.data_dir / TMP_DIRNAME

    @property
    def schema_marker(self) -> Path:
        return self.data_dir / "shardgate-schema-applied.json"


def safe_shard_dirname(shard: str) -> str:
    """A directory name for a shard: key ranges start with '-', which command lines misread.

    '-80' -> '_80', '80-' -> '80_', '-' -> '_', '0' -> '0'.
    """
    return re.sub(r"[^A-Za-z0-9_.]", "_", shard)


def plan_local_shards(config: ClusterConfig) -> list[LocalShardSpec]:
    """The local shards of `config` in their stable order (empty when every shard has a dsn)."""
    if not config.has_local_shards:
        return []
    if config.local is None:
        raise ClusterError(f"{config.path}: local shards are listed but `local` is not configured")
    specs: list[LocalShardSpec] = []
    dirs: dict[Path, ShardKey] = {}
    for keyspace in config.keyspaces.values():
        for shard in keyspace.local_shards:
            ordinal = len(specs)
            data_dir = config.local.data_dir / keyspace.name / safe_shard_dirname(shard)
            if data_dir in dirs:
                other = "/".join(dirs[data_dir])
                raise ClusterError(
                    f"shards {other} and {keyspace.name}/{shard} map to the same data dir {data_dir}"
                )
            dirs[data_dir] = (keyspace.name, shard)
            specs.append(
                LocalShardSpec(
                    keyspace=keyspace.name,
                    shard=shard,
                    ordinal=ordinal,
                    port=config.local.base_port + ordinal,
                    data_dir=data_dir,
                    server_id=SERVER_ID_BASE + ordinal,
                    gtid_domain_id=ordinal + 1,
                    unix_socket=config.local.shard_transport == "unix",
                )
            )
    return specs


def cluster_endpoints(config: ClusterConfig) -> dict[ShardKey, ShardEndpoint]:
    """Every shard's endpoint, local ones as the launcher assigns them, in configuration order."""
    local = {spec.key: spec.endpoint for spec in plan_local_shards(config)}
    endpoints: dict[ShardKey, ShardEndpoint] = {}
    for keyspace in config.keyspaces.values():
        for shard, endpoint in keyspace.shards.items():
            key = (keyspace.name, shard)
            endpoints[key] = endpoint if endpoint is not None else local[key]
    return endpoints
