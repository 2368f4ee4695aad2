"""Pushed-down filters on a table's primary vindex column -> the shards that can hold matches.

Only equality and IN on a column whose primary vindex is functional (computable without a
lookup: hash, xxhash, numeric, ...) prune. The filters are also applied in the shard queries
(as the same equality/IN), and still handed back to Spark, which re-checks them: MySQL's
comparison rules (collations, type coercion) may match more than Spark's, never fewer here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.spark.sql_literals import sql_literal
from sqltext.quoting import quote_identifier


@dataclass
class VindexRoute:
    """The primary vindex of a table: its column and value -> shard."""

    keyspace: str
    column: str
    vindex: Any
    vschema: Any

    @classmethod
    def of_table(cls, vschema: Any, keyspace: str, table: str) -> VindexRoute | None:
        """The table's primary vindex, if its keyspace is sharded and the vindex functional."""
        if not vschema.is_sharded(keyspace):
            return None
        found = vschema.find_table(table, keyspace)
        primary = found.primary_vindex
        if primary is None or primary.needs_lookup or len(primary.columns) != 1:
            return None
        return cls(keyspace=keyspace, column=primary.columns[0], vindex=primary.vindex, vschema=vschema)

    def shard_of(self, value: object) -> str | None:
        """The shard a row with this vindex value lives on (None: the value maps nowhere)."""
        ksid = self.vindex.keyspace_id(value)
        return None if ksid is None else self.vschema.shard_for(self.keyspace, ksid)


@dataclass
class ShardSelection:
    """The shards to read and the SQL condition the pushed filters add."""

    shards: list[str]
    where_sql: str = ""


def select_shards(route: VindexRoute | None, shards: Sequence[str], filters: Iterable[Any]) -> ShardSelection:
    """Narrow `shards` by every EqualTo/In filter on the route's column (the filters are ANDed)."""
    from pyspark.sql.datasource import EqualTo, In

    if route is None:
        return ShardSelection(list(shards))
    keep = set(shards)
    conditions: list[str] = []
    for f in filters:
        if not isinstance(f, EqualTo | In) or len(f.attribute) != 1:
            continue
        if f.attribute[0].lower() != route.column.lower():
            continue
        values = [f.value] if isinstance(f, EqualTo) else list(f.value)
        if any(v is None for v in values):
            continue  # `= NULL` matches nothing in SQL but Spark may mean otherwise: leave it
        keep &= {s for s in (route.shard_of(v) for v in values) if s is not None}
        conditions.append(f"{quote_identifier(route.column)} IN ({', '.join(sql_literal(v) for v in values)})")
    return ShardSelection(
        shards=[s for s in shards if s in keep],
        where_sql=" AND ".join(conditions),
    )
