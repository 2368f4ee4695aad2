"""Turns one shard's raw binlog events into whole transactions of VEvents.

MariaDB writes a transaction as ``GTID, (TABLE_MAP, ROWS)..., XID`` (or ``... QUERY
COMMIT`` for non-transactional engines) and a DDL as a standalone ``GTID, QUERY``. The
assembler buffers a transaction until its end, so a shard's transaction is handed on
whole, and keeps the shard's position itself, advancing it only when a transaction ends:
this is the position to resume from (saving it at the GTID event would skip the
transaction on resume).

It is also where de-duplication lives: a transaction whose GTID is already included in
the position is skipped, which makes a library reconnection that replays from an older
position harmless, and a transaction cut short by a reconnection is discarded (it comes
again, whole, from the new connection).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import (
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from proxy.cdc.events import (
    BeginEvent,
    CommitEvent,
    DdlEvent,
    Field,
    FieldEvent,
    RowChange,
    RowEvent,
    RowOp,
    VEvent,
)
from proxy.cdc.positions import Gtid, GtidPosition
from proxy.cdc.table_filter import TableFilter

logger = logging.getLogger(__name__)

# MariaDB GTID event flag: the event group is a single statement without BEGIN/COMMIT.
_FL_STANDALONE = 0x01
_FIELDS_CACHE_MAX = 1024

# Binlog column type -> the type name users know from SQL.
_TYPE_NAMES: dict[int, str] = {
    FIELD_TYPE.DECIMAL: "DECIMAL",
    FIELD_TYPE.NEWDECIMAL: "DECIMAL",
    FIELD_TYPE.TINY: "TINYINT",
    FIELD_TYPE.SHORT: "SMALLINT",
    FIELD_TYPE.INT24: "MEDIUMINT",
    FIELD_TYPE.LONG: "INT",
    FIELD_TYPE.LONGLONG: "BIGINT",
    FIELD_TYPE.FLOAT: "FLOAT",
    FIELD_TYPE.DOUBLE: "DOUBLE",
    FIELD_TYPE.NULL: "NULL",
    FIELD_TYPE.TIMESTAMP: "TIMESTAMP",
    FIELD_TYPE.TIMESTAMP2: "TIMESTAMP",
    FIELD_TYPE.DATETIME: "DATETIME",
    FIELD_TYPE.DATETIME2: "DATETIME",
    FIELD_TYPE.DATE: "DATE",
    FIELD_TYPE.NEWDATE: "DATE",
    FIELD_TYPE.TIME: "TIME",
    FIELD_TYPE.TIME2: "TIME",
    FIELD_TYPE.YEAR: "YEAR",
    FIELD_TYPE.VARCHAR: "VARCHAR",
    FIELD_TYPE.VAR_STRING: "VARCHAR",
    FIELD_TYPE.STRING: "CHAR",
    FIELD_TYPE.BIT: "BIT",
    FIELD_TYPE.JSON: "JSON",
    FIELD_TYPE.ENUM: "ENUM",
    FIELD_TYPE.SET: "SET",
    FIELD_TYPE.TINY_BLOB: "BLOB",
    FIELD_TYPE.MEDIUM_BLOB: "BLOB",
    FIELD_TYPE.LONG_BLOB: "BLOB",
    FIELD_TYPE.BLOB: "BLOB",
    FIELD_TYPE.GEOMETRY: "GEOMETRY",
}

_DDL_VERBS = ("create", "alter", "drop", "rename", "truncate")


@dataclass(slots=True)
class ShardTransaction:
    """A finished transaction with at least one event that passed the filter."""

    events: list[VEvent]
    gtid: str
    position: GtidPosition  # the shard's position after this transaction
    timestamp: int  # binlog time of the transaction, whole seconds
    received_at: float  # this host's time when its last event was read
    commit_time: float  # estimated commit time on this host's clock (see binlog_decoder)
    row_count: int


@dataclass(slots=True)
class ShardHeartbeat:
    """The shard had nothing more to send when this was read; ``position`` includes any
    transactions that were filtered out since the last item."""

    position: GtidPosition
    received_at: float


def field_type_name(type_code: int | None, text: bool) -> str:
    """The type name a FIELD event gives a column of MySQL type ``type_code`` (binlog and
    protocol codes agree); ``text``: the column has a character set (TEXT, not BLOB)."""
    name = _TYPE_NAMES.get(type_code, f"TYPE{type_code}") if type_code is not None else "NULL"
    if name == "BLOB" and text:
        return "TEXT"
    return name


def _field_type_name(column: object) -> str:
    return field_type_name(
        getattr(column, "type", None), bool(getattr(column, "character_set_name", None))
    )


def _fields_of(columns: list) -> tuple[Field, ...]:
    return tuple(
        Field(
            name=str(column.name),
            type=_field_type_name(column),
            unsigned=bool(getattr(column, "unsigned", False)),
        )
        for column in columns
    )


def _is_ddl(statement: str) -> bool:
    return statement.lstrip().lower().startswith(_DDL_VERBS)


class TransactionAssembler:
    def __init__(
        self,
        keyspace: str,
        shard: str,
        database: str,
        table_filter: TableFilter,
        start: GtidPosition,
        skip_before_timestamp: int | None = None,
    ) -> None:
        self.keyspace = keyspace
        self.shard = shard
        self._database = database
        self._database_lower = database.lower()
        self._filter = table_filter
        self.position = start
        self.clock_offset = 0.0  # shard clock minus this host's clock, seconds
        self._skip_before = skip_before_timestamp
        self.duplicates_skipped = 0
        self.partial_transactions_discarded = 0
        # Open transaction state.
        self._gtid: Gtid | None = None
        self._standalone = False
        self._skipping = False
        self._timestamp = 0
        self._events: list[VEvent] = []
        self._row_count = 0
        # FIELD bookkeeping: what the stream has announced, and what the open transaction
        # would announce (merged only if the transaction is delivered).
        self._announced: dict[str, tuple[Field, ...]] = {}
        self._pending_fields: dict[str, tuple[Field, ...]] = {}
        self._fields_cache: dict[tuple, tuple[Field, ...]] = {}
        self._table_allowed: dict[tuple[str, str], bool] = {}

    @property
    def in_transaction(self) -> bool:
        return self._gtid is not None

    def on_event(
        self, event: object, received_at: float
    ) -> ShardTransaction | ShardHeartbeat | None:
        if isinstance(event, RowsEvent):
            if self._gtid is not None and not self._skipping:
                self._add_rows(event)
            return None
        if isinstance(event, XidEvent):
            return self._finish(received_at)
        if isinstance(event, MariadbGtidEvent):
            self._begin(event)
            return None
        if isinstance(event, QueryEvent):
            return self._on_query(event, received_at)
        if isinstance(event, HeartbeatLogEvent):
            if self._gtid is not None:
                return None
            return ShardHeartbeat(self.position, received_at)
        return None

    # -- transaction boundaries ----------------------------------------------------------

    def _begin(self, event: MariadbGtidEvent) -> None:
        if self._gtid is not None:
            # A new GTID before the old transaction ended: the connection dropped
            # mid-transaction and the library reconnected; the transaction will come
            # again whole, so drop what we have of it.
            self.partial_transactions_discarded += 1
            logger.warning(
                "discarding partial transaction after reconnect",
                extra={"keyspace": self.keyspace, "shard": self.shard, "gtid": str(self._gtid)},
            )
        gtid = Gtid(event.domain_id, event.server_id, event.gtid_seq_no)
        self._gtid = gtid
        self._standalone = bool(event.flags & _FL_STANDALONE)
        self._timestamp = event.timestamp
        self._events = []
        self._row_count = 0
        self._pending_fields = {}
        self._skipping = self.position.includes(gtid)
        if self._skipping:
            self.duplicates_skipped += 1
        elif self._skip_before is not None and event.timestamp < self._skip_before:
            # Before the requested start time: consumed for the position only.
            self._skipping = True

    def _on_query(self, event: QueryEvent, received_at: float) -> ShardTransaction | None:
        if self._gtid is None:
            return None
        statement = event.query
        if self._standalone:
            if not self._skipping and self._concerns_database(event, statement):
                if _is_ddl(statement):
                    self._events.append(
                        DdlEvent(
                            keyspace=self.keyspace,
                            shard=self.shard,
                            timestamp=event.timestamp,
                            statement=statement,
                            gtid=str(self._gtid),
                        )
                    )
            return self._finish(received_at)
        verb = statement.strip().upper()
        if verb == "COMMIT":
            return self._finish(received_at)
        if verb == "ROLLBACK":
            self._events = []
            return self._finish(received_at)
        return None

    def _concerns_database(self, event: QueryEvent, statement: str) -> bool:
        schema = event.schema
        if isinstance(schema, bytes):
            schema = schema.decode("utf-8", errors="replace")
        if schema.lower() == self._database_lower:
            return True
        lowered = statement.lower()
        return f"{self._database_lower}." in lowered or f"`{self._database_lower}`" in lowered

    def _finish(self, received_at: float) -> ShardTransaction | None:
        gtid = self._gtid
        if gtid is None:
            return None
        self._gtid = None
        if self._skipping and self.position.includes(gtid):
            return None  # a duplicate: the position already includes it
        self.position = self.position.advanced_to(gtid)
        events = self._events
        self._events = []
        if not events or self._skipping:
            return None
        gtid_text = str(gtid)
        if self._standalone:
            out: list[VEvent] = events
        else:
            out = [BeginEvent(keyspace=self.keyspace, shard=self.shard, timestamp=self._timestamp)]
            out.extend(events)
            out.append(
                CommitEvent(
                    keyspace=self.keyspace,
                    shard=self.shard,
                    timestamp=self._timestamp,
                    gtid=gtid_text,
                )
            )
        if self._pending_fields:
            self._announced.update(self._pending_fields)
            self._pending_fields = {}
        return ShardTransaction(
            events=out,
            gtid=gtid_text,
            position=self.position,
            timestamp=self._timestamp,
            received_at=received_at,
            commit_time=self._commit_time(received_at),
            row_count=self._row_count,
        )

    def _commit_time(self, received_at: float) -> float:
        # The commit happened within the binlog second ``ts`` and before we read it.
        second_start = self._timestamp - self.clock_offset
        return min(max(received_at, second_start), second_start + 1.0)

    # -- rows ----------------------------------------------------------------------------

    def _allowed(self, schema: str, table: str) -> bool:
        key = (schema, table)
        allowed = self._table_allowed.get(key)
        if allowed is None:
            allowed = schema.lower() == self._database_lower and self._filter.matches(
                self.keyspace, table
            )
            self._table_allowed[key] = allowed
        return allowed

    def _fields_for(self, event: RowsEvent) -> tuple[Field, ...]:
        # The library makes new column objects for every table-map event (one per
        # transaction), so the cache is keyed by what the fields are made of.
        columns = event.columns
        signature = tuple([(c.name, c.type, c.unsigned, c.character_set_name) for c in columns])
        fields = self._fields_cache.get(signature)
        if fields is None:
            fields = _fields_of(columns)
            if len(self._fields_cache) >= _FIELDS_CACHE_MAX:
                self._fields_cache.clear()
            self._fields_cache[signature] = fields
        return fields

    def _add_rows(self, event: RowsEvent) -> None:
        if not self._allowed(event.schema, event.table):
            return
        table_name = f"{self.keyspace}.{event.table}"
        fields = self._fields_for(event)
        known = self._pending_fields.get(table_name) or self._announced.get(table_name)
        if known is not fields and known != fields:
            self._pending_fields[table_name] = fields
            self._events.append(
                FieldEvent(
                    keyspace=self.keyspace,
                    shard=self.shard,
                    timestamp=event.timestamp,
                    table_name=table_name,
                    fields=fields,
                )
            )
        rows = event.rows
        if isinstance(event, WriteRowsEvent):
            op = RowOp.INSERT
            changes = tuple([RowChange(None, row["values"]) for row in rows])
        elif isinstance(event, UpdateRowsEvent):
            op = RowOp.UPDATE
            changes = tuple([RowChange(row["before_values"], row["after_values"]) for row in rows])
        elif isinstance(event, DeleteRowsEvent):
            op = RowOp.DELETE
            changes = tuple([RowChange(row["values"], None) for row in rows])
        else:
            return
        self._row_count += len(changes)
        self._events.append(
            RowEvent(
                keyspace=self.keyspace,
                shard=self.shard,
                timestamp=event.timestamp,
                table_name=table_name,
                op=op,
                changes=changes,
            )
        )
