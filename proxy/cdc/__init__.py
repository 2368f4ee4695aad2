"""Change data capture: a VStream across every shard's binlog.

Public API::

    VStream(endpoints, tables, start="current" | "beginning" | Vgtid | json,
            since=None, minimize_skew=False, heartbeat_interval=0.0,
            include_reshard_journal_events=False, stop_on_reshard=False, shard_locator=None)
    run_cdc(config, tables, start, fmt, out)          # the `shardgate cdc` command
    TableChangeFeed(endpoints, keyspace, table)        # messaging: one table's rows
    VStreamRowFormatter(table_name)                    # SQL VSTREAM result rows
    debezium_envelopes(group)                          # Debezium-shaped row events
"""

from proxy.cdc.debezium import debezium_envelopes
from proxy.cdc.errors import (
    CdcError,
    InvalidPositionError,
    PositionPurgedError,
    PositionUnknownError,
    ShardStreamError,
    ShardUnavailableError,
    SkewHoldTimeoutError,
)
from proxy.cdc.events import (
    BeginEvent,
    CommitEvent,
    DdlEvent,
    EventGroup,
    Field,
    FieldEvent,
    HeartbeatEvent,
    JournalEvent,
    RowChange,
    RowEvent,
    RowOp,
    VEvent,
    VEventType,
    VgtidEvent,
)
from proxy.cdc.positions import Gtid, GtidPosition, ShardGtid, Vgtid
from proxy.cdc.runner import parse_start, run_cdc
from proxy.cdc.sql_rows import VStreamRowFormatter
from proxy.cdc.table_feed import TableChangeFeed, TableRowChange, TableTouch
from proxy.cdc.vstream import VStream

__all__ = [
    "BeginEvent",
    "CdcError",
    "CommitEvent",
    "DdlEvent",
    "EventGroup",
    "Field",
    "FieldEvent",
    "Gtid",
    "GtidPosition",
    "HeartbeatEvent",
    "InvalidPositionError",
    "JournalEvent",
    "PositionPurgedError",
    "PositionUnknownError",
    "RowChange",
    "RowEvent",
    "RowOp",
    "ShardGtid",
    "ShardStreamError",
    "ShardUnavailableError",
    "SkewHoldTimeoutError",
    "TableChangeFeed",
    "TableRowChange",
    "TableTouch",
    "VEvent",
    "VEventType",
    "VStream",
    "VStreamRowFormatter",
    "Vgtid",
    "VgtidEvent",
    "debezium_envelopes",
    "parse_start",
    "run_cdc",
]
