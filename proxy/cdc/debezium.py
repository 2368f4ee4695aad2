"""Debezium-shaped change events, so tools built for Debezium's Vitess connector can read
ours: one envelope per changed row, ``{"before", "after", "op", "ts_ms", "source"}``.

``op`` is ``c`` (insert), ``u`` (update), ``d`` (delete), or ``r`` for a row read by the
table copy of a ``snapshot`` start, as Debezium's initial snapshot; ``source.snapshot`` is
then ``"true"``, and ``"last"`` on the copy's final row, the first one with a ``vgtid``.
``source.vgtid`` is the position *after* the row's transaction (resuming from it does not
repeat the transaction); ``source.gtid`` is the transaction's own MariaDB GTID.
"""

from __future__ import annotations

import time
from typing import Any

from proxy.cdc.events import CommitEvent, DdlEvent, EventGroup, RowOp
from proxy.cdc.json_values import json_row

CONNECTOR_NAME = "shardgate"
CONNECTOR_VERSION = "0.1.0"

_OPS = {RowOp.INSERT: "c", RowOp.UPDATE: "u", RowOp.DELETE: "d"}


def _transaction_gtid(group: EventGroup) -> str:
    for event in reversed(group.events):
        if isinstance(event, CommitEvent | DdlEvent):
            return event.gtid
    return ""


def debezium_envelopes(group: EventGroup, *, now_ms: int | None = None) -> list[dict[str, Any]]:
    """One envelope per row change of ``group``, in order (none for DDL/heartbeats)."""
    rows = group.row_events()
    if not rows:
        return []
    processed_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    gtid = _transaction_gtid(group)
    vgtid = group.vgtid.to_json() if group.vgtid is not None else None
    envelopes: list[dict[str, Any]] = []
    for event in rows:
        keyspace, _, table = event.table_name.partition(".")
        source = {
            "version": CONNECTOR_VERSION,
            "connector": CONNECTOR_NAME,
            "name": keyspace,
            "ts_ms": event.timestamp * 1000,
            "snapshot": "false",
            "db": keyspace,
            "keyspace": keyspace,
            "shard": event.shard,
            "table": table,
            "gtid": gtid,
            "vgtid": vgtid,
        }
        op = "r" if event.copied else _OPS[event.op]
        if event.copied:
            source["snapshot"] = "true"
        for change in event.changes:
            envelopes.append(
                {
                    "before": json_row(change.before),
                    "after": json_row(change.after),
                    "op": op,
                    "ts_ms": processed_ms,
                    "source": source,
                }
            )
    if vgtid is not None and envelopes and envelopes[-1]["op"] == "r":
        envelopes[-1]["source"] = {**envelopes[-1]["source"], "snapshot": "last"}
    return envelopes
