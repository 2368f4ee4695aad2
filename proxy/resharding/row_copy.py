"""The copy phase: every row of every table of the source shards into the target its key picks.

Per source shard, one consistent snapshot (:class:`proxy.cdc.table_copy.ShardSnapshot`: the rows
and the exact GTID position they match), then table by table ``where (pk) > (lastpk) order by pk
limit chunk``, its values read undecoded (text protocol bytes); each chunk is split by target
(:class:`RowRouter`, on the one vindex column's decoded value), written with one multi-row
``REPLACE`` per target whose literals are the source's text rendered by the one literal renderer
(``sqltext.quoting.text_value_literal``), and then its last key is saved (Vitess's ``copy_state``). A copy stopped anywhere resumes after the
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
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pymysql.converters
from pymysql.constants import FIELD_TYPE

from proxy import pymysql_internals
from proxy.cdc.binlog_decoder import ShardEndpointLike
from proxy.cdc.table_copy import ShardSnapshot
from proxy.resharding.row_routing import RowRouter, TableRoute
from proxy.resharding.shard_writer import ShardWriter
from proxy.resharding.table_schema import TableSchema
from proxy.resharding.workflow import Workflow, WorkflowStore, lastpk_literals
from sqltext.quoting import TextValueKind, quote_identifier, text_value_literal

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


# Result column types (PyMySQL's FIELD_TYPE codes) whose text values are written back unquoted,
# and the temporal ones: the server tags those with the binary charset, yet they are text.
_NUMBER_TYPES = frozenset({FIELD_TYPE.DECIMAL, FIELD_TYPE.TINY, FIELD_TYPE.SHORT, FIELD_TYPE.LONG, FIELD_TYPE.FLOAT,
                           FIELD_TYPE.DOUBLE, FIELD_TYPE.LONGLONG, FIELD_TYPE.INT24, FIELD_TYPE.YEAR,
                           FIELD_TYPE.NEWDECIMAL})
_TEMPORAL_TYPES = frozenset({FIELD_TYPE.TIMESTAMP, FIELD_TYPE.DATE, FIELD_TYPE.TIME, FIELD_TYPE.DATETIME,
                             FIELD_TYPE.NEWDATE})
# PyMySQL's TEXT_TYPES: decoded by the connection's charset unless the column's is binary.
_STRING_TYPES = frozenset({FIELD_TYPE.BIT, FIELD_TYPE.BLOB, FIELD_TYPE.LONG_BLOB, FIELD_TYPE.MEDIUM_BLOB,
                           FIELD_TYPE.STRING, FIELD_TYPE.TINY_BLOB, FIELD_TYPE.VAR_STRING, FIELD_TYPE.VARCHAR,
                           FIELD_TYPE.GEOMETRY})
_BINARY_CHARSET = 63

RawRow = tuple[bytes | None, ...]


def _literal_kind(field: Any) -> TextValueKind:
    """How a result column's raw text values are written back (``text_value_literal``)."""
    if field.type_code in _NUMBER_TYPES:
        return TextValueKind.NUMBER
    if field.type_code == FIELD_TYPE.BIT or (
        field.charsetnr == _BINARY_CHARSET and field.type_code in _STRING_TYPES
    ):
        return TextValueKind.BYTES  # binary strings, BIT, GEOMETRY: hexadecimal, no charset in between
    return TextValueKind.STRING  # text, JSON, temporal values, ENUM/SET


def _typed(field: Any, raw: bytes | None) -> Any:
    """``raw`` as PyMySQL would have given it (what the vindexes take), for the one column a row
    is placed by."""
    if raw is None:
        return None
    value: Any = raw
    if field.type_code == FIELD_TYPE.JSON or field.type_code not in _STRING_TYPES or field.charsetnr != _BINARY_CHARSET:
        value = raw.decode("utf-8", "surrogateescape")
    convert = pymysql.converters.decoders.get(field.type_code)
    return value if convert is None or convert is pymysql.converters.through else convert(value)


@dataclass
class RawChunk:
    """A chunk of rows as the source sent them (text protocol values, undecoded: the copy writes
    them back as literals without making Python values of them), in ``TableSchema.columns`` order."""

    rows: list[RawRow]
    fields: tuple[Any, ...]  # PyMySQL's column definitions (type_code, charsetnr)
    kinds: tuple[TextValueKind, ...]


def _chunk(snapshot: ShardSnapshot, table: TableSchema, lastpk: str | None, limit: int) -> RawChunk:
    names = ", ".join(quote_identifier(c) for c in table.pk_columns)
    select = ", ".join(quote_identifier(c) for c in table.columns)
    where = ""
    if lastpk is not None:
        where = f" where ({names}) > ({', '.join(lastpk_literals(lastpk))})"
    with pymysql_internals.raw_values(snapshot.conn), snapshot.conn.cursor() as cur:
        cur.execute(f"select {select} from {quote_identifier(table.name)}{where} order by {names} limit {int(limit)}")
        fields = tuple(pymysql_internals.result_fields(cur))
        rows = list(cur.fetchall())
    return RawChunk(rows, fields, tuple(_literal_kind(f) for f in fields))


def _lastpk(table: TableSchema, chunk: RawChunk) -> str:
    """The chunk's last key as ``lastpk_to_json`` stores it: binary values as hex, others as literals."""
    last = chunk.rows[-1]
    parts: list[Any] = []
    for column in table.pk_columns:
        i = table.columns.index(column)
        raw, kind = last[i], chunk.kinds[i]
        parts.append({"hex": raw.hex()} if kind == TextValueKind.BYTES and raw is not None else text_value_literal(raw, kind))
    return json.dumps(parts)


def _render(router: RowRouter, route: TableRoute, table: TableSchema, chunk: RawChunk) -> dict[str, str]:
    """One multi-row ``REPLACE`` per target that gets rows of the chunk (idempotent: a chunk
    written again after a crash ends the same), its values rendered from the raw text values.

    Measured on 100,000 customers (4 columns): 4.8 us a row to read through PyMySQL's decoding
    and 4.0 us to place and render from Python values before; reading undecoded and rendering the
    text as it came is about a third of that (BENCHMARKS.md, Reshard copy speed)."""
    kinds = chunk.kinds
    pairs = tuple(enumerate(kinds))
    values: dict[str, list[str]] = {t: [] for t in router.targets}
    if route.reference:
        every = ["(" + ",".join([text_value_literal(row[i], k) for i, k in pairs]) + ")" for row in chunk.rows]
        for t in router.targets:
            values[t] = every
    else:
        assert route.vindex_column is not None
        at = next(i for i, c in enumerate(table.columns) if c.lower() == route.vindex_column.lower())
        placed_by = chunk.fields[at]
        places = router.targets_of_values(route, [_typed(placed_by, row[at]) for row in chunk.rows])
        for row, targets in zip(chunk.rows, places, strict=True):
            for t in targets:
                values[t].append("(" + ",".join([text_value_literal(row[i], k) for i, k in pairs]) + ")")
    head = f"replace into {quote_identifier(table.name)} ({', '.join(quote_identifier(c) for c in table.columns)}) values "
    return {t: head + ",".join(v) for t, v in values.items() if v}


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
            chunk = await asyncio.to_thread(_chunk, snapshot, table, lastpk, chunk_rows)
            while chunk.rows:
                lastpk = _lastpk(table, chunk)
                # The next chunk is read while this one is written: the copy waits on the source or the
                # targets, not on both in turn.
                more = len(chunk.rows) == chunk_rows
                reading = asyncio.create_task(asyncio.to_thread(_chunk, snapshot, table, lastpk, chunk_rows)) if more else None
                try:
                    # Placing and rendering a chunk is ~20 us a row of pure Python: in a thread, so
                    # the proxy sharing this event loop (shardgate up) is not stalled for a chunk.
                    statements = await asyncio.to_thread(_render, router, route, table, chunk)
                    await asyncio.gather(*(writers[target].write([sql]) for target, sql in statements.items()))
                    copied += len(chunk.rows)
                    progress.rows[(source, table.name)] = copied
                    await store.save_copy_progress(workflow.name, source, table.name, lastpk, copied, False)
                    chunk = await reading if reading is not None else RawChunk([], (), ())
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
