"""Reading a shard's message tables: comments from information_schema, columns and their exact
wire fields from the table itself (``SELECT * ... LIMIT 0`` returns the very column definitions
a STREAM must send, so the streamed field types are the shard's own)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Protocol

from proxy.engine.result import Field, Result
from proxy.messaging.errors import MessageTableError
from proxy.messaging.inserted import ColumnInfo, InsertShape, column_info
from proxy.messaging.table import MessageTableSpec, is_message_comment, parse_message_table
from sqltext.quoting import TextValueKind, quote_identifier, text_value_literal

logger = logging.getLogger(__name__)

_LIST_TABLES = (
    "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES"
    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'"
    " AND TABLE_COMMENT LIKE '%vitess_message%' ORDER BY TABLE_NAME"
)
# What an INSERT's literal reads back as, per column (proxy.messaging.inserted); and which
# tables have triggers (a trigger may change the row: its inserts are always polled).
_COLUMNS = (
    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, CHARACTER_SET_NAME,"
    " CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, EXTRA FROM information_schema.COLUMNS"
    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({names})"
)
_TRIGGERS = (
    "SELECT DISTINCT EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS"
    " WHERE EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE IN ({names})"
)


class Executes(Protocol):
    """A shard connection (``proxy.pools.ShardConnection``): one statement -> one Result."""

    async def execute(self, sql: str) -> Result: ...


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """A message table as read from one shard: its spec, or the error that disables it."""

    name: str
    spec: MessageTableSpec | None
    error: MessageTableError | None


async def load_message_tables(conn: Executes) -> dict[str, LoadedTable]:
    """Every message table of the connection's database, keyed by lower-case table name."""
    listing = await conn.execute(_LIST_TABLES)
    out: dict[str, LoadedTable] = {}
    for raw_name, raw_comment in listing.rows:
        name = (raw_name or b"").decode()
        comment = (raw_comment or b"").decode()
        if not is_message_comment(comment):
            continue
        described = await conn.execute(f"SELECT * FROM {quote_identifier(name)} LIMIT 0")
        out[name.lower()] = load_table(name, comment, described.fields)
    if out:
        shapes = await _insert_shapes(conn, [t.name for t in out.values()])
        for key, loaded in out.items():
            if loaded.spec is not None and loaded.name.lower() in shapes:
                out[key] = replace(loaded, spec=replace(loaded.spec, insert_shape=shapes[loaded.name.lower()]))
    return out


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode()


async def _insert_shapes(conn: Executes, names: list[str]) -> dict[str, InsertShape]:
    """Per lower-case table name: its columns as ``proxy.messaging.inserted`` reads them."""
    in_list = ", ".join(text_value_literal(n.encode(), TextValueKind.STRING) for n in names)
    columns = await conn.execute(_COLUMNS.format(names=in_list))
    triggered = {(_text(r[0]) or "").lower() for r in (await conn.execute(_TRIGGERS.format(names=in_list))).rows}
    by_table: dict[str, list[ColumnInfo]] = {}
    for table, col, data_type, column_type, nullable, default, charset, max_chars, max_octets, extra in columns.rows:
        by_table.setdefault((_text(table) or "").lower(), []).append(column_info(
            _text(col) or "", _text(data_type) or "", _text(column_type) or "", nullable == b"YES", _text(default),
            _text(charset), None if max_chars is None else int(max_chars),
            None if max_octets is None else int(max_octets), _text(extra) or "",
        ))  # fmt: skip
    return {t: InsertShape(tuple(cols), exact=t not in triggered) for t, cols in by_table.items()}


def load_table(name: str, comment: str, table_fields: list[Field]) -> LoadedTable:
    columns = [f.org_name or f.name for f in table_fields]
    by_column = {c.lower(): f for c, f in zip(columns, table_fields, strict=True)}
    try:
        spec = parse_message_table(name, comment, columns, by_column)
    except MessageTableError as e:
        logger.warning("message table disabled", extra={"table": name, "error": e.message})
        return LoadedTable(name, None, e)
    return LoadedTable(name, spec, None)
