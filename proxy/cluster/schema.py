"""Applying a keyspace's schema file to a freshly initialised local shard, exactly once.

The database named after the keyspace is created and the file's statements run in order. A marker
file in the shard's data directory records that this happened (and the file's hash), so restarts
keep the data and never re-run the DDL or the seed rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

import aiomysql
import pymysql

from proxy.cluster.errors import SchemaError
from proxy.cluster.layout import LocalShardSpec
from proxy.cluster.sql_script import SqlScriptError, split_sql_statements
from sqltext.quoting import quote_identifier

logger = logging.getLogger(__name__)


def _recorded_digest(spec: LocalShardSpec) -> str | None:
    """The schema hash recorded when the schema was applied, None if it never was."""
    try:
        recorded = json.loads(spec.schema_marker.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return str(recorded.get("sha256"))


def _write_marker(spec: LocalShardSpec, schema_path: Path | None, digest: str, count: int) -> None:
    spec.schema_marker.write_text(
        json.dumps(
            {
                "schema": str(schema_path) if schema_path else None,
                "sha256": digest,
                "statements": count,
                "applied_at": time.time(),
            }
        ),
        encoding="utf-8",
    )


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


async def apply_schema_once(spec: LocalShardSpec, schema_path: Path | None) -> bool:
    """Create the keyspace database and run the schema unless done before; True if it ran now."""
    schema_text = _read_text(schema_path) if schema_path is not None else ""
    digest = hashlib.sha256(schema_text.encode()).hexdigest()
    recorded = _recorded_digest(spec)
    if recorded is not None:
        if recorded != digest:
            logger.warning(
                "schema file changed since it was applied; not re-applying "
                "keyspace=%s shard=%s schema=%s",
                spec.keyspace,
                spec.shard,
                schema_path,
            )
        return False
    try:
        statements = split_sql_statements(schema_text)
    except SqlScriptError as e:
        raise SchemaError(f"{schema_path}: {e}") from e
    started = time.monotonic()
    endpoint = spec.endpoint
    conn = await aiomysql.connect(
        host=endpoint.host,
        port=endpoint.port,
        user=endpoint.user,
        password=endpoint.password,
        autocommit=True,
        charset="utf8mb4",
    )
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(spec.keyspace)}")
            await cur.execute(f"USE {quote_identifier(spec.keyspace)}")
            for number, statement in enumerate(statements, start=1):
                try:
                    await cur.execute(statement)
                except pymysql.err.MySQLError as e:
                    raise SchemaError(
                        f"{schema_path}: statement {number} failed on shard "
                        f"{spec.keyspace}/{spec.shard}: {e}\n{statement[:500]}\n"
                        f"(a data dir holding a partly applied schema, {spec.data_dir}, "
                        "may be deleted to start it over)"
                    ) from e
    finally:
        await conn.ensure_closed()
    _write_marker(spec, schema_path, digest, len(statements))
    logger.info(
        "schema applied keyspace=%s shard=%s statements=%d seconds=%.2f",
        spec.keyspace,
        spec.shard,
        len(statements),
        time.monotonic() - started,
    )
    return True
