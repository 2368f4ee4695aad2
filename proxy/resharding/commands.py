"""``shardgate reshard -c cluster.yaml --workflow NAME --keyspace KS <verb>``: the command-line face.

Verbs (Vitess's): ``create``, ``status``, ``vdiff``, ``switch-traffic``, ``reverse-traffic``,
``complete``, ``cancel``. The streams themselves run in the ``shardgate up``/``serve`` process
(:mod:`proxy.resharding.host`); ``create`` waits for the copy and catch-up with a progress bar
(Ctrl-C only stops watching), ``vdiff`` and the traffic verbs take the workflow over for their
duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

import pymysql

from proxy.errors import ProxyError
from proxy.resharding.cluster_view import ClusterView
from proxy.resharding.lifecycle import cancel_workflow, complete_workflow, create_workflow
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.streams import SourceLag, workflow_lag
from proxy.resharding.table_schema import read_tables
from proxy.resharding.traffic import (
    DEFAULT_TIMEOUT_SECONDS,
    refuse_both_halves,
    switch_reads,
    switch_traffic,
)
from proxy.resharding.vdiff import report_json, report_lines, run_vdiff
from proxy.resharding.workflow import TableCopyState, Workflow, WorkflowState

CAUGHT_UP_SECONDS = 1.0
NO_HOST_HINT_SECONDS = 10.0
BAR_WIDTH = 30


@dataclass
class WorkflowStatus:
    workflow: Workflow
    copy: list[TableCopyState]
    lag: list[SourceLag]
    unreachable: str = ""  # why the lag could not be read
    # Where the keyspace's reads and writes go now (they differ after a reads-only switch).
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @property
    def rows_copied(self) -> int:
        return sum(c.rows_copied for c in self.copy)

    @property
    def max_lag(self) -> float:
        return max((lag.lag_seconds for lag in self.lag), default=float("inf"))

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow.name,
            "keyspace": self.workflow.keyspace,
            "state": str(self.workflow.state),
            "source_shards": list(self.workflow.sources),
            "target_shards": list(self.workflow.targets),
            "reversed": self.workflow.reversed,
            "rows_copied": self.rows_copied,
            "copy_state": [asdict(c) | {"lastpk": None if c.lastpk is None else list(c.lastpk)} for c in self.copy],
            "lag": [asdict(lag) for lag in self.lag],
            "unreachable": self.unreachable,
            "reads": list(self.reads),
            "writes": list(self.writes),
        }

    def lines(self) -> list[str]:
        wf = self.workflow
        direction = f"{','.join(wf.targets)} -> {','.join(wf.sources)} (reverse)" if wf.reversed else (
            f"{','.join(wf.sources)} -> {','.join(wf.targets)}"
        )
        out = [f"workflow {wf.name}: keyspace {wf.keyspace}, {direction}, state {wf.state}"]
        if self.reads != self.writes:
            out.append(f"  reads switched: reads go to {','.join(self.reads)}, writes to {','.join(self.writes)}")
        for c in self.copy:
            out.append(f"  copy {c.source}/{c.table}: {c.rows_copied} rows{' (done)' if c.done else ''}")
        for lag in self.lag:
            shown = "unknown" if lag.lag_seconds == float("inf") else f"{lag.lag_seconds:.1f} s"
            out.append(f"  stream {lag.source} -> {lag.target}: lag {shown} (applied {lag.applied or '-'})")
        if self.unreachable:
            out.append(f"  lag unknown: {self.unreachable}")
        return out


async def workflow_status(view: ClusterView, name: str) -> WorkflowStatus:
    workflow = await view.store.require(name)
    copy = await view.store.copy_states(name)
    lags: list[SourceLag] = []
    unreachable = ""
    if not workflow.state.finished:
        endpoints = await view.endpoints(workflow.keyspace)
        writers = {}
        try:
            for target in workflow.streaming_targets:
                writers[target] = await ShardWriter.open(workflow.keyspace, target, endpoints[target])
            lags = await workflow_lag(workflow, endpoints, writers)
        except (ProxyError, pymysql.MySQLError, OSError) as e:
            # A target not started yet (the host starts it) or down: the lag is unknown, not an error.
            unreachable = str(e.message if isinstance(e, ProxyError) else e)
        finally:
            for writer in writers.values():
                await writer.close()
    topology = await view.topology(workflow.keyspace)
    return WorkflowStatus(workflow, copy, lags, unreachable, topology.reads, topology.serving)


def _bar(done: int, total: int) -> str:
    fraction = min(1.0, done / total) if total else 1.0
    filled = int(fraction * BAR_WIDTH)
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


async def wait_caught_up(view: ClusterView, name: str, out: TextIO, timeout_seconds: float | None = None) -> WorkflowStatus:
    """Show progress until the workflow is Running with every target under a second behind."""
    started = time.monotonic()
    hinted = False
    tables_total = 0
    while True:
        status = await workflow_status(view, name)
        wf = status.workflow
        if not tables_total:
            tables_total = max(1, len(wf.sources) * len(await read_tables((await view.endpoints(wf.keyspace))[wf.sources[0]])))
        tables_done = sum(1 for c in status.copy if c.done)
        if wf.state is WorkflowState.COPYING:
            line = f"copying {_bar(tables_done, tables_total)} {tables_done}/{tables_total} tables, {status.rows_copied} rows"
        else:
            lag = status.max_lag
            line = f"{wf.state}: {status.rows_copied} rows copied, lag " + ("unknown" if lag == float("inf") else f"{lag:.1f} s")
        out.write("\r" + line.ljust(79))
        out.flush()
        if wf.state is not WorkflowState.COPYING and status.max_lag <= CAUGHT_UP_SECONDS or wf.state.finished:
            out.write("\n")
            return status
        elapsed = time.monotonic() - started
        if not hinted and elapsed > NO_HOST_HINT_SECONDS and status.rows_copied == 0:
            async with view.store.locked(name, 0) as held:
                if held:
                    out.write(
                        "\nno process runs this workflow: start `shardgate up` (or `serve`) with this cluster file\n"
                    )
                    hinted = True
        if timeout_seconds is not None and elapsed > timeout_seconds:
            out.write("\n")
            return status
        await asyncio.sleep(0.5)


def _shards(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


async def run_command(config: Any, args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    view = ClusterView(config)
    try:
        verb: Callable[[], Awaitable[int]]
        name = args.workflow

        async def create() -> int:
            workflow = await create_workflow(view, name, args.keyspace, _shards(args.source_shards), _shards(args.target_shards))
            out.write(
                f"workflow {workflow.name} created: {args.keyspace} {','.join(workflow.sources)} -> "
                f"{','.join(workflow.targets)}\n"
            )
            if not args.no_wait:
                await wait_caught_up(view, name, sys.stderr, args.timeout)
            return 0

        async def status() -> int:
            result = await workflow_status(view, name)
            if args.json:
                out.write(json.dumps(result.to_json(), indent=2) + "\n")
            else:
                out.write("\n".join(result.lines()) + "\n")
            return 0

        async def vdiff() -> int:
            report = await run_vdiff(view, name)
            if args.json:
                out.write(json.dumps(report_json(report), indent=2) + "\n")
            else:
                out.write("\n".join(report_lines(report)) + "\n")
            return 0 if report.clean else 1

        async def reads(reverse: bool) -> int:
            lag = (await workflow_status(view, name)).max_lag
            workflow, topology = await switch_reads(view, name, reverse=reverse, lag_seconds=lag)
            out.write(f"workflow {name}: reads switched to {','.join(workflow.sources if reverse else workflow.targets)} "
                      f"(reads: {','.join(topology.reads)}; writes: {','.join(topology.serving)})\n")
            return 0

        async def switch() -> int:
            refuse_both_halves("switch-traffic", args.reads_only, args.writes_only)
            if args.reads_only:
                return await reads(reverse=False)
            workflow = await switch_traffic(view, name, timeout_seconds=args.timeout or DEFAULT_TIMEOUT_SECONDS)
            out.write(f"workflow {name}: traffic switched to {','.join(workflow.targets)}\n")
            return 0

        async def reverse() -> int:
            refuse_both_halves("reverse-traffic", args.reads_only, args.writes_only)
            workflow = await view.store.require(name)
            # Only the reads were switched (the writes never were): reversing means the reads.
            only_reads = workflow.state is WorkflowState.RUNNING and not workflow.reversed and not args.writes_only and (
                await view.topology(workflow.keyspace)).reading is not None
            if args.reads_only or only_reads:
                return await reads(reverse=True)
            workflow = await switch_traffic(view, name, reverse=True, timeout_seconds=args.timeout or DEFAULT_TIMEOUT_SECONDS)
            out.write(f"workflow {name}: traffic switched back to {','.join(workflow.sources)}\n")
            return 0

        async def complete() -> int:
            workflow = await complete_workflow(view, name)
            out.write(f"workflow {name} completed: {','.join(workflow.sources)} retired\n")
            return 0

        async def cancel() -> int:
            workflow = await cancel_workflow(view, name)
            out.write(f"workflow {name} cancelled: {','.join(workflow.targets)} removed\n")
            return 0

        verbs: dict[str, Callable[[], Awaitable[int]]] = {
            "create": create, "status": status, "vdiff": vdiff, "switch-traffic": switch,
            "reverse-traffic": reverse, "complete": complete, "cancel": cancel,
        }  # fmt: skip
        verb = verbs[args.verb]
        return await verb()
    finally:
        await view.close()
