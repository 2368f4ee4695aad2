"""Where the proxy keeps its own tables on a shard (2PC decisions, the live vschema).

In the ``_shardgate`` database when the shard's user may create it (Vitess keeps its
sidecar tables in ``_vt`` the same way), otherwise in the shard's own database under a
``_shardgate_`` prefix — a hosted MySQL often grants one database only. A table found in
either place is used where it is, so a later grant does not move the state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from proxy.errors import (
    ER_ACCESS_DENIED,
    ER_DBACCESS_DENIED,
    ER_SPECIFIC_ACCESS_DENIED,
    ER_TABLEACCESS_DENIED,
    ShardError,
)
from sqltext.quoting import bytes_literal, quote_identifier

if TYPE_CHECKING:  # the CDC decoders import this module (the journal table): keep it light
    from proxy.engine.result import Result

logger = logging.getLogger(__name__)

SIDECAR_DB = "_shardgate"
# No privilege to create the sidecar database: ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR,
# ER_TABLEACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR.
_DENIED = frozenset({ER_DBACCESS_DENIED, ER_ACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED})


class SqlRunner(Protocol):
    async def execute(self, sql: str) -> Result: ...


def hex_literal(text: str) -> str:
    """``text`` as a hex literal (binary-safe in any statement: names, keys of sidecar rows)."""
    return bytes_literal(text.encode())


def utf8_literal(text: str) -> str:
    """``text`` as a utf8mb4 string expression (documents kept in utf8mb4 columns)."""
    return f"convert({hex_literal(text)} using utf8mb4)"


def row_text(raw: object) -> str:
    """A text-protocol value of a sidecar row as str ("" for NULL)."""
    return bytes(raw).decode("utf-8") if raw is not None else ""  # type: ignore[call-overload]


async def ensure_sidecar_table(sc: SqlRunner, database: str, table: str, create: Callable[[str], str]) -> str:
    """The qualified name of sidecar ``table`` on ``sc``'s shard (whose own database is
    ``database``), created with ``create(qualified_name)`` where it is missing."""
    preferred = f"{quote_identifier(SIDECAR_DB)}.{quote_identifier(table)}"
    fallback_table = f"_shardgate_{table}"
    fallback = f"{quote_identifier(database)}.{quote_identifier(fallback_table)}"
    res = await sc.execute(
        "select table_schema from information_schema.tables where "
        f"(table_schema = '{SIDECAR_DB}' and table_name = '{table}') or "
        f"(table_schema = {hex_literal(database)} and table_name = '{fallback_table}')"
    )
    found = {bytes(r[0]).decode() for r in res.rows if r[0] is not None}
    if SIDECAR_DB in found:
        return preferred
    if found:
        return fallback
    try:
        await sc.execute(f"create database if not exists {quote_identifier(SIDECAR_DB)}")
        name = preferred
    except ShardError as e:
        if e.code not in _DENIED:
            raise
        name = fallback
    await sc.execute(create(name))
    logger.info("sidecar table ready", extra={"table": name})
    return name
