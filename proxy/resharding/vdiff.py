"""VDiff: compare a workflow's sources and targets row by row while the application keeps writing.

1. Stop the workflow's streams (its lock).
2. Take a consistent snapshot of every source: the rows and the GTID position ``P`` they match.
3. Run the catch-up until every target applied exactly ``P`` of every source, and stop there: the
   targets, which nothing else writes before the switch, then hold what the snapshots hold.
4. Per target and table, walk the target's rows and the sources' rows that belong to that target
   (:class:`RowRouter`), both ordered by primary key, in chunks; report rows missing on the target,
   extra on it, and different, with a few example keys.
5. Let the streams run again (whatever the outcome).

Both sides are read in the shards' key order (``order by pk``, on the copy key's index) and merged
in Python, so Python must order keys as the shards do. Integer, temporal, decimal and binary keys
order the same in Python; a text key does not (``utf8mb4_general_ci``: 'a' = 'A' = 'ä', trailing
spaces ignored; 'B' < 'b ' < 'c'), and a Python order would put the streams out of step (every
row a missing+extra pair). So a text key column is merged by the server's own sort key for it,
``weight_string(col as char(N))`` (the collation's weights, padded to the column's length as a
PAD SPACE collation compares; a NO PAD collation without the padding), an ENUM/SET one by its
number (how it sorts). Rows matched by key are then compared exactly, key values included: a
target holding 'A' where the source holds 'a' is a different row, not a clean one.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from proxy.cdc.binlog_decoder import connect_shard, connection_kwargs
from proxy.cdc.table_copy import ShardSnapshot
from proxy.config import ShardEndpoint
from proxy.resharding.cluster_view import ClusterView
from proxy.resharding.lifecycle import streams_stopped
from proxy.resharding.row_routing import RowRouter, TableRoute
from proxy.resharding.streams import WorkflowStreams
from proxy.resharding.table_schema import TableSchema, read_tables
from proxy.resharding.workflow import WorkflowError, WorkflowState
from sqltext.quoting import quote_identifier

logger = logging.getLogger(__name__)

CHUNK_ROWS = 5000
EXAMPLES = 5
DEFAULT_TIMEOUT_SECONDS = 60.0


@dataclass
class TableDiff:
    table: str
    target: str
    compared: int = 0
    missing: int = 0  # on the sources, not on the target
    extra: int = 0  # on the target, not on the sources
    different: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def note(self, kind: str, key: tuple[Any, ...]) -> None:
        if len(self.examples) < EXAMPLES:
            self.examples.append(f"{kind} {key!r}")


@dataclass
class VDiffReport:
    workflow: str
    positions: dict[str, str]
    tables: list[TableDiff]

    @property
    def clean(self) -> bool:
        return all(t.clean for t in self.tables)


_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_PADDED_TYPES = frozenset({"char", "varchar"})  # weight_string(... as char(N)) pads to N: bounded for these


def sort_key_sql(column: str, kind: tuple[str, int | None, str | None]) -> str | None:
    """The SQL whose value orders ``column`` as the server's ORDER BY does, where Python's order
    of the value itself would not (None: the value orders alike in Python)."""
    data_type, length, collation = kind
    name = quote_identifier(column)
    if data_type in ("enum", "set"):
        return f"{name} + 0"
    if data_type not in _TEXT_TYPES or collation is None:
        return None
    if data_type in _PADDED_TYPES and length and "nopad" not in collation.lower():
        return f"weight_string({name} as char({int(length)}))"
    return f"weight_string({name})"


def _ordered_rows(conn: pymysql.Connection, table: TableSchema) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """(sort key, row) of every row of ``table`` in the shard's key order, read in chunks."""
    names = ", ".join(quote_identifier(c) for c in table.pk_columns)
    width = len(table.columns)
    kinds = table.pk_types or tuple(("", None, None) for _ in table.pk_columns)
    sort_sql = [sort_key_sql(c, k) for c, k in zip(table.pk_columns, kinds, strict=True)]
    extra = [sql for sql in sort_sql if sql is not None]
    select = ", ".join([quote_identifier(c) for c in table.columns] + extra)
    pk_index = [table.columns.index(c) for c in table.pk_columns]
    positions: list[int] = []  # where each key part is in a fetched row: the column, or its sort key
    for i, sql in zip(pk_index, sort_sql, strict=True):
        positions.append(i if sql is None else width + len([p for p in positions if p >= width]))
    last: tuple[Any, ...] | None = None
    while True:
        where = ""
        args: tuple[Any, ...] = ()
        if last is not None:
            where = f" where ({names}) > ({', '.join(['%s'] * len(last))})"
            args = last
        with conn.cursor() as cur:
            cur.execute(f"select {select} from {quote_identifier(table.name)}{where} order by {names} limit {CHUNK_ROWS}", args)
            rows = cur.fetchall()
        for row in rows:
            yield tuple(row[i] for i in positions), tuple(row[:width])
        if len(rows) < CHUNK_ROWS:
            return
        last = tuple(rows[-1][i] for i in pk_index)


def _diff_table(
    sources: Sequence[pymysql.Connection],
    target: pymysql.Connection,
    target_name: str,
    table: TableSchema,
    route: TableRoute,
    router: RowRouter,
) -> TableDiff:
    diff = TableDiff(table.name, target_name)
    pk_index = [table.columns.index(c) for c in table.pk_columns]

    def key(item: tuple[tuple[Any, ...], tuple[Any, ...]]) -> tuple[Any, ...]:
        return tuple(item[1][i] for i in pk_index)  # the key's values, for the examples

    def belongs(item: tuple[tuple[Any, ...], tuple[Any, ...]]) -> bool:
        return target_name in router.targets_of(route, dict(zip(table.columns, item[1], strict=True)))

    # A reference table is whole on every source: compare with the first one.
    source_conns = sources[:1] if route.reference else sources
    expected = heapq.merge(*(filter(belongs, _ordered_rows(c, table)) for c in source_conns), key=lambda i: i[0])
    actual = _ordered_rows(target, table)
    want = next(expected, None)
    have = next(actual, None)
    while want is not None or have is not None:
        diff.compared += 1
        if have is None or (want is not None and want[0] < have[0]):
            diff.missing += 1
            diff.note("missing", key(want))  # type: ignore[arg-type]
            want = next(expected, None)
        elif want is None or have[0] < want[0]:
            diff.extra += 1
            diff.note("extra", key(have))
            have = next(actual, None)
        else:
            if want[1] != have[1]:
                diff.different += 1
                diff.note("different", key(want))
            want = next(expected, None)
            have = next(actual, None)
    return diff


def _connect(endpoint: ShardEndpoint) -> pymysql.Connection:
    return connect_shard(**connection_kwargs(endpoint), database=endpoint.database)


async def run_vdiff(view: ClusterView, name: str, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> VDiffReport:
    workflow = await view.store.require(name)
    if workflow.state not in (WorkflowState.RUNNING, WorkflowState.SWITCHED):
        raise WorkflowError(name, f"is {workflow.state}: vdiff needs the copy finished (Running)")
    endpoints = await view.endpoints(workflow.keyspace)
    async with streams_stopped(view, workflow, WorkflowState.STOPPED, resume_state=str(workflow.state)):
        snapshots: list[ShardSnapshot] = []
        targets: dict[str, pymysql.Connection] = {}
        streams = WorkflowStreams(view.config, view.store, workflow, endpoints, await view.vschema(workflow.keyspace))
        try:
            for source in workflow.streaming_sources:
                snapshots.append(await asyncio.to_thread(ShardSnapshot.take, (workflow.keyspace, source), endpoints[source]))
            positions = {s.key[1]: s.position for s in snapshots}
            await streams.open()
            try:
                await streams.catch_up_to(positions, timeout_seconds)
            except TimeoutError as e:
                raise WorkflowError(name, f"targets did not reach the snapshot positions within {timeout_seconds:.0f} s") from e
            tables = await read_tables(endpoints[workflow.streaming_sources[0]])
            for target in workflow.streaming_targets:
                targets[target] = await asyncio.to_thread(_connect, endpoints[target])
            diffs = []
            for table in tables:
                route = streams.router.route(table.name)
                for target, conn in targets.items():
                    diffs.append(
                        await asyncio.to_thread(
                            _diff_table, [s.conn for s in snapshots], conn, target, table, route, streams.router
                        )
                    )
        finally:
            await streams.close()
            for snapshot in snapshots:
                await asyncio.to_thread(snapshot.close)
            for conn in targets.values():
                await asyncio.to_thread(conn.close)
            await view.store.save(workflow, if_state=WorkflowState.STOPPED)  # the streams run again
    report = VDiffReport(name, {s: str(p) for s, p in positions.items()}, diffs)
    logger.info("vdiff done", extra={"workflow": name, "clean": report.clean})
    return report


def report_lines(report: VDiffReport) -> list[str]:
    lines = [f"vdiff of workflow {report.workflow} at {', '.join(f'{s}@{p}' for s, p in report.positions.items())}"]
    for t in report.tables:
        state = "clean" if t.clean else f"missing={t.missing} extra={t.extra} different={t.different}"
        lines.append(f"  {t.table} on {t.target}: {t.compared} rows compared, {state}")
        lines.extend(f"    {example}" for example in t.examples)
    lines.append("result: " + ("clean" if report.clean else "DIFFERENCES FOUND"))
    return lines


def report_json(report: VDiffReport) -> Mapping[str, Any]:
    return {
        "workflow": report.workflow,
        "positions": report.positions,
        "clean": report.clean,
        "tables": [t.__dict__ | {"clean": t.clean} for t in report.tables],
    }
