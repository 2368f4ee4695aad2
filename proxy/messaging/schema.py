"""Reading a shard's message tables: comments from information_schema, columns and their exact
wire fields from the table itself (``SELECT * ... LIMIT 0`` returns the very column definitions
a STREAM must send, so the streamed field types are the shard's own)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from proxy.engine.result import Field, Result
from proxy.messaging.errors import MessageTableError
from proxy.messaging.table import MessageTableSpec, is_message_comment, parse_message_table
from sqltext.quoting import quote_identifier

logger = logging.getLogger(__name__)

_LIST_TABLES = (
    "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES"
    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'"
    " AND TABLE_COMMENT LIKE '%vitess_message%' ORDER BY TABLE_NAME"
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
    return out


def load_table(name: str, comment: str, table_fields: list[Field]) -> LoadedTable:
    columns = [f.org_name or f.name for f in table_fields]
    by_column = {c.lower(): f for c, f in zip(columns, table_fields, strict=True)}
    try:
        spec = parse_message_table(name, comment, columns, by_column)
    except MessageTableError as e:
        logger.warning("message table disabled", extra={"table": name, "error": e.message})
        return LoadedTable(name, None, e)
    return LoadedTable(name, spec, None)
