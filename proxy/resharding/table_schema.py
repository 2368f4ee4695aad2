"""The tables a reshard moves: read from a source shard, created on the targets.

A target gets every base table of the keyspace's database as ``SHOW CREATE TABLE`` on a source
gives it (Vitess's Reshard copies the schema the same way), skipping the shard's own sidecar
tables. Every table needs a *copy key*: the copy walks it in chunks (``lastpk``) and changes are
applied by it (``REPLACE``, ``DELETE ... where (key) in``). It is the primary key, else the first
unique key whose columns are all ``NOT NULL`` (a unique key over a nullable column does not
identify a row: several rows may hold NULL there); a table with neither is refused when the
workflow is created, naming it (Vitess's VReplication needs a PK or such a unique key too).

The copy key's column types are kept (``pk_types``): VDiff orders text keys by their collation's
weights, as the shards do (:mod:`proxy.resharding.vdiff`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pymysql

from proxy.cdc.binlog_decoder import ShardEndpointLike, connect_shard, connection_kwargs
from proxy.resharding.row_routing import SIDECAR_PREFIX
from sqltext.quoting import quote_identifier


class SchemaCopyError(ValueError):
    """A table the reshard cannot copy (named in the message); refused as 1235 at create."""


@dataclass(frozen=True)
class TableSchema:
    name: str
    create_sql: str
    columns: tuple[str, ...]
    pk_columns: tuple[str, ...]  # the copy key: the primary key, else a unique key of NOT NULL columns
    # Per copy-key column: (data type, character maximum length, collation), from
    # information_schema.columns (length and collation None for non-text types).
    pk_types: tuple[tuple[str, int | None, str | None], ...] = ()


def _read_tables(endpoint: ShardEndpointLike) -> list[TableSchema]:
    conn = connect_shard(**connection_kwargs(endpoint), database=endpoint.database)
    try:
        with conn.cursor() as cur:
            names = _table_names(cur)
            tables = []
            for name in names:
                cur.execute(f"show create table {quote_identifier(name)}")
                create_sql = str(cur.fetchone()[1])
                cur.execute(
                    "select column_name, data_type, character_maximum_length, collation_name "
                    "from information_schema.columns where table_schema = database() "
                    "and table_name = %s order by ordinal_position",
                    (name,),
                )
                types = {str(c): (str(t).lower(), None if n is None else int(n), None if k is None else str(k))
                         for c, t, n, k in cur.fetchall()}
                columns = tuple(types)
                pk = _copy_key(cur, endpoint.database, name)
                tables.append(TableSchema(name, create_sql, columns, pk, tuple(types[c] for c in pk)))
            return tables
    finally:
        conn.close()


def _table_names(cur: pymysql.cursors.Cursor) -> list[str]:
    cur.execute(
        "select table_name from information_schema.tables where table_schema = database() "
        "and table_type = 'BASE TABLE' order by table_name"
    )
    return [str(n) for (n,) in cur.fetchall() if not str(n).startswith(SIDECAR_PREFIX)]


def _read_table_names(endpoint: ShardEndpointLike) -> list[str]:
    conn = connect_shard(**connection_kwargs(endpoint), database=endpoint.database)
    try:
        with conn.cursor() as cur:
            return _table_names(cur)
    finally:
        conn.close()


async def read_table_names(endpoint: ShardEndpointLike) -> list[str]:
    """The base tables a reshard would move (no check of their keys)."""
    return await asyncio.to_thread(_read_table_names, endpoint)


def _copy_key(cur: pymysql.cursors.Cursor, database: str, table: str) -> tuple[str, ...]:
    """The primary key's columns, else the first unique key's whose columns are all NOT NULL."""
    cur.execute(
        "select s.index_name, s.column_name, c.is_nullable from information_schema.statistics s "
        "join information_schema.columns c on c.table_schema = s.table_schema and c.table_name = s.table_name "
        "and c.column_name = s.column_name "
        "where s.table_schema = database() and s.table_name = %s and s.non_unique = 0 "
        "order by s.index_name = 'PRIMARY' desc, s.index_name, s.seq_in_index",
        (table,),
    )
    keys: dict[str, list[tuple[str, bool]]] = {}
    for index, column, nullable in cur.fetchall():
        keys.setdefault(str(index), []).append((str(column), str(nullable).upper() == "YES"))
    for columns in keys.values():
        if not any(nullable for _, nullable in columns):
            return tuple(c for c, _ in columns)
    nullable = [index for index in keys if index != "PRIMARY"]
    detail = (f"and its unique keys ({', '.join(nullable)}) have nullable columns, which do not identify a row"
              if nullable else "and no unique key")
    raise SchemaCopyError(
        f"resharding table {database}.{table}, which has no primary key {detail}: the copy and the change "
        "streams find rows by a primary key or a unique key of NOT NULL columns (add one)"
    )


async def read_tables(endpoint: ShardEndpointLike) -> list[TableSchema]:
    return await asyncio.to_thread(_read_tables, endpoint)


def _create_tables(endpoint: ShardEndpointLike, tables: list[TableSchema]) -> None:
    conn = connect_shard(**connection_kwargs(endpoint))
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
