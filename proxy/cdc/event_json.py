"""The ``vstream`` output format: each VEvent as one JSON object (one NDJSON line)."""

from __future__ import annotations

from typing import Any

from proxy.cdc.events import (
    CommitEvent,
    DdlEvent,
    FieldEvent,
    JournalEvent,
    RowEvent,
    VEvent,
    VgtidEvent,
)
from proxy.cdc.json_values import json_row


def event_to_json(event: VEvent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": event.type.value,
        "keyspace": event.keyspace,
        "shard": event.shard,
        "timestamp": event.timestamp,
    }
    if isinstance(event, FieldEvent):
        out["table_name"] = event.table_name
        out["fields"] = [
            {"name": f.name, "type": f.type, "unsigned": f.unsigned} for f in event.fields
        ]
    elif isinstance(event, RowEvent):
        out["table_name"] = event.table_name
        out["op"] = event.op.value
        if event.copied:
            out["copied"] = True
        out["row_changes"] = [
            {"before": json_row(c.before), "after": json_row(c.after)} for c in event.changes
        ]
    elif isinstance(event, CommitEvent):
        out["gtid"] = event.gtid
    elif isinstance(event, DdlEvent):
        out["gtid"] = event.gtid
        out["statement"] = event.statement
    elif isinstance(event, VgtidEvent):
        out["vgtid"] = event.vgtid.to_json_obj()
    elif isinstance(event, JournalEvent):
        out["journal"] = event.journal.to_json()
    return out
