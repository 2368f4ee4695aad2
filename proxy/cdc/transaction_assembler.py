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

XA transactions (the prepared branches of ``twopc``; see ``xa_branches`` for what MariaDB
writes). A prepared branch is two event groups with two GTIDs: the rows, ending in
``XA PREPARE``, and later ``XA COMMIT`` (or ``XA ROLLBACK``), possibly much later (a
resolver after a crash, after a shard restart). The rows are delivered at the commit,
when they became visible, as one transaction (BEGIN, FIELD/ROW..., COMMIT) carrying the
XA COMMIT's GTID; the prepared group itself delivers nothing and only moves the position.
A rolled-back branch delivers nothing. ``XA COMMIT ... ONE PHASE`` is binlogged as an
ordinary transaction.

Resuming: a position saved between a branch's XA PREPARE and its XA COMMIT includes the
prepared group (positions are per-domain high-water marks) but not the commit, and the
rows were not delivered yet. So:

* the prepared group is held in memory (by xid) from its XA PREPARE to its completion,
  whatever the position says about it (it is collected even when the position includes
  it, or when it precedes a start time: its commit may not);
* an XA COMMIT of an xid that is not held (its prepare came before this stream's start,
  or its rows were let go past ``HELD_CHANGES_MAX``) reads the prepared group back from
  the binlog (``load_prepared_group``: ``xa_branch_reader``);
* the delivery is de-duplicated by the commit's GTID like any transaction: a position
  that includes the XA COMMIT has the rows, one that does not has not.

Hence nothing is lost and nothing repeated, whether the consumer saved its position
before the prepare, between prepare and commit, or after the commit; this also covers a
``current``, ``since`` or ``snapshot`` start while branches are prepared (the table copy
cannot see prepared rows; their commit comes after its position).

Holding the saved position back instead (not past an open XA PREPARE) was rejected: a
MariaDB position cannot say "up to seq 9 except 5", so the transactions delivered after
the prepare would be repeated on resume, and a branch left prepared for hours would pin
every resume there. If the prepared group cannot be read any more (its binlog file
purged), the stream ends with ``XaBranchUnavailableError`` naming the xid and the commit:
never a silent loss of the branch's rows.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import (
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from proxy.cdc.errors import XaBranchUnavailableError
from proxy.cdc.events import (
    BeginEvent,
    CommitEvent,
    DdlEvent,
    Field,
    FieldEvent,
    JournalEvent,
    RowChange,
    RowEvent,
    RowOp,
    VEvent,
)
from proxy.cdc.positions import Gtid, GtidPosition
from proxy.cdc.table_filter import TableFilter
from proxy.cdc.xa_branches import (
    FL_COMPLETED_XA,
    FL_PREPARED_XA,
    FL_STANDALONE,
    PreparedBranch,
    Xid,
    parse_completion,
)
from proxy.resharding.journal import Journal, is_journal_table

logger = logging.getLogger(__name__)

_FIELDS_CACHE_MAX = 1024
# Row changes of prepared XA branches held in memory; past that the oldest branches' rows
# are let go and read back from the binlog at their commit (as after a restart).
HELD_CHANGES_MAX = 200_000

# What the open event group is.
_PLAIN, _PREPARING, _COMPLETING = 0, 1, 2

# Reads a prepared group's events (GTID ... XA_PREPARE) back from the binlog: the xid and
# the GTID of the XA COMMIT that needs it. Raises XaBranchUnavailableError.
PreparedGroupLoader = Callable[[Xid, Gtid], Iterable[object]]

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
_OP_OF = {WriteRowsEvent: RowOp.INSERT, UpdateRowsEvent: RowOp.UPDATE, DeleteRowsEvent: RowOp.DELETE}


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
    # A resharding journal written in this transaction (proxy/resharding/journal.py): the
    # shard's stream ends here (proxy/cdc/vstream.py).
    journal: Journal | None = None


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
        load_prepared_group: PreparedGroupLoader | None = None,
        row_images: bool = True,
        row_ops: frozenset[str] = frozenset(RowOp),
    ) -> None:
        """``load_prepared_group``: reads a prepared XA branch's events back from the
        binlog, for an XA COMMIT whose XA PREPARE came before the stream's start (without
        one, such a commit ends the stream with ``XaBranchUnavailableError``).
        ``row_images=False``: row events are delivered without their rows (``changes``
        empty) and without FIELD events; the library then never decodes a row, which was
        two thirds of a decoder's CPU on an insert-heavy table."""
        self.keyspace = keyspace
        self.shard = shard
        self._database = database
        self._database_lower = database.lower()
        self._filter = table_filter
        self.position = start
        self.clock_offset = 0.0  # shard clock minus this host's clock, seconds
        self._skip_before = skip_before_timestamp
        self._load_prepared_group = load_prepared_group
        self._row_images = row_images
        self.duplicates_skipped = 0
        self.partial_transactions_discarded = 0
        # Open transaction state.
        self._gtid: Gtid | None = None
        self._kind = _PLAIN
        self._standalone = False
        self._skipping = False
        self._timestamp = 0
        self._events: list[VEvent] = []
        self._row_count = 0
        self._branch: PreparedBranch | None = None  # the open group is this XA PREPARE's
        # Prepared XA branches seen, by xid, oldest first, until their XA COMMIT/ROLLBACK.
        self._prepared: OrderedDict[Xid, PreparedBranch] = OrderedDict()
        self._held_changes = 0
        # FIELD bookkeeping: what the stream has announced, and what the open transaction
        # would announce (merged only if the transaction is delivered).
        self._announced: dict[str, tuple[Field, ...]] = {}
        self._pending_fields: dict[str, tuple[Field, ...]] = {}
        self._fields_cache: dict[tuple, tuple[Field, ...]] = {}
        self._table_allowed: dict[tuple[str, str], bool] = {}
        # The row changes wanted; the decoder reads inserts anyway (a journal is one).
        self._row_ops = row_ops
        self._journal: Journal | None = None

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
        if isinstance(event, XAPrepareEvent):
            return self._on_xa_prepare(event, received_at)
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
        flags = event.flags
        self._gtid = gtid
        self._standalone = bool(flags & FL_STANDALONE)
        self._timestamp = event.timestamp
        self._events = []
        self._row_count = 0
        self._pending_fields = {}
        self._branch = None
        self._journal = None
        if flags & FL_PREPARED_XA:
            # Its rows are delivered at its XA COMMIT, which may come after any position
            # or start time this group precedes: collected whatever the position says.
            self._kind = _PREPARING
            self._skipping = False
            self._branch = PreparedBranch(Xid(0, b"", b""), gtid)  # xid: at its XA_PREPARE
            return
        self._kind = _COMPLETING if flags & FL_COMPLETED_XA else _PLAIN
        self._skipping = self.position.includes(gtid)
        if self._skipping:
            self.duplicates_skipped += 1
        elif self._skip_before is not None and event.timestamp < self._skip_before:
            # Before the requested start time: consumed for the position only.
            self._skipping = True

    def skipped(self, gtid: Gtid) -> None:
        """A plain transaction none of whose row events was wanted, dropped before decoding
        (``group_skipper``): what ``_begin`` and ``_finish`` do for such a transaction, which
        delivers nothing and only moves the position."""
        if self._gtid is not None:
            self.partial_transactions_discarded += 1  # as _begin: cut by a reconnect, comes again
            logger.warning(
                "discarding partial transaction after reconnect",
                extra={"keyspace": self.keyspace, "shard": self.shard, "gtid": str(self._gtid)},
            )
            self._gtid = None
            self._events = []
        if self.position.includes(gtid):
            self.duplicates_skipped += 1
            return
        self.position = self.position.advanced_to(gtid)

    def _on_query(self, event: QueryEvent, received_at: float) -> ShardTransaction | None:
        if self._gtid is None:
            return None
        statement = event.query
        if self._kind == _COMPLETING:
            return self._on_xa_completion(statement, received_at)
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
        return None  # inside a transaction (``XA END`` of a prepared group among them)

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
            journal=self._journal,
        )

    def _commit_time(self, received_at: float) -> float:
        # The commit happened within the binlog second ``ts`` and before we read it.
        second_start = self._timestamp - self.clock_offset
        return min(max(received_at, second_start), second_start + 1.0)

    # -- XA branches ---------------------------------------------------------------------

    def _on_xa_prepare(self, event: XAPrepareEvent, received_at: float) -> ShardTransaction | None:
        """The end of a prepared group: its rows wait for the XA COMMIT; the group itself
        is consumed for the position (nothing of it is visible yet)."""
        branch = self._branch
        gtid = self._gtid
        if gtid is None or branch is None:
            if gtid is not None and event.one_phase:
                return self._finish(received_at)  # MySQL's XA COMMIT ... ONE PHASE
            return None
        self._branch = None
        self._gtid = None
        branch.xid = Xid.of_prepare_event(event)
        self._hold(branch)
        if not self.position.includes(gtid):
            self.position = self.position.advanced_to(gtid)
        return None

    def _hold(self, branch: PreparedBranch) -> None:
        old = self._prepared.pop(branch.xid, None)
        if old is not None:  # the same group again (a replay from an older position)
            self._held_changes -= old.row_count
        self._prepared[branch.xid] = branch
        self._held_changes += branch.row_count
        while self._held_changes > HELD_CHANGES_MAX and len(self._prepared) > 1:
            _xid, evicted = self._prepared.popitem(last=False)
            self._held_changes -= evicted.row_count
            logger.warning(
                "letting go of a prepared XA branch's rows held in memory; read back at its commit",
                extra={"keyspace": self.keyspace, "shard": self.shard, "xid": str(evicted.xid)},
            )

    def _on_xa_completion(self, statement: str, received_at: float) -> ShardTransaction | None:
        """``XA COMMIT xid``: the branch's rows become visible now, delivered as one
        transaction with this group's GTID; ``XA ROLLBACK xid``: they never were."""
        completion = parse_completion(statement)
        gtid = self._gtid
        assert gtid is not None
        if completion is None:
            logger.warning(
                "unrecognised statement ending an XA group",
                extra={
                    "keyspace": self.keyspace,
                    "shard": self.shard,
                    "gtid": str(gtid),
                    "statement": statement,
                },
            )
            return self._finish(received_at)
        branch = self._prepared.pop(completion.xid, None)
        if branch is not None:
            self._held_changes -= branch.row_count
        if completion.commit and not self._skipping:
            if branch is None:
                branch = self._read_back(completion.xid, gtid)
            self._events = self._branch_events(branch)
            self._row_count = branch.row_count
            self._standalone = False  # delivered between BEGIN and COMMIT
        return self._finish(received_at)

    def _read_back(self, xid: Xid, commit: Gtid) -> PreparedBranch:
        """The branch whose XA PREPARE came before this stream's start: its group is read
        again from the binlog (the rows were never delivered: rows go out at the commit)."""
        if self._load_prepared_group is None:
            raise XaBranchUnavailableError(
                self.keyspace,
                self.shard,
                str(xid),
                str(commit),
                "no binlog reader to read it back with",
            )
        branch = PreparedBranch(xid, commit)
        for event in self._load_prepared_group(xid, commit):
            if isinstance(event, MariadbGtidEvent):
                branch.gtid = Gtid(event.domain_id, event.server_id, event.gtid_seq_no)
            elif isinstance(event, RowsEvent):
                batch = self._row_event(event)
                if batch is not None:
                    branch.add(*batch)
        return branch

    def _branch_events(self, branch: PreparedBranch) -> list[VEvent]:
        events: list[VEvent] = []
        for fields, row_event in branch.batches:
            if self._row_images:
                self._announce(row_event.table_name, fields, row_event.timestamp, events)
            events.append(row_event)
        return events

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

    def _announce(
        self, table_name: str, fields: tuple[Field, ...], timestamp: int, events: list[VEvent]
    ) -> None:
        """A FIELD event into ``events`` if the stream has not announced these columns."""
        known = self._pending_fields.get(table_name) or self._announced.get(table_name)
        if known is not fields and known != fields:
            self._pending_fields[table_name] = fields
            events.append(
                FieldEvent(
                    keyspace=self.keyspace,
                    shard=self.shard,
                    timestamp=timestamp,
                    table_name=table_name,
                    fields=fields,
                )
            )

    def _journal_event(self, event: RowsEvent) -> JournalEvent | None:
        """The resharding journal an insert into the journal table carries."""
        if not isinstance(event, WriteRowsEvent) or not event.rows:
            return None
        journal = Journal.from_row(event.rows[0]["values"])
        if journal.keyspace != self.keyspace:
            return None  # another keyspace's (shards of several keyspaces sharing a server)
        self._journal = journal
        return JournalEvent(keyspace=self.keyspace, shard=self.shard, timestamp=event.timestamp, journal=journal)

    def _row_event(self, event: RowsEvent) -> tuple[tuple[Field, ...], RowEvent] | None:
        if not self._allowed(event.schema, event.table):
            return None
        op = next((op for cls, op in _OP_OF.items() if isinstance(event, cls)), None)
        if op is None or op not in self._row_ops:
            return None  # inserts are read whatever row_ops says (a resharding journal is one)
        if not self._row_images:
            return (), self._new_row_event(event, op, ())
        rows = event.rows
        if op is RowOp.INSERT:
            changes = tuple([RowChange(None, row["values"]) for row in rows])
        elif op is RowOp.UPDATE:
            changes = tuple([RowChange(row["before_values"], row["after_values"]) for row in rows])
        else:
            changes = tuple([RowChange(row["values"], None) for row in rows])
        return self._fields_for(event), self._new_row_event(event, op, changes)

    def _new_row_event(self, event: RowsEvent, op: RowOp, changes: tuple[RowChange, ...]) -> RowEvent:
        return RowEvent(
            keyspace=self.keyspace,
            shard=self.shard,
            timestamp=event.timestamp,
            table_name=f"{self.keyspace}.{event.table}",
            op=op,
            changes=changes,
        )

    def _add_rows(self, event: RowsEvent) -> None:
        if is_journal_table(event.schema, event.table):
            journal = self._journal_event(event)
            if journal is not None and self._branch is None:
                self._events.append(journal)
            return
        batch = self._row_event(event)
        if batch is None:
            return
        fields, row_event = batch
        if self._branch is not None:
            self._branch.add(fields, row_event)
            return
        if self._row_images:
            self._announce(row_event.table_name, fields, row_event.timestamp, self._events)
        self._row_count += len(row_event.changes)
        self._events.append(row_event)
