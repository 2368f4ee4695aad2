"""SwitchTraffic and ReverseTraffic: moving a keyspace's serving from one set of shards to another.

The order is Vitess's (``go/vt/vtctl/workflow/traffic_switcher.go``):

1. refuse if the streams lag more than ``max_lag_seconds``; stop the workflow's streams (its lock);
2. deny writes on the shards losing traffic (:mod:`proxy.resharding.denied_writes`: the proxies hold
   the refused writes until the topology changes, a bounded wait, instead of failing them);
3. wait until the gaining shards applied everything up to the losing shards' final positions;
4. write the journal into every losing shard's binlog, naming each gaining shard's position (the
   point of no return: CDC streams move over at it);
5. allow writes on the gaining shards, flip the serving topology (every proxy follows within its
   poll interval, and the held writes go to the gaining shards);
6. start the stream the other way (the reverse replication), from the gaining shards' positions of
   step 4, so ``reverse-traffic`` can undo the switch with nothing lost.

A failure before step 4 allows the writes again and puts the workflow back as it was.

Reads may switch first (``--reads-only``, :func:`switch_reads`; Vitess switches the replica and
rdonly reads before the primary's writes): the topology's read list (``reading``, see
:mod:`proxy.resharding.topology`) then names the shards the stream keeps up to date, and SELECTs
outside transactions go there while writes stay. Nothing stops and no journal is written: reads
move no data. The write switch above (``--writes-only`` or plain) moves the reads with the
writes; ``reverse-traffic --reads-only`` (or plain, when only the reads were switched) moves them
back. Reads from the shards the stream follows see its lag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from proxy.cdc.positions import GtidPosition
from proxy.config import ShardEndpoint
from proxy.resharding.cluster_view import ClusterView, shard_pool
from proxy.resharding.denied_writes import allow_writes, deny_writes
from proxy.resharding.journal import (
    MIGRATION_SHARDS,
    Journal,
    KeyspaceShard,
    ShardGtid,
    journal_id,
    write_journal,
)
from proxy.resharding.lifecycle import ReshardRefused, refuse_topics, streams_stopped
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.streams import WorkflowStreams, current_position
from proxy.resharding.table_schema import read_tables
from proxy.resharding.topology import KeyspaceTopology
from proxy.resharding.workflow import Workflow, WorkflowError, WorkflowState

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_LAG_SECONDS = 30.0


def refuse_both_halves(verb: str, reads_only: bool, writes_only: bool) -> None:
    if reads_only and writes_only:
        raise ReshardRefused(f"{verb} --reads-only --writes-only together (give neither to switch both)")


async def switch_reads(view: ClusterView, name: str, *, reverse: bool = False, lag_seconds: float = 0.0,
                       max_lag_seconds: float = DEFAULT_MAX_LAG_SECONDS) -> tuple[Workflow, KeyspaceTopology]:
    """``switch-traffic --reads-only`` (reads to the targets) or ``reverse-traffic --reads-only``
    (reads to the sources), writes untouched; ``lag_seconds``: the streams' current lag (the
    shards gaining reads must be caught up, as for the write switch)."""
    workflow = await view.store.require(name)
    if workflow.state not in (WorkflowState.RUNNING, WorkflowState.SWITCHED):
        hint = "the copy is still running" if workflow.state is WorkflowState.COPYING else f"it is {workflow.state}"
        raise WorkflowError(name, f"cannot switch reads: {hint}")
    gaining, losing = (workflow.sources, workflow.targets) if reverse else (workflow.targets, workflow.sources)
    # The shards gaining reads must be kept up to date: the forward stream (Running) keeps the
    # targets so, the reverse stream (Switched) the sources; the serving ones are so anyway.
    topology = await view.topology(workflow.keyspace)
    kept_current = set(topology.serving) | set(workflow.streaming_targets)
    if not set(gaining) <= kept_current:
        raise WorkflowError(name, f"cannot switch reads to {','.join(gaining)}: no stream keeps them up to date")
    if lag_seconds > max_lag_seconds and not set(gaining) <= set(topology.serving):
        raise WorkflowError(name, f"targets lag {lag_seconds:.1f} s behind (more than {max_lag_seconds:.0f} s): try again later")
    topology = await view.change_topology(
        workflow.keyspace,
        lambda t: t.with_reading([s for s in t.reads if s not in losing] + [s for s in gaining if s not in t.reads]),
    )
    logger.info("reads switched", extra={"workflow": name, "to": ",".join(gaining), "reading": ",".join(topology.reads),
                                         "serving": ",".join(topology.serving)})
    return workflow, topology


async def _set_writes(keyspace: str, endpoints: Mapping[str, ShardEndpoint], shards: Sequence[str], tables: list[str], deny: bool, wait_seconds: float) -> None:
    for shard in shards:
        pool = shard_pool(keyspace, shard, endpoints[shard])
        try:
            async with pool.connection() as sc:
                change = deny_writes if deny else allow_writes
                await change(sc, endpoints[shard].database, tables, wait_seconds)
        finally:
            await pool.close()


async def _write_journals(workflow: Workflow, endpoints: Mapping[str, ShardEndpoint], losing: Sequence[str], gaining: Mapping[str, GtidPosition], tables: list[str]) -> None:
    participants = tuple(KeyspaceShard(workflow.keyspace, s) for s in losing)
    journal = Journal(
        # One id per switch: the same workflow switching the same shards again writes a new journal.
        id=journal_id(f"{workflow.name}#{workflow.switches + 1}", workflow.keyspace, participants),
        migration_type=MIGRATION_SHARDS,
        keyspace=workflow.keyspace,
        tables=tuple(tables),
        shard_gtids=tuple(ShardGtid(workflow.keyspace, s, str(p)) for s, p in gaining.items()),
        participants=participants,
        source_workflows=(workflow.name,),
    )
    for shard in losing:
        pool = shard_pool(workflow.keyspace, shard, endpoints[shard])
        try:
            async with pool.connection() as sc:
                await write_journal(sc, journal)
        finally:
            await pool.close()


async def _restart_positions(
    workflow: Workflow, endpoints: Mapping[str, ShardEndpoint], writers_of: Sequence[str], starts: Mapping[str, GtidPosition]
) -> None:
    """The stream of the new direction writes to ``writers_of`` from the gaining shards' ``starts``:
    record those as applied (nothing else is to apply: writes were denied everywhere till now)."""
    now = time.time()
    for shard in writers_of:
        writer = await ShardWriter.open(workflow.keyspace, shard, endpoints[shard])
        try:
            await writer.forget(workflow.name)
            await writer.write([writer.position_sql(workflow.name, s, str(p), now) for s, p in starts.items()])
        finally:
            await writer.close()


async def switch_traffic(
    view: ClusterView,
    name: str,
    *,
    reverse: bool = False,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    max_lag_seconds: float = DEFAULT_MAX_LAG_SECONDS,
) -> Workflow:
    """``switch-traffic`` (sources -> targets), or with ``reverse`` ``reverse-traffic`` (back)."""
    workflow = await view.store.require(name)
    if reverse and not (workflow.state is WorkflowState.SWITCHED and workflow.reversed):
        raise WorkflowError(name, f"is {workflow.state}: reverse-traffic needs the traffic switched")
    if not reverse and not (workflow.state is WorkflowState.RUNNING and not workflow.reversed):
        hint = "the copy is still running" if workflow.state is WorkflowState.COPYING else f"it is {workflow.state}"
        raise WorkflowError(name, f"cannot switch traffic: {hint}")
    losing, gaining = workflow.streaming_sources, workflow.streaming_targets
    endpoints = await view.endpoints(workflow.keyspace)
    await refuse_topics(workflow.keyspace, endpoints, losing)  # a topic created there since `create`
    tables = [t.name for t in await read_tables(endpoints[losing[0]])]
    async with streams_stopped(view, workflow, WorkflowState.STOPPED, resume_state=str(workflow.state)):
        streams = WorkflowStreams(view.config, view.store, workflow, endpoints, await view.vschema(workflow.keyspace))
        try:
            await streams.open()
            lags = await streams.lag()
            worst = max((lag.lag_seconds for lag in lags), default=0.0)
            if worst > max_lag_seconds:
                raise WorkflowError(name, f"targets lag {worst:.1f} s behind (more than {max_lag_seconds:.0f} s): try again later")
            async with streams.follow_until_told() as finish:
                started = time.monotonic()
                await _set_writes(workflow.keyspace, endpoints, losing, tables, True, timeout_seconds)
                denied = time.monotonic()
                try:
                    final = {s: await current_position(endpoints[s]) for s in losing}
                    await finish(final, timeout_seconds)
                except BaseException:
                    await _set_writes(workflow.keyspace, endpoints, losing, tables, False, timeout_seconds)
                    raise
            caught_up = time.monotonic()
        except BaseException as e:
            await view.store.save(workflow, if_state=WorkflowState.STOPPED)  # back as it was: streams resume
            if isinstance(e, TimeoutError):
                raise WorkflowError(name, f"targets did not catch up within {timeout_seconds:.0f} s; writes allowed again") from e
            raise
        finally:
            await streams.close()
        starts = {s: await current_position(endpoints[s]) for s in gaining}
        await _write_journals(workflow, endpoints, losing, starts, tables)
        # Past the journal: a failure from here on is finished by running the command again.
        await _set_writes(workflow.keyspace, endpoints, gaining, tables, False, timeout_seconds)
        await view.change_topology(
            workflow.keyspace,
            lambda t: t.with_serving([s for s in t.serving if s not in losing] + [s for s in gaining if s not in t.serving]),
        )
        flipped = time.monotonic()
        logger.info(
            "switch timings",
            extra={"workflow": name, "deny_s": round(denied - started, 3), "catch_up_s": round(caught_up - denied, 3),
                   "journal_and_flip_s": round(flipped - caught_up, 3), "writes_stopped_s": round(flipped - denied, 3)},
        )
        await _restart_positions(workflow, endpoints, losing, starts)
        switched = workflow.with_state(
            WorkflowState.RUNNING if reverse else WorkflowState.SWITCHED,
            reversed=not reverse,
            # The stream of the new direction starts at the gaining shards' positions of the journal.
            copy_start={s: str(p) for s, p in starts.items()},
            switches=workflow.switches + 1,
            resume_state=None,
        )
        await view.store.save(switched)
    logger.info(
        "traffic switched",
        extra={"workflow": name, "from": ",".join(losing), "to": ",".join(gaining), "reverse": reverse},
    )
    return switched
