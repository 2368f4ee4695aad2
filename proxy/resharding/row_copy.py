"""The copy phase: every row of every table of the source shards into the target its key picks.

Per source shard, one consistent snapshot (:class:`proxy.cdc.table_copy.ShardSnapshot`: the rows
and the exact GTID position they match), then table by table ``where (pk) > (lastpk) order by pk
limit chunk``; each chunk is split by target (:class:`RowRouter`), written with ``REPLACE`` and
then its last key is saved (Vitess's ``copy_state``). A copy stopped anywhere resumes after the
last saved chunk; a chunk written but not recorded is written again, to the same effect.

The position of a source's *first* snapshot is kept (``Workflow.copy_start``) and every target
starts applying that source's binlog from there: rows a resumed copy read from a later snapshot
are older than changes replayed after them only until the replay passes that snapshot, and the
replay is idempotent (``REPLACE``/``DELETE`` by primary key), so the targets converge on the
sources' state (Vitess fast-forwards to each snapshot instead; same end state).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from proxy.cdc.binlog_decoder import ShardEndpointLike
from proxy.cdc.table_copy import ShardSnapshot
from proxy.resharding.row_routing import RowRouter, TableRoute, replace_sql
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.table_schema import TableSchema
from proxy.resharding.workflow import Workflow, WorkflowStore, lastpk_literals, lastpk_to_json
from sqltext.quoting import quote_identifier

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_ROWS = 2000


@dataclass
class CopyProgress:
    """Rows copied so far, per (source shard, table); for status, metrics and the progress bar."""

    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _chunk(snapshot: ShardSnapshot, table: TableSchema, lastpk: str | None, limit: int) -> list[dict]:
    names = ", ".join(quote_identifier(c) for c in table.pk_columns)
    where = ""
    if lastpk is not None:
        where = f" where ({names}) > ({', '.join(lastpk_literals(lastpk))})"
    with snapshot.conn.cursor() as cur:
        cur.execute(f"select * from {quote_identifier(table.name)}{where} order by {names} limit {int(limit)}")
        columns = [d[0] for d in cur.description]
        return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def _render(router: RowRouter, route: TableRoute, table: TableSchema, rows: list[dict]) -> dict[str, str]:
    """One ``REPLACE`` per target that gets rows of the chunk."""
    return {
        target: replace_sql(table.name, table.columns, target_rows)
        for target, target_rows in router.split(route, rows).items()
        if target_rows
    }


async def copy_source(
    workflow: Workflow,
    source: str,
    endpoint: ShardEndpointLike,
    tables: list[TableSchema],
    router: RowRouter,
    writers: Mapping[str, ShardWriter],
    store: WorkflowStore,
    progress: CopyProgress,
    on_snapshot: Callable[[str, str], asyncio.Future | object],
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> None:
    """Copy what is left of ``source``'s tables. ``on_snapshot(source, gtid)`` is awaited once the
    snapshot is taken, before any row is written (it records the first snapshot's position)."""
    snapshot = await asyncio.to_thread(ShardSnapshot.take, (workflow.keyspace, source), endpoint)
    try:
        await on_snapshot(source, str(snapshot.position))  # type: ignore[misc]
        for table in tables:
            lastpk, copied, done = await store.lastpk_text(workflow.name, source, table.name)
            progress.rows[(source, table.name)] = copied
            if done:
                continue
            route = router.route(table.name)
            rows = await asyncio.to_thread(_chunk, snapshot, table, lastpk, chunk_rows)
            while rows:
                last = rows[-1]
                lastpk = lastpk_to_json(tuple(last[c] for c in table.pk_columns))
                # The next chunk is read while this one is written: the copy waits on the source or the
                # targets, not on both in turn.
                more = len(rows) == chunk_rows
                reading = asyncio.create_task(asyncio.to_thread(_chunk, snapshot, table, lastpk, chunk_rows)) if more else None
                try:
                    # Placing and rendering a chunk is ~20 us a row of pure Python: in a thread, so
                    # the proxy sharing this event loop (shardgate up) is not stalled for a chunk.
                    statements = await asyncio.to_thread(_render, router, route, table, rows)
                    await asyncio.gather(*(writers[target].write([sql]) for target, sql in statements.items()))
                    copied += len(rows)
                    progress.rows[(source, table.name)] = copied
                    await store.save_copy_progress(workflow.name, source, table.name, lastpk, copied, False)
                    rows = await reading if reading is not None else []
                finally:
                    if reading is not None and not reading.done():
                        reading.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await reading
            await store.save_copy_progress(workflow.name, source, table.name, lastpk, copied, True)
            logger.info(
                "table copied", extra={"workflow": workflow.name, "source": source, "table": table.name, "rows": copied}
            )
    finally:
        await asyncio.to_thread(snapshot.close)
