"""The table copy of a stream that starts at ``snapshot`` (Debezium's initial snapshot,
Vitess's copy phase): every current row of the streamed tables, then the binlog from exactly
the point the copy saw.

Each shard is copied inside one ``START TRANSACTION WITH CONSISTENT SNAPSHOT``. MariaDB
reports the binlog coordinates that snapshot matches (``binlog_snapshot_file/position``),
and ``BINLOG_GTID_POS`` turns them into the GTID position the shard's binlog stream then
starts from, so no change is missed or repeated between the copy and the stream.

Rows come as groups of up to ``chunk_rows`` copied inserts (``RowEvent.copied``), shard by
shard and table by table, with a FIELD event before each table's first rows. A copy cannot
be resumed halfway (Vitess can, with per-table last primary keys): the VStream gives the
copied groups no VGTID except the last one, which carries every shard's snapshot position.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass

import pymysql
import pymysql.cursors
from pymysql.constants import FLAG

from proxy import pymysql_internals
from proxy.cdc.binlog_decoder import ShardEndpointLike, connect_shard, connection_kwargs
from proxy.cdc.errors import ShardUnavailableError
from proxy.cdc.events import EventGroup, Field, FieldEvent, RowChange, RowEvent, RowOp
from proxy.cdc.positions import GtidPosition
from proxy.cdc.table_filter import TableFilter
from proxy.cdc.transaction_assembler import field_type_name
from sqltext.quoting import quote_identifier

ShardKey = tuple[str, str]
BINARY_CHARSET = 63
DEFAULT_CHUNK_ROWS = 1000


@dataclass
class ShardSnapshot:
    """One shard's open snapshot transaction (blocking calls: run them in a thread)."""

    key: ShardKey
    conn: pymysql.Connection
    position: GtidPosition

    @classmethod
    def take(cls, key: ShardKey, endpoint: ShardEndpointLike) -> ShardSnapshot:
        conn = connect_shard(
            **connection_kwargs(endpoint),
            database=endpoint.database,
            cursorclass=pymysql.cursors.SSCursor,
        )
        try:
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                status = {str(name).lower(): str(value) for name, value in cur.fetchall()}
                cur.execute(
                    "SELECT BINLOG_GTID_POS(%s, %s)",
                    (status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])),
                )
                (gtid,) = cur.fetchone()  # type: ignore[misc]  # pymysql's stubs type fetchone as possibly None; the query returns one row
        except BaseException:
            conn.close()
            raise
        return cls(key, conn, GtidPosition.parse(gtid or ""))  # type: ignore[arg-type]  # an SSCursor connection is a Connection

    def tables(self, table_filter: TableFilter) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' "
                "ORDER BY table_name"
            )
            names = [str(name) for (name,) in cur.fetchall()]
        return [name for name in names if table_filter.matches(self.key[0], name)]

    def open_table(self, table: str) -> tuple[pymysql.cursors.SSCursor, tuple[Field, ...]]:
        cur = self.conn.cursor()
        cur.execute(f"SELECT * FROM {quote_identifier(table)}")
        columns = pymysql_internals.result_fields(cur)  # flags and charset are not in description
        fields = tuple(
            Field(
                name=column.name,
                type=field_type_name(column.type_code, column.charsetnr != BINARY_CHARSET),
                unsigned=bool(column.flags & FLAG.UNSIGNED),
            )
            for column in columns
        )
        return cur, fields  # type: ignore[return-value]  # an SSCursor connection is a Connection

    def close(self) -> None:
        self.conn.close()  # ends the read-only snapshot transaction with it


class TableCopy:
    def __init__(self, snapshots: list[ShardSnapshot], table_filter: TableFilter, chunk_rows: int):
        self._snapshots = snapshots
        self._filter = table_filter
        self._chunk_rows = chunk_rows

    @classmethod
    async def take(
        cls,
        endpoints: Mapping[ShardKey, ShardEndpointLike],
        table_filter: TableFilter,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> TableCopy:
        """A snapshot of every shard whose keyspace the filter selects."""
        keys = [key for key in endpoints if table_filter.includes_keyspace(key[0])]
        results = await asyncio.gather(
            *(asyncio.to_thread(ShardSnapshot.take, key, endpoints[key]) for key in keys),
            return_exceptions=True,
        )
        snapshots = [r for r in results if isinstance(r, ShardSnapshot)]
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, BaseException):
                for snapshot in snapshots:
                    snapshot.close()
                if isinstance(result, pymysql.OperationalError):
                    raise ShardUnavailableError(
                        key[0], key[1], f"cannot take a snapshot for the table copy: {result.args}"
                    ) from result
                raise result
        return cls(snapshots, table_filter, chunk_rows)

    @property
    def positions(self) -> dict[ShardKey, GtidPosition]:
        return {snapshot.key: snapshot.position for snapshot in self._snapshots}

    async def groups(self) -> AsyncIterator[tuple[EventGroup, bool]]:
        """``(group, is_last)`` for every chunk of copied rows, in order."""
        held: EventGroup | None = None
        async with aclosing(self._chunks()) as chunks:  # type: ignore[type-var]  # the iterator is an async generator
            async for group in chunks:
                if held is not None:
                    yield held, False
                held = group
        if held is not None:
            yield held, True

    async def _chunks(self) -> AsyncIterator[EventGroup]:
        for snapshot in self._snapshots:
            keyspace, shard = snapshot.key
            tables = await asyncio.to_thread(snapshot.tables, self._filter)
            for table in tables:
                cur, fields = await asyncio.to_thread(snapshot.open_table, table)
                table_name = f"{keyspace}.{table}"
                names = [field.name for field in fields]
                announce = True
                exhausted = False
                try:
                    while True:
                        rows = await asyncio.to_thread(cur.fetchmany, self._chunk_rows)
                        if not rows:
                            exhausted = True
                            break
                        now = time.time()
                        events: list = []
                        if announce:
                            announce = False
                            events.append(
                                FieldEvent(
                                    keyspace=keyspace,
                                    shard=shard,
                                    timestamp=int(now),
                                    table_name=table_name,
                                    fields=fields,
                                )
                            )
                        events.append(
                            RowEvent(
                                keyspace=keyspace,
                                shard=shard,
                                timestamp=int(now),
                                table_name=table_name,
                                op=RowOp.INSERT,
                                changes=tuple(
                                    RowChange(None, dict(zip(names, row, strict=True)))
                                    for row in rows
                                ),
                                copied=True,
                            )
                        )
                        yield EventGroup(
                            keyspace=keyspace,
                            shard=shard,
                            events=events,
                            commit_time=now,
                            received_at=now,
                            row_count=len(rows),
                        )
                finally:
                    # Closing a cursor reads what is left of its rows: when the copy stops
                    # early, closing the connection (close()) discards them instead.
                    if exhausted:
                        await asyncio.to_thread(cur.close)

    async def close(self) -> None:
        snapshots, self._snapshots = self._snapshots, []
        for snapshot in snapshots:
            await asyncio.to_thread(snapshot.close)
