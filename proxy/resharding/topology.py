"""The serving topology of a keyspace: which shards serve it, and where every known shard is.

The cluster file fixes a keyspace's shards until it is resharded; from the switch on (Vitess's
SwitchTraffic flips the ``SrvKeyspace`` partitions) the cluster itself says which shards serve.
The topology is kept next to the live vschema (:mod:`proxy.live_vschema`), on the vschema-store
shard, in the sidecar table ``_shardgate.shard_topology`` (or ``<db>._shardgate_shard_topology``,
see :mod:`proxy.sidecar_tables`), one row per keyspace that was ever resharded::

    cluster     the store shard's database name (clusters sharing a server keep apart)
    keyspace    the keyspace
    doc         the topology document (JSON, below)
    version     this row's version: 1 on the first save, +1 on every save (compare-and-set)
    updated_at  when

A keyspace without a row is served by its cluster-file shards (version 0): nothing changes for a
cluster that never resharded. The document::

    {"serving": ["-40", "40-80", "80-"],                    # in key-range order
     "shards": {"-80":   {"host": ..., "port": ..., "user": ..., "password": ..., "database": ...,
                          "socket": null, "local": null},                   # a dsn shard of the cluster file
                "-40":   {"host": "127.0.0.1", "port": 17104, "user": "root", "password": "",
                          "database": "commerce", "socket": "/.../commerce/_40/mariadbd.sock",
                          "local": {"data_dir": "/.../commerce/_40", "server_id": 104,
                                    "gtid_domain_id": 5}},  # a local instance shardgate runs
                ...}}

``shards`` holds every shard still known (serving ones, the sources of a switched reshard until
``complete`` retires them, the targets before the switch): CDC streams resuming from a position
naming old shards read them from here. The password is stored because every proxy process must
connect to target shards that the cluster file does not list (local ones have none).

``serving`` routes writes, and reads too unless the document also holds ``"reading": [...]``:
after ``switch-traffic --reads-only`` (Vitess switches the replica/rdonly reads first; here every
shard is a primary, so the read list stands for them) SELECTs go by ``reading`` (the targets)
while writes still go by ``serving`` (the sources, which the catch-up copies to the targets).
The write switch (``--writes-only`` or the plain switch) sets ``serving`` and drops ``reading``;
``reverse-traffic`` after a reads-only switch drops ``reading``. A document without it (every
keyspace never resharded, every plain switch) routes as before: one list for both.

API (what the Reshard workflow calls)::

    KeyspaceTopology(keyspace, serving, shards, version, reading)  # frozen; .endpoint(shard), .endpoints,
        .reads (the shards reads go to), .with_shard(shard, spec), .with_serving(shards) (reads too),
        .with_reading(shards | None) (reads only), .without_shards(shards), .to_json()/from_json
    ShardEndpointSpec(endpoint: ShardEndpoint, local: LocalInstance | None)
    LocalInstance(port, data_dir, server_id, gtid_domain_id).spec(keyspace, shard) -> LocalShardSpec
    cluster_topology(config) -> dict[str, KeyspaceTopology]             # the cluster file's (version 0)
    await load_topology(conn, config) -> dict[str, KeyspaceTopology]    # stored rows over the file's
    await stored_versions(conn) -> dict[str, int]                      # keyspace -> stored version
    await save_topology(conn, keyspace, topology, expected_version) -> KeyspaceTopology  # CAS
    allocate_local_shard(config, topologies, keyspace, shard) -> LocalInstance  # next free port/ids
    local_endpoint_spec(keyspace, shard, instance) -> ShardEndpointSpec
    LocalCluster.start_added_shard(instance.spec(keyspace, shard), schema_path)  # start it (proxy/cluster)
    await read_topology(config) -> dict[str, KeyspaceTopology]  # over a connection of its own
    serving_endpoints(topologies) -> {(ks, shard): ShardEndpoint}  # what "current" streams read
    shard_locator(config) -> VStream shard_locator (any shard the store knows)
    await start_stored_local_shards(cluster)  # `shardgate up`: the stored topology's extra local shards
    TopologyConflict: ProxyError 1105 when expected_version is not the stored one

The workflow's order: targets saved with ``with_shard`` when created (not serving: every proxy
and CDC stream then knows where they are), ``with_serving`` at the switch (after the journal),
``without_shards`` at ``complete``.

``conn`` is a :class:`proxy.pools.ShardConnection` to the vschema-store shard
(``config.vschema_store_location``). Every proxy process follows the table through the live
vschema's poll (one poller per process): :meth:`proxy.live_vschema.LiveVSchema` reads the
versions with the vschema's and installs a changed topology.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from proxy.cluster.errors import ClusterError
from proxy.cluster.layout import (
    SERVER_ID_BASE,
    LocalShardSpec,
    cluster_endpoints,
    plan_local_shards,
    safe_shard_dirname,
)
from proxy.cluster.local import LocalCluster
from proxy.cluster.ports import port_is_free
from proxy.config import ClusterConfig, ShardEndpoint
from proxy.errors import ER_UNKNOWN_ERROR, ProxyError
from proxy.pools import ShardAddress, ShardConnection, ShardPools
from proxy.sidecar_tables import ensure_sidecar_table, hex_literal, row_text, utf8_literal
from vschema.errors import InvalidShardName
from vschema.keyrange import KeyRange

logger = logging.getLogger(__name__)

SIDECAR_TABLE = "shard_topology"


def _create_table(name: str) -> str:
    return (
        f"create table if not exists {name} ("
        " cluster varbinary(255) not null,"
        " keyspace varbinary(255) not null,"
        " doc longtext character set utf8mb4 not null,"
        " version bigint not null,"
        " updated_at datetime(6) not null,"
        " primary key (cluster, keyspace)"
        ") engine=InnoDB comment 'shardgate: serving shards per keyspace (proxy/resharding/topology.py)'"
    )


class TopologyError(ProxyError):
    """An invalid topology document or request (names the keyspace)."""

    def __init__(self, keyspace: str, message: str) -> None:
        super().__init__(ER_UNKNOWN_ERROR, f"topology of keyspace {keyspace}: {message}")


class TopologyConflict(ProxyError):
    """``save_topology``'s expected version is not the stored one: someone else changed it."""

    def __init__(self, keyspace: str, expected: int, found: int) -> None:
        super().__init__(
            ER_UNKNOWN_ERROR,
            f"topology of keyspace {keyspace} changed concurrently: expected version {expected}, "
            f"found {found}; read it again",
        )
        self.keyspace = keyspace
        self.expected = expected
        self.found = found


@dataclass(frozen=True, slots=True)
class LocalInstance:
    """A local MariaDB instance shardgate runs for a shard that the cluster file does not list."""

    port: int
    data_dir: Path
    server_id: int
    gtid_domain_id: int

    def spec(self, keyspace: str, shard: str) -> LocalShardSpec:
        """The launcher's description (what LocalCluster starts)."""
        return LocalShardSpec(
            keyspace=keyspace, shard=shard, ordinal=self.server_id - SERVER_ID_BASE, port=self.port,
            data_dir=self.data_dir, server_id=self.server_id, gtid_domain_id=self.gtid_domain_id,
        )

    @classmethod
    def of(cls, spec: LocalShardSpec) -> LocalInstance:
        return cls(spec.port, spec.data_dir, spec.server_id, spec.gtid_domain_id)


@dataclass(frozen=True, slots=True)
class ShardEndpointSpec:
    """Where a shard listens; ``local`` when shardgate runs its instance."""

    endpoint: ShardEndpoint
    local: LocalInstance | None = None

    def to_json(self) -> dict[str, Any]:
        e = self.endpoint
        return {
            "host": e.host, "port": e.port, "user": e.user, "password": e.password, "database": e.database,
            "socket": e.socket,
            "local": None if self.local is None else {
                "data_dir": str(self.local.data_dir), "server_id": self.local.server_id,
                "gtid_domain_id": self.local.gtid_domain_id,
            },
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ShardEndpointSpec:
        endpoint = ShardEndpoint(
            host=str(doc["host"]), port=int(doc["port"]), user=str(doc["user"]),
            password=str(doc.get("password") or ""), database=str(doc["database"]),
            socket=str(doc["socket"]) if doc.get("socket") else None,  # absent in documents saved before it
        )
        local = doc.get("local")
        return cls(endpoint, None if not local else LocalInstance(
            port=endpoint.port, data_dir=Path(local["data_dir"]), server_id=int(local["server_id"]),
            gtid_domain_id=int(local["gtid_domain_id"]),
        ))


@dataclass(frozen=True, slots=True)
class KeyspaceTopology:
    """One keyspace's serving shards (key-range order) and every known shard's endpoint.

    ``version`` is the stored row's (0: the cluster file's, nothing stored); ``reading``: the
    shards reads go to when a reads-only switch made them differ from ``serving`` (else None)."""

    keyspace: str
    serving: tuple[str, ...]
    shards: Mapping[str, ShardEndpointSpec] = field(default_factory=dict)
    version: int = 0
    reading: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.serving:
            raise TopologyError(self.keyspace, "no serving shard")
        missing = [s for s in self.serving if s not in self.shards]
        if missing:
            raise TopologyError(self.keyspace, f"serving shard {missing[0]} has no endpoint")
        if len(set(self.serving)) != len(self.serving):
            raise TopologyError(self.keyspace, "a shard is listed twice in serving")
        object.__setattr__(self, "serving", tuple(sort_shards(self.serving)))
        object.__setattr__(self, "shards", dict(self.shards))
        if self.reading is not None:
            unknown = [s for s in self.reading if s not in self.shards]
            if not self.reading or unknown:
                raise TopologyError(self.keyspace, f"reading shard {unknown[0] if unknown else '(none)'} has no endpoint")
            reading = tuple(sort_shards(self.reading))
            object.__setattr__(self, "reading", None if reading == self.serving else reading)

    @property
    def reads(self) -> tuple[str, ...]:
        """The shards reads go to: ``reading`` after a reads-only switch, else ``serving``."""
        return self.reading if self.reading is not None else self.serving

    @property
    def routed(self) -> tuple[str, ...]:
        """Every shard that takes reads or writes (their pools stay open)."""
        return tuple(sort_shards(sorted(set(self.serving) | set(self.reads))))

    def endpoint(self, shard: str) -> ShardEndpoint:
        try:
            return self.shards[shard].endpoint
        except KeyError:
            raise TopologyError(self.keyspace, f"no shard {shard}") from None

    @property
    def endpoints(self) -> dict[tuple[str, str], ShardEndpoint]:
        """Every known shard's endpoint keyed (keyspace, shard), as the pools and CDC take them."""
        return {(self.keyspace, s): spec.endpoint for s, spec in self.shards.items()}

    @property
    def serving_endpoints(self) -> dict[tuple[str, str], ShardEndpoint]:
        return {(self.keyspace, s): self.shards[s].endpoint for s in self.serving}

    def with_serving(self, serving: Sequence[str]) -> KeyspaceTopology:
        """The same shards, ``serving`` serving reads and writes (the switch, or its reverse)."""
        return replace(self, serving=tuple(serving), reading=None)

    def with_reading(self, reading: Sequence[str] | None) -> KeyspaceTopology:
        """Reads go to ``reading``, writes stay (a reads-only switch); None: reads follow writes again."""
        return replace(self, reading=None if reading is None else tuple(reading))

    def with_shard(self, shard: str, spec: ShardEndpointSpec) -> KeyspaceTopology:
        """A shard added (a target before the switch) or its endpoint changed."""
        return replace(self, shards={**self.shards, shard: spec})

    def without_shards(self, shards: Sequence[str]) -> KeyspaceTopology:
        """Retired shards forgotten (``complete``); refuses to drop a serving one."""
        serving = [s for s in shards if s in self.routed]
        if serving:
            raise TopologyError(self.keyspace, f"shard {serving[0]} still serves")
        return replace(self, shards={s: e for s, e in self.shards.items() if s not in shards})

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"serving": list(self.serving)}
        if self.reading is not None:
            doc["reading"] = list(self.reading)
        doc["shards"] = {s: e.to_json() for s, e in sorted(self.shards.items())}
        return doc

    @classmethod
    def from_json(cls, keyspace: str, doc: Mapping[str, Any], version: int) -> KeyspaceTopology:
        try:
            shards = {str(s): ShardEndpointSpec.from_json(e) for s, e in doc["shards"].items()}
            reading = doc.get("reading")
            return cls(keyspace, tuple(str(s) for s in doc["serving"]), shards, version,
                       None if reading is None else tuple(str(s) for s in reading))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise TopologyError(keyspace, f"unreadable document ({type(e).__name__}: {e})") from e


def sort_shards(shards: Sequence[str]) -> list[str]:
    """Shard names in key-range order (names that are not key ranges, like ``0``, keep theirs)."""
    def key(shard: str) -> tuple[int, bytes, str]:
        try:
            return (0, KeyRange.parse(shard).start, shard)
        except InvalidShardName:
            return (1, b"", shard)

    return sorted(shards, key=key)


def cluster_topology(
    config: ClusterConfig, endpoints: Mapping[tuple[str, str], ShardEndpoint] | None = None
) -> dict[str, KeyspaceTopology]:
    """Every keyspace as the cluster file describes it (version 0); ``endpoints``: the shards'
    endpoints where the caller knows them (a proxy is handed them), else computed from the file."""
    endpoints = cluster_endpoints(config) if endpoints is None else endpoints
    local = {spec.key: LocalInstance.of(spec) for spec in plan_local_shards(config)}
    return {
        name: KeyspaceTopology(
            name,
            tuple(ks.shards),
            {s: ShardEndpointSpec(endpoints[(name, s)], local.get((name, s))) for s in ks.shards},
            0,
        )
        for name, ks in config.keyspaces.items()
    }


async def topology_table(conn: ShardConnection) -> str:
    """The qualified name of the topology table on ``conn``'s shard (created if missing);
    callers that poll keep it and pass it on as ``table``."""
    return await ensure_sidecar_table(conn, conn.pool.address.database, SIDECAR_TABLE, _create_table)


async def stored_versions(conn: ShardConnection, table: str | None = None) -> dict[str, int]:
    """keyspace -> stored version (keyspaces without a row absent)."""
    table = table or await topology_table(conn)
    res = await conn.execute(
        f"select keyspace, version from {table} where cluster = {hex_literal(conn.pool.address.database)}"
    )
    return {row_text(ks): int(row_text(v)) for ks, v in res.rows}


async def load_topology(
    conn: ShardConnection,
    config: ClusterConfig,
    *,
    base: Mapping[str, KeyspaceTopology] | None = None,
    table: str | None = None,
    current: Mapping[str, KeyspaceTopology] | None = None,
) -> dict[str, KeyspaceTopology]:
    """Every keyspace's topology: its stored row, or the cluster file's shards where it has none
    (``base``: those, when the caller has them). A stored keyspace the cluster file does not
    name is ignored (logged). An unreadable row raises :class:`TopologyError`, unless the
    caller serves a ``current`` topology: that one is kept (with the row's version, so a
    follower does not read it again until it changes) and the error logged."""
    table = table or await topology_table(conn)
    res = await conn.execute(
        f"select keyspace, doc, version from {table} where cluster = {hex_literal(conn.pool.address.database)}"
    )
    out = dict(base) if base is not None else cluster_topology(config)
    for ks, doc, version in res.rows:
        name = row_text(ks)
        if name not in config.keyspaces:
            logger.warning("topology stored for a keyspace the cluster file does not name", extra={"keyspace": name})
            continue
        stored_version = int(row_text(version))
        try:
            try:
                parsed = json.loads(row_text(doc))
            except ValueError as e:
                raise TopologyError(name, f"unreadable document ({e})") from e
            out[name] = KeyspaceTopology.from_json(name, parsed, stored_version)
        except TopologyError as e:
            if current is None or name not in current:
                raise
            # Never fall back to the file's shards: after a switch they are the wrong ones.
            logger.error("stored topology unreadable: keeping the one in force",
                         extra={"keyspace": name, "version": stored_version, "error": e.message})
            out[name] = replace(current[name], version=stored_version)
    return out


async def save_topology(
    conn: ShardConnection, keyspace: str, topology: KeyspaceTopology, expected_version: int
) -> KeyspaceTopology:
    """Store ``topology`` for ``keyspace`` if the stored version is still ``expected_version``
    (0: no row yet, the cluster file's); returns it with its new version. Raises
    :class:`TopologyConflict` (nothing written) otherwise. Every proxy installs it within
    the vschema-store poll interval (0.25 s by default)."""
    if topology.keyspace != keyspace:
        raise TopologyError(keyspace, f"document is for keyspace {topology.keyspace}")
    table = await topology_table(conn)
    cluster = hex_literal(conn.pool.address.database)
    doc = utf8_literal(json.dumps(topology.to_json(), sort_keys=True))
    version = expected_version + 1
    if expected_version == 0:
        res = await conn.execute(
            f"insert ignore into {table} (cluster, keyspace, doc, version, updated_at) "
            f"values ({cluster}, {hex_literal(keyspace)}, {doc}, 1, utc_timestamp(6))"
        )
    else:
        res = await conn.execute(
            f"update {table} set doc = {doc}, version = {version}, updated_at = utc_timestamp(6) "
            f"where cluster = {cluster} and keyspace = {hex_literal(keyspace)} and version = {expected_version}"
        )
    if res.affected_rows != 1:
        found = await stored_versions(conn)
        raise TopologyConflict(keyspace, expected_version, found.get(keyspace, 0))
    logger.info("topology saved", extra={"keyspace": keyspace, "version": version,
                                         "serving": ",".join(topology.serving)})
    return replace(topology, version=version)


async def read_topology(
    config: ClusterConfig, endpoints: Mapping[tuple[str, str], ShardEndpoint] | None = None
) -> dict[str, KeyspaceTopology]:
    """Every keyspace's topology, read from the vschema-store shard over a connection of its
    own (for processes that do not run a proxy: ``shardgate cdc``, the Spark source, tools).
    ``endpoints``: the cluster file's shards where the caller has them."""
    endpoints = dict(cluster_endpoints(config) if endpoints is None else endpoints)
    keyspace, shard = config.vschema_store_location
    e = endpoints[(keyspace, shard)]
    pools = ShardPools([ShardAddress.of(keyspace, shard, e)], maxsize=1)
    try:
        async with pools.get(keyspace, shard).connection() as sc:
            return await load_topology(sc, config, base=cluster_topology(config, endpoints))
    finally:
        await pools.close()


def serving_endpoints(topologies: Mapping[str, KeyspaceTopology]) -> dict[tuple[str, str], ShardEndpoint]:
    """The serving shards of every keyspace, keyed (keyspace, shard): what a stream starting
    at ``current`` reads."""
    return {key: e for t in topologies.values() for key, e in t.serving_endpoints.items()}


def shard_locator(
    config: ClusterConfig, endpoints: Mapping[tuple[str, str], ShardEndpoint] | None = None
) -> Callable[[tuple[str, str]], Awaitable[ShardEndpoint | None]]:
    """A VStream ``shard_locator``: any shard the stored topology knows (a reshard's sources
    until ``complete``, its targets), read from the store when asked."""

    async def locate(key: tuple[str, str]) -> ShardEndpoint | None:
        topology = (await read_topology(config, endpoints)).get(key[0])
        spec = topology.shards.get(key[1]) if topology is not None else None
        return spec.endpoint if spec is not None else None

    return locate


async def start_stored_local_shards(cluster: LocalCluster) -> list[tuple[str, str]]:
    """``shardgate up``: after the cluster file's shards, start the local shards the stored
    topology adds (a reshard's targets); returns them. Their data dirs must exist (made when
    the reshard created them): a missing one is an error, never a fresh empty shard."""
    try:
        topologies = await read_topology(cluster.config, cluster.endpoints)
    except ProxyError as e:
        raise ClusterError(f"cannot read the stored serving topology: {e.message}") from e
    started: list[tuple[str, str]] = []
    for keyspace, topology in sorted(topologies.items()):
        for shard, spec in sorted(topology.shards.items()):
            if spec.local is None or shard in cluster.config.keyspaces[keyspace].shards:
                continue
            if not spec.local.data_dir.exists():
                raise ClusterError(
                    f"shard {keyspace}/{shard} of the stored topology has no data dir {spec.local.data_dir}: "
                    "restore it, or remove the shard from the reshard"
                )
            await cluster.start_added_shard(spec.local.spec(keyspace, shard))
            started.append((keyspace, shard))
    if started:
        logger.info("stored topology's local shards started", extra={"shards": ",".join(f"{k}/{s}" for k, s in started)})
    return started


def allocate_local_shard(
    config: ClusterConfig, topologies: Mapping[str, KeyspaceTopology], keyspace: str, shard: str
) -> LocalInstance:
    """A local instance for a new shard: the next port, server_id and GTID domain past every
    local shard the cluster file and the stored topologies know (ids stay unique cluster-wide,
    as binlog followers and GTID positions need), its data dir beside the file's shards."""
    if config.local is None:
        raise TopologyError(keyspace, "new local shards need `local: {data_dir, base_port}` in the cluster file")
    known = [LocalInstance.of(s) for s in plan_local_shards(config)]
    known += [e.local for t in topologies.values() for e in t.shards.values() if e.local is not None]
    ordinal = max((i.server_id - SERVER_ID_BASE for i in known), default=-1) + 1
    ordinal = max(ordinal, max((i.port - config.local.base_port for i in known), default=-1) + 1)
    # The port after the file's shards may be taken (tests put the proxy's listener there).
    while config.local.base_port + ordinal <= 65535 and not port_is_free(config.local.base_port + ordinal):
        ordinal += 1
    if config.local.base_port + ordinal > 65535:
        raise TopologyError(keyspace, f"no free port left past {config.local.base_port}")
    return LocalInstance(
        port=config.local.base_port + ordinal,
        data_dir=config.local.data_dir / keyspace / safe_shard_dirname(shard),
        server_id=SERVER_ID_BASE + ordinal,
        gtid_domain_id=max((i.gtid_domain_id for i in known), default=0) + 1,
    )


def local_endpoint_spec(keyspace: str, shard: str, instance: LocalInstance) -> ShardEndpointSpec:
    """The endpoint of a local instance (loopback, root, the keyspace's database)."""
    return ShardEndpointSpec(instance.spec(keyspace, shard).endpoint, instance)


__all__ = [
    "KeyspaceTopology", "LocalInstance", "ShardEndpointSpec", "TopologyConflict", "TopologyError",
    "allocate_local_shard", "cluster_topology", "load_topology", "local_endpoint_spec", "read_topology",
    "save_topology", "serving_endpoints", "shard_locator", "start_stored_local_shards", "sort_shards", "stored_versions", "topology_table",
]
