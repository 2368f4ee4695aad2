"""The tables a reshard moves: read from a source shard, created on the targets.

A target gets every base table of the keyspace's database as ``SHOW CREATE TABLE`` on a source
gives it (Vitess's Reshard copies the schema the same way), skipping the shard's own sidecar
tables. Every table needs a primary key: the copy walks it in chunks (``lastpk``) and changes are
applied by it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pymysql

from proxy.cdc.binlog_decoder import ShardEndpointLike, connection_kwargs
from proxy.resharding.row_routing import SIDECAR_PREFIX
from sqltext.quoting import quote_identifier


class SchemaCopyError(ValueError):
    pass


@dataclass(frozen=True)
class TableSchema:
    name: str
    create_sql: str
    columns: tuple[str, ...]
    pk_columns: tuple[str, ...]


def _read_tables(endpoint: ShardEndpointLike) -> list[TableSchema]:
    conn = pymysql.connect(**connection_kwargs(endpoint), database=endpoint.database)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "select table_name from information_schema.tables where table_schema = database() "
                "and table_type = 'BASE TABLE' order by table_name"
            )
            names = [str(n) for (n,) in cur.fetchall() if not str(n).startswith(SIDECAR_PREFIX)]
            tables = []
            for name in names:
                cur.execute(f"show create table {quote_identifier(name)}")
                create_sql = str(cur.fetchone()[1])
                cur.execute(
                    "select column_name from information_schema.columns where table_schema = database() "
                    "and table_name = %s order by ordinal_position",
                    (name,),
                )
                columns = tuple(str(c) for (c,) in cur.fetchall())
                cur.execute(
                    "select column_name from information_schema.key_column_usage where table_schema = database() "
                    "and table_name = %s and constraint_name = 'PRIMARY' order by ordinal_position",
                    (name,),
                )
                pk = tuple(str(c) for (c,) in cur.fetchall())
                if not pk:
                    raise SchemaCopyError(
                        f"table {endpoint.database}.{name} has no primary key: the reshard copies and applies "
                        "rows by primary key"
                    )
                tables.append(TableSchema(name, create_sql, columns, pk))
            return tables
    finally:
        conn.close()


async def read_tables(endpoint: ShardEndpointLike) -> list[TableSchema]:
    return await asyncio.to_thread(_read_tables, endpoint)


def _create_tables(endpoint: ShardEndpointLike, tables: list[TableSchema]) -> None:
    conn = pymysql.connect(**connection_kwargs(endpoint))
    try:
        with conn.cursor() as cur:
            cur.execute(f"create database if not exists {quote_identifier(endpoint.database)}")
            cur.execute(f"use {quote_identifier(endpoint.database)}")
            for table in tables:
                cur.execute(table.create_sql.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
    finally:
        conn.close()


async def create_tables(endpoint: ShardEndpointLike, tables: list[TableSchema]) -> None:
    """Create the tables missing on ``endpoint`` (a re-run after a crash finds some there)."""
    await asyncio.to_thread(_create_tables, endpoint, tables)
