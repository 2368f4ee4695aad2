"""The tables' columns as the shards have them (Vitess's *schema tracking*), as plain data.

The proxy reads every keyspace's ``information_schema.columns`` from one shard and
builds a ``TrackedSchema``; the planner reads it (INSERT without a column list,
``SELECT *`` over joins, unqualified column resolution, ``USING``/``NATURAL``). No I/O
here: ``proxy.schema_tracker`` does the reading and swaps in a new object on every
change, so a schema is immutable and its ``version`` can key the plan cache.

Columns a vschema declares with ``column_list_authoritative`` win over the shards'
(``columns_of``), as in Vitess.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vschema.model import VSchema

_VERSIONS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column: ``data_type`` is information_schema's DATA_TYPE (``bigint``),
    ``column_type`` its COLUMN_TYPE (``decimal(10,2) unsigned``)."""

    name: str
    data_type: str = ""
    column_type: str = ""
    collation: str | None = None
    nullable: bool = True
    auto_increment: bool = False
    primary_key: bool = False


@dataclass(frozen=True, slots=True)
class TableSchema:
    name: str
    columns: tuple[ColumnInfo, ...]
    rows: int = 0  # the shard's row estimate, as a power of 10 (0: unknown or empty)

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnInfo | None:
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        return None


@dataclass(frozen=True)
class TrackedSchema:
    """keyspace -> lower-cased table name -> TableSchema."""

    keyspaces: Mapping[str, Mapping[str, TableSchema]] = field(default_factory=dict)
    version: int = field(default_factory=lambda: next(_VERSIONS))

    def table(self, keyspace: str, name: str) -> TableSchema | None:
        tables = self.keyspaces.get(keyspace)
        if tables is None:
            return None
        return tables.get(name.lower())

    def replace_keyspace(self, keyspace: str, tables: Mapping[str, TableSchema]) -> TrackedSchema:
        """A new schema with ``keyspace``'s tables replaced (a new version)."""
        merged = dict(self.keyspaces)
        merged[keyspace] = {k.lower(): v for k, v in tables.items()}
        return TrackedSchema(merged)


EMPTY_SCHEMA = TrackedSchema({}, version=0)


def columns_of(vschema: VSchema, schema: TrackedSchema | None, keyspace: str,
               table: str) -> list[str] | None:
    """The table's column names in order, or None when unknown.

    An authoritative vschema column list wins; then the tracked schema; a
    non-authoritative vschema list is not a full list, so it gives None."""
    ks = vschema.keyspaces.get(keyspace)
    vt = ks.table(table) if ks is not None else None
    if vt is not None and vt.column_list_authoritative and vt.columns:
        return [c.name for c in vt.columns]
    if schema is not None:
        ts = schema.table(keyspace, table)
        if ts is not None:
            return ts.column_names()
    return None
