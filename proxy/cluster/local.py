"""LocalCluster: the MariaDB instances behind `shardgate up`, one per local shard."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
import time
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any

from proxy.cluster.binaries import MariaDBBinaries, find_mariadb_binaries
from proxy.cluster.datadir import ensure_template, provision_data_dir
from proxy.cluster.errors import ClusterError, PortInUse
from proxy.cluster.instance import READY_TIMEOUT_S, MariaDBInstance, running_pid_from_file
from proxy.cluster.layout import LocalShardSpec, ShardKey, cluster_endpoints, plan_local_shards
from proxy.cluster.ports import port_is_free
from proxy.cluster.schema import apply_schema_once
from proxy.config import ClusterConfig, ShardEndpoint

logger = logging.getLogger(__name__)

TEMPLATE_DIRNAME = ".template"


async def _all_or_first_error(steps: list[Coroutine[Any, Any, Any]]) -> None:
    """Run shard steps concurrently to the end (no shard is left half-started in the background
    when another fails), then raise the first failure; later ones are logged."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    for extra in errors[1:]:
        logger.error("another shard failed too: %s", extra, exc_info=extra)
    if errors:
        raise errors[0]


class LocalCluster:
    """Starts and stops one `mariadbd` per local shard of a cluster configuration.

    Data directories live under `local.data_dir/<keyspace>/<shard>`; the first start initialises
    them (from a template made once by `mariadb-install-db`), creates the keyspace database and
    applies the keyspace's schema. Later starts reuse the data as it was left.

        async with LocalCluster(load_config("cluster.yaml")) as cluster:
            cluster.endpoint("commerce", "-80")   # ShardEndpoint(host, port, user, ...)
    """

    def __init__(
        self,
        config: ClusterConfig,
        *,
        mariadb_search_path: str | None = None,
        template_dir: Path | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.ready_timeout_s = ready_timeout_s
        self._search_path = mariadb_search_path
        self._specs: dict[ShardKey, LocalShardSpec] = {s.key: s for s in plan_local_shards(config)}
        self._endpoints = cluster_endpoints(config)
        self._template_dir = template_dir or (
            config.local.data_dir / TEMPLATE_DIRNAME if config.local is not None else None
        )
        self._binaries: MariaDBBinaries | None = None
        self._instances: dict[ShardKey, MariaDBInstance] = {}
        self.startup_seconds: float | None = None

    # -- topology -------------------------------------------------------------------------------

    @property
    def endpoints(self) -> dict[ShardKey, ShardEndpoint]:
        """Every shard of the configuration (local and dsn ones), keyed by (keyspace, shard)."""
        return dict(self._endpoints)

    def endpoint(self, keyspace: str, shard: str) -> ShardEndpoint:
        try:
            return self._endpoints[(keyspace, shard)]
        except KeyError:
            raise KeyError(f"no shard {keyspace}/{shard} in {self.config.path}") from None

    @property
    def local_shards(self) -> list[LocalShardSpec]:
        """The shards this cluster runs itself, in port order."""
        return list(self._specs.values())

    def local_shard(self, keyspace: str, shard: str) -> LocalShardSpec:
        try:
            return self._specs[(keyspace, shard)]
        except KeyError:
            raise KeyError(
                f"{keyspace}/{shard} is not a local shard of {self.config.path}"
            ) from None

    def pid(self, keyspace: str, shard: str) -> int | None:
        """The pid of the shard's mariadbd while it runs."""
        instance = self._instances.get((keyspace, shard))
        return instance.pid if instance is not None and instance.running else None

    def is_running(self, keyspace: str, shard: str) -> bool:
        return self.pid(keyspace, shard) is not None

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Initialise what is missing, start every local shard and apply first-run schema."""
        if not self._specs:
            return
        started = time.monotonic()
        binaries = self._require_binaries()
        # Calling start() again only starts the shards that are not running.
        specs = [s for s in self._specs.values() if not self.is_running(s.keyspace, s.shard)]
        if not specs:
            return
        self._check_ports_free(specs)
        fresh = await self._provision(binaries, specs)
        try:
            await _all_or_first_error([self._start_one(spec) for spec in specs])
            await _all_or_first_error(
                [
                    apply_schema_once(spec, self.config.keyspaces[spec.keyspace].schema_path)
                    for spec in specs
                ]
            )
        except BaseException:
            # Only the shards this call started: a retry must not take down running ones.
            await self._stop_instances([spec.key for spec in specs])
            # Data dirs made by this call hold nothing but a half-applied schema: drop them so
            # the next start (with the schema file fixed) begins clean instead of tripping over
            # tables created by the failed attempt.
            for spec in fresh:
                logger.warning(
                    "removing data dir of failed first start keyspace=%s shard=%s path=%s",
                    spec.keyspace,
                    spec.shard,
                    spec.data_dir,
                )
                await asyncio.to_thread(shutil.rmtree, spec.data_dir, True)
            raise
        self.startup_seconds = time.monotonic() - started
        logger.info(
            "local cluster started shards=%d fresh=%d seconds=%.2f data_dir=%s",
            len(specs),
            len(fresh),
            self.startup_seconds,
            self.config.local.data_dir if self.config.local else None,
            extra={"shards": len(specs), "fresh": len(fresh), "seconds": self.startup_seconds},
        )

    async def stop(self) -> None:
        """Shut every running shard down cleanly (SIGTERM) and wait for it to exit."""
        await self._stop_instances(list(self._instances))

    async def _stop_instances(self, keys: list[ShardKey]) -> None:
        instances = [self._instances.pop(key) for key in keys if key in self._instances]
        # Signal all first, so an interrupted wait still leaves every shard shutting down.
        for instance in instances:
            instance.send_signal(signal.SIGTERM)
        await _all_or_first_error([instance.stop() for instance in instances])

    async def stop_shard(self, keyspace: str, shard: str, *, kill: bool = False) -> None:
        """Stop one shard: a clean shutdown, or with `kill=True` a SIGKILL crash."""
        self.local_shard(keyspace, shard)
        instance = self._instances.pop((keyspace, shard), None)
        if instance is not None:
            await instance.stop(kill=kill)

    async def start_shard(self, keyspace: str, shard: str) -> None:
        """Start one (stopped) shard again and wait until it accepts connections."""
        spec = self.local_shard(keyspace, shard)
        if self.is_running(keyspace, shard):
            return
        self._check_ports_free([spec])
        await self._start_one(spec)

    async def start_added_shard(self, spec: LocalShardSpec, schema_path: Path | None = None) -> None:
        """Start a local shard the cluster file does not list (a reshard's target, described by
        the stored topology: proxy/resharding/topology.py): its data dir is made from the
        template on first start (with ``schema_path`` applied then), kept afterwards. From then
        on it is one of this cluster's shards (stop_shard, start_shard, stop)."""
        if spec.key in self._specs and self._specs[spec.key] != spec and self.is_running(spec.keyspace, spec.shard):
            # A stopped shard may be replaced: a merge back makes a new shard of a retired one's name.
            raise ClusterError(f"shard {spec.keyspace}/{spec.shard} is already described differently")
        self._specs[spec.key] = spec
        self._endpoints[spec.key] = spec.endpoint
        if self.is_running(spec.keyspace, spec.shard):
            return
        self._check_ports_free([spec])
        await self._provision(self._require_binaries(), [spec])
        await self._start_one(spec)
        await apply_schema_once(spec, schema_path)  # once: the data dir's marker remembers

    # -- internals ------------------------------------------------------------------------------

    def _require_binaries(self) -> MariaDBBinaries:
        if self._binaries is None:
            self._binaries = find_mariadb_binaries(self._search_path)
        return self._binaries

    def _check_ports_free(self, specs: list[LocalShardSpec]) -> None:
        for spec in specs:
            if not port_is_free(spec.port):
                leftover = running_pid_from_file(spec.pid_file)
                hint = (
                    f"mariadbd pid {leftover} of {spec.pid_file} still runs"
                    if leftover is not None
                    else f"another cluster running? change local.base_port in {self.config.path}"
                )
                raise PortInUse(
                    f"port {spec.port} for shard {spec.keyspace}/{spec.shard} is already in use "
                    f"({hint})"
                )

    async def _provision(
        self, binaries: MariaDBBinaries, specs: list[LocalShardSpec]
    ) -> list[LocalShardSpec]:
        """Create the missing data dirs from the template; returns the shards that got one."""
        missing = [spec for spec in specs if not spec.data_dir.exists()]
        if not missing:
            return []
        assert self._template_dir is not None
        await ensure_template(binaries, self._template_dir)
        return [
            spec for spec in missing if await provision_data_dir(self._template_dir, spec.data_dir)
        ]

    async def _start_one(self, spec: LocalShardSpec) -> None:
        instance = MariaDBInstance(spec, self._require_binaries())
        self._instances[spec.key] = instance
        await instance.start(self.ready_timeout_s)
