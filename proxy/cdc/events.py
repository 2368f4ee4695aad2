"""The change-event model, named after Vitess's VEventType.

A shard's transaction is delivered as one ``EventGroup``:
``BEGIN, (FIELD, ROW...)..., COMMIT, VGTID`` — or ``DDL, VGTID`` for a schema change, or
``JOURNAL, VGTID`` where a resharding switch moved the stream to new shards.
FIELD precedes the first ROW of a table in a stream and again after the table's columns
change. Table names are ``keyspace.table``. Unlike Vitess (whose VGTID event precedes
COMMIT), our VGTID comes last: saving it after handling the group resumes with neither
loss nor repeat.

Events are plain (non-frozen) dataclasses because thousands are made per second per shard
(frozen ones cost twice as much to build); consumers must treat them as read-only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from proxy.cdc.positions import Vgtid
from proxy.resharding.journal import Journal


class VEventType(enum.StrEnum):
    BEGIN = "BEGIN"
    COMMIT = "COMMIT"
    DDL = "DDL"
    OTHER = "OTHER"
    FIELD = "FIELD"
    ROW = "ROW"
    VGTID = "VGTID"
    HEARTBEAT = "HEARTBEAT"
    JOURNAL = "JOURNAL"


class RowOp(enum.StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Field:
    """A column as seen in the binlog: name and MySQL type name (``INT``, ``VARCHAR``...)."""

    name: str
    type: str
    unsigned: bool = False


@dataclass(slots=True)
class RowChange:
    """One row's images: ``before`` is None for inserts, ``after`` is None for deletes."""

    before: Row | None
    after: Row | None


@dataclass(slots=True, kw_only=True)
class VEvent:
    """Common to every event: the shard it comes from and its binlog timestamp (whole s)."""

    type: ClassVar[VEventType]
    keyspace: str
    shard: str
    timestamp: int


@dataclass(slots=True, kw_only=True)
class BeginEvent(VEvent):
    type: ClassVar[VEventType] = VEventType.BEGIN


@dataclass(slots=True, kw_only=True)
class CommitEvent(VEvent):
    type: ClassVar[VEventType] = VEventType.COMMIT
    gtid: str


@dataclass(slots=True, kw_only=True)
class FieldEvent(VEvent):
    type: ClassVar[VEventType] = VEventType.FIELD
    table_name: str
    fields: tuple[Field, ...]


@dataclass(slots=True, kw_only=True)
class RowEvent(VEvent):
    type: ClassVar[VEventType] = VEventType.ROW
    table_name: str
    op: RowOp
    changes: tuple[RowChange, ...]
    copied: bool = False  # a row read by the table copy of a ``snapshot`` start, not the binlog


@dataclass(slots=True, kw_only=True)
class DdlEvent(VEvent):
    type: ClassVar[VEventType] = VEventType.DDL
    statement: str
    gtid: str


@dataclass(slots=True, kw_only=True)
class VgtidEvent(VEvent):
    type: ClassVar[VEventType] = VEventType.VGTID
    vgtid: Vgtid


@dataclass(slots=True, kw_only=True)
class JournalEvent(VEvent):
    """A resharding switch's journal (proxy/resharding/journal.py), read from a source shard's
    binlog: that shard's stream ends there; once every participant reached it, the stream goes
    on from the journal's target shards. Forwarded only with ``include_reshard_journal_events``
    (or ``stop_on_reshard``); the ``shard`` is the participant whose journal completed the set."""

    type: ClassVar[VEventType] = VEventType.JOURNAL
    journal: Journal


@dataclass(slots=True, kw_only=True)
class HeartbeatEvent(VEvent):
    """Sent by the stream itself after ``heartbeat_interval`` idle seconds (shard is "")."""

    type: ClassVar[VEventType] = VEventType.HEARTBEAT


@dataclass(slots=True)
class EventGroup:
    """Events delivered together: one shard transaction, or one stream heartbeat.

    ``commit_time`` is our estimate of when the transaction committed, in this host's
    epoch seconds with sub-second resolution (see ``binlog_decoder`` for how); it is what
    skew minimization compares. ``received_at`` is when the binlog bytes were read.
    """

    keyspace: str
    shard: str
    events: list[VEvent]
    commit_time: float
    received_at: float
    vgtid: Vgtid | None = None
    row_count: int = field(default=0)

    @property
    def is_heartbeat(self) -> bool:
        return len(self.events) == 1 and self.events[0].type is VEventType.HEARTBEAT

    def row_events(self) -> list[RowEvent]:
        return [e for e in self.events if isinstance(e, RowEvent)]
