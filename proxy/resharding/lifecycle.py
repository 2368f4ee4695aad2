"""Creating, cancelling and completing a Reshard workflow (Vitess's ``Reshard create/cancel/complete``).

``create`` validates the request, registers the target shards in the keyspace's topology (new local
instances for a cluster with local shards, ``reshard_targets`` dsns otherwise: they do not serve
yet) and stores the workflow in state Copying; the workflow host then copies and catches up.
``cancel`` (before any switch) stops the streams, drops the copied tables on the targets and removes
them from the topology. ``complete`` (after the switch) retires the sources: their streams stop and
they leave the topology (a local source's instance is stopped by ``shardgate up``; its data dir is
kept).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from proxy.cdc.binlog_decoder import connect_shard, connection_kwargs
from proxy.config import ClusterConfig, ShardEndpoint
from proxy.errors import ER_NOT_SUPPORTED_YET, ProxyError
from proxy.resharding.cluster_view import ClusterView
from proxy.resharding.row_routing import RoutingError, RowRouter, UnsupportedRouting
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.table_schema import SchemaCopyError, read_table_names, read_tables
from proxy.resharding.topology import (
    KeyspaceTopology,
    ShardEndpointSpec,
    allocate_local_shard,
    local_endpoint_spec,
)
from proxy.resharding.workflow import Workflow, WorkflowError, WorkflowState
from proxy.topics.names import LOG_PREFIX, META_TABLE
from sqltext.quoting import quote_identifier
from vschema.errors import InvalidShardName
from vschema.keyrange import KeyRange

logger = logging.getLogger(__name__)

_WORKFLOW_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
LOCK_WAIT_SECONDS = 30.0


class ReshardRefused(ProxyError):
    """A reshard this version cannot do (MySQL's 1235, naming what is not supported)."""

    def __init__(self, what: str) -> None:
        super().__init__(ER_NOT_SUPPORTED_YET, f"This version of shardgate doesn't yet support '{what}'", "42000")


async def refuse_topics(keyspace: str, endpoints: Mapping[str, ShardEndpoint], shards: Sequence[str]) -> None:
    """Refuse to move shards that hold topics (proxy/topics). A topic lives on the one shard of
    its keyspace that md5(name) falls in: its log ``_tms_<t>``, its row in ``_tms_topics`` (with
    the id high-water mark that must survive) and the view ``<t>``, none of which the vschema
    routes, and every proxy's topic service keeps the shard it found at start. Copying them
    would need the copy, the catch-up, the switch's denied writes and the topic services to
    place them by name; until then the reshard is refused up front, naming the topics. Shards
    the reshard does not touch keep theirs: placement by key range does not move them."""
    held: list[str] = []
    for shard in shards:
        names = await read_table_names(endpoints[shard])
        topics = sorted(n[len(LOG_PREFIX):] for n in names if n.startswith(LOG_PREFIX) and n != META_TABLE)
        if topics or META_TABLE in names:
            held.append(f"{shard}: {', '.join(topics) if topics else 'dropped topics (their id high-water marks)'}")
    if held:
        raise ReshardRefused(f"resharding shards of keyspace {keyspace} that hold topics ({'; '.join(held)})")


def _ranges(workflow: str, names: Sequence[str], what: str) -> list[KeyRange]:
    if not names:
        raise WorkflowError(workflow, f"no {what} shards given")
    if len(set(names)) != len(names):
        raise WorkflowError(workflow, f"a {what} shard is listed twice: {','.join(names)}")
    try:
        ranges = [KeyRange.parse(n) for n in names]
    except InvalidShardName as e:
        raise WorkflowError(workflow, f"{what} shards: {e}") from e
    return sorted(ranges, key=lambda r: r.start)


def _tiling_gap(ranges: list[KeyRange]) -> str | None:
    """Why ``ranges`` (sorted) do not form one contiguous range, or None."""
    for prev, cur in zip(ranges, ranges[1:], strict=False):
        if not prev.end or prev.end > cur.start:
            return f"{prev.name} and {cur.name} overlap"
        if prev.end < cur.start:
            return f"gap between {prev.name} and {cur.name}"
    return None


def check_shards(
    workflow: str, topology: KeyspaceTopology, sources: Sequence[str], targets: Sequence[str], store: tuple[str, str]
) -> None:
    """Refuse unless the targets cover exactly the sources' key range and are new shards."""
    for source in sources:
        if source not in topology.serving:
            raise WorkflowError(
                workflow, f"source shard {topology.keyspace}/{source} does not serve (serving: {','.join(topology.serving)})"
            )
    if any(s == "0" for s in sources):
        raise ReshardRefused("resharding an unsharded keyspace (shard 0); a keyspace going from unsharded to sharded")
    source_ranges = _ranges(workflow, sources, "source")
    target_ranges = _ranges(workflow, targets, "target")
    gap = _tiling_gap(source_ranges)
    if gap:
        raise WorkflowError(workflow, f"source shards must be contiguous: {gap}")
    gap = _tiling_gap(target_ranges)
    if gap:
        raise WorkflowError(workflow, f"target shards do not cover the sources' key range: {gap}")
    if (source_ranges[0].start, source_ranges[-1].end) != (target_ranges[0].start, target_ranges[-1].end):
        raise WorkflowError(
            workflow,
            f"target shards {','.join(targets)} do not cover exactly the key range of source shards {','.join(sources)}",
        )
    for target in targets:
        if target in topology.shards:
            raise WorkflowError(workflow, f"target shard {topology.keyspace}/{target} already exists")
    if any((topology.keyspace, t) == store for t in targets):
        raise WorkflowError(
            workflow,
            f"target shard {store[0]}/{store[1]} has the name of the vschema store's shard, which keeps serving the "
            "store: set vschema_store in the cluster file to another shard (an unsharded keyspace's) first",
        )


def _target_spec(
    workflow: str, config: ClusterConfig, topologies: dict[str, KeyspaceTopology], keyspace: str, shard: str
) -> ShardEndpointSpec:
    ks = config.keyspaces[keyspace]
    if shard in ks.reshard_targets:
        return ShardEndpointSpec(ks.reshard_targets[shard])
    if config.local is not None and ks.local_shards:
        instance = allocate_local_shard(config, topologies, keyspace, shard)
        if instance.data_dir.exists():
            # A retired shard of the same name (a merge back) keeps its data dir: the new one gets its own.
            instance = replace(instance, data_dir=instance.data_dir.with_name(f"{instance.data_dir.name}.{instance.port}"))
        return local_endpoint_spec(keyspace, shard, instance)
    raise WorkflowError(
        workflow, f"target shard {keyspace}/{shard} has no server: give its dsn in keyspaces.{keyspace}.reshard_targets "
        f"of {config.path}"
    )


async def create_workflow(
    view: ClusterView, name: str, keyspace: str, sources: Sequence[str], targets: Sequence[str]
) -> Workflow:
    config = view.config
    if not _WORKFLOW_NAME.match(name):
        raise WorkflowError(name, "invalid name (letters, digits and _, not starting with a digit, at most 64)")
    if keyspace not in config.keyspaces:
        raise WorkflowError(name, f"unknown keyspace {keyspace!r} (cluster file {config.path})")
    if not config.keyspaces[keyspace].sharded:
        raise ReshardRefused("resharding an unsharded keyspace (shard 0); a keyspace going from unsharded to sharded")
    existing = await view.store.get(name)
    if existing is not None and not existing.state.finished:
        raise WorkflowError(name, f"already exists ({existing.state}; `cancel` or `complete` it first)")
    if existing is not None:
        await view.store.delete(name)  # a finished workflow's name may be used again
    for other in await view.store.list():
        if other.keyspace == keyspace and not other.state.finished:
            raise WorkflowError(name, f"keyspace {keyspace} is already being resharded by workflow {other.name}")
    topologies = await view.topologies()
    topology = topologies[keyspace]
    check_shards(name, topology, sources, targets, config.vschema_store_location)
    await refuse_topics(keyspace, {s: topology.endpoint(s) for s in sources}, sources)
    # Every table must have a copy key (table_schema.py) and a shard to go to before anything is created.
    try:
        tables = await read_tables(topology.endpoint(sources[0]))
        router = RowRouter(keyspace, await view.vschema(keyspace), targets)
        for table in tables:
            router.route(table.name)
    except (UnsupportedRouting, SchemaCopyError) as e:
        raise ReshardRefused(str(e)) from e
    except RoutingError as e:
        raise WorkflowError(name, str(e)) from e

    def add_targets(current: KeyspaceTopology) -> KeyspaceTopology:
        latest = {**topologies, keyspace: current}
        for target in targets:
            if target not in current.shards:
                spec = _target_spec(name, config, latest, keyspace, target)
                current = current.with_shard(target, spec)
                latest[keyspace] = current
        return current

    await view.change_topology(keyspace, add_targets)
    workflow = Workflow(name, keyspace, tuple(sources), tuple(targets), WorkflowState.COPYING)
    await view.store.insert(workflow)
    return workflow


def _drop_tables(endpoint: ShardEndpoint, tables: Sequence[str]) -> None:
    conn = connect_shard(**connection_kwargs(endpoint), database=endpoint.database)
    try:
        with conn.cursor() as cur:
            for table in tables:
                cur.execute(f"drop table if exists {quote_identifier(table)}")
    finally:
        conn.close()


async def _forget_positions(view: ClusterView, workflow: Workflow, shards: Sequence[str]) -> None:
    endpoints = await view.endpoints(workflow.keyspace)
    for shard in shards:
        writer = await ShardWriter.open(workflow.keyspace, shard, endpoints[shard])
        try:
            await writer.forget(workflow.name)
        finally:
            await writer.close()


@asynccontextmanager
async def streams_stopped(view: ClusterView, workflow: Workflow, state: WorkflowState, **changes: Any) -> AsyncIterator[Workflow]:
    """Move ``workflow`` to ``state`` (one no host streams in) and hold its lock for the block, so
    no host runs its streams meanwhile. If the hosts do not let go, the state is put back."""
    stopped = workflow.with_state(state, **changes)
    await view.store.save(stopped)
    async with view.store.locked(workflow.name, LOCK_WAIT_SECONDS) as held:
        if not held:
            await view.store.save(workflow, if_state=state)
            raise WorkflowError(workflow.name, f"its streams did not stop within {LOCK_WAIT_SECONDS:.0f} s")
        yield stopped


async def cancel_workflow(view: ClusterView, name: str) -> Workflow:
    workflow = await view.store.require(name)
    if workflow.state is WorkflowState.SWITCHED or workflow.reversed:
        raise WorkflowError(name, "traffic was switched: use reverse-traffic first, or complete")
    if workflow.state.finished:
        raise WorkflowError(name, f"is already {workflow.state}")
    if set(workflow.targets) & set((await view.topology(workflow.keyspace)).reads):
        raise WorkflowError(name, "reads were switched: use reverse-traffic first")
    async with streams_stopped(view, workflow, WorkflowState.CANCELLED) as cancelled:
        pass
    endpoints = await view.endpoints(workflow.keyspace)
    tables = [t.name for t in await read_tables(endpoints[workflow.sources[0]])]
    for target in workflow.targets:
        if target in endpoints:
            await _forget_positions(view, workflow, [target])
            await asyncio.to_thread(_drop_tables, endpoints[target], tables)
    await view.change_topology(
        workflow.keyspace, lambda t: t.without_shards([s for s in workflow.targets if s in t.shards])
    )
    await view.store.delete_copy_state(name)
    logger.info("workflow cancelled", extra={"workflow": name})
    return cancelled


async def complete_workflow(view: ClusterView, name: str) -> Workflow:
    workflow = await view.store.require(name)
    if workflow.state is not WorkflowState.SWITCHED:
        raise WorkflowError(name, f"is {workflow.state}: complete needs the traffic switched (switch-traffic)")
    if set(workflow.sources) & set((await view.topology(workflow.keyspace)).reads):
        raise WorkflowError(name, "reads were switched back to the sources: use switch-traffic --reads-only first")
    async with streams_stopped(view, workflow, WorkflowState.COMPLETED) as completed:
        pass
    await _forget_positions(view, workflow, [*workflow.sources, *workflow.targets])
    await view.change_topology(
        workflow.keyspace, lambda t: t.without_shards([s for s in workflow.sources if s in t.shards])
    )
    await view.store.delete_copy_state(name)
    logger.info("workflow completed", extra={"workflow": name, "retired": ",".join(workflow.sources)})
    return completed
