"""Which target shard a row of a resharded keyspace belongs to (Vitess's ``in_keyrange`` filter).

A sharded table's row goes to the target whose key range holds the keyspace id its primary
vindex gives; a reference table's rows go to every target. The primary vindex must be functional
(hash, xxhash, numeric...): a lookup primary vindex would need its lookup table for every row and
is refused when the workflow is created.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqltext.quoting import quote_identifier, sql_literal
from vschema.errors import VSchemaError
from vschema.keyrange import KeyRange
from vschema.loader import load_keyspace
from vschema.model import Keyspace, Table
from vschema.vindexes.base import FunctionalVindex

# Sidecar tables a shard may keep in the keyspace's own database (proxy.sidecar_tables' fallback
# placement): they belong to the shard, not to the keyspace's data, and are never copied.
SIDECAR_PREFIX = "_shardgate_"


class RoutingError(ValueError):
    """A table the reshard cannot place rows of (named in the message)."""


class UnsupportedRouting(RoutingError):
    """A table whose rows this version cannot place (refused as 1235 when the workflow is created)."""


@dataclass(frozen=True)
class TableRoute:
    table: str
    reference: bool
    vindex_column: str | None
    vindex: FunctionalVindex | None


class RowRouter:
    """Targets of rows for one keyspace and one set of target shards."""

    def __init__(self, keyspace: str, vschema: Mapping[str, Any], targets: Sequence[str]) -> None:
        self.keyspace = keyspace
        try:
            # The keyspace's own shard map is not used: rows are placed among ``targets``.
            self._keyspace: Keyspace = load_keyspace(keyspace, vschema, ["-"] if vschema.get("sharded") else ["0"])
        except VSchemaError as e:
            raise RoutingError(str(e)) from e
        self.targets = tuple(targets)
        self._ranges = [(t, KeyRange.parse(t)) for t in targets]
        self._routes: dict[str, TableRoute] = {}

    def route(self, table: str) -> TableRoute:
        route = self._routes.get(table)
        if route is None:
            route = self._routes[table] = self._route_of(table)
        return route

    def _route_of(self, table: str) -> TableRoute:
        ks = self._keyspace
        if not ks.sharded:
            return TableRoute(table, True, None, None)
        vtable: Table | None = ks.tables.get(table)
        if vtable is None:
            raise RoutingError(
                f"table {self.keyspace}.{table} is not in the vschema: its rows have no shard to go to "
                "(add it to the vschema, as a reference table if every shard holds it)"
            )
        if vtable.is_reference:
            return TableRoute(table, True, None, None)
        primary = vtable.primary_vindex
        if primary is None:
            raise RoutingError(f"table {self.keyspace}.{table} has no primary vindex")
        if not isinstance(primary.vindex, FunctionalVindex):
            raise UnsupportedRouting(
                f"resharding table {self.keyspace}.{table} by its lookup primary vindex {primary.name} "
                f"({primary.type_name}): a row's keyspace id is in the vindex's lookup table, not computed from "
                "the row, and the copy and the change streams place rows by computing it"
            )
        return TableRoute(table, False, primary.columns[0], primary.vindex)

    def targets_of(self, route: TableRoute, row: Mapping[str, Any]) -> Sequence[str]:
        """The targets ``row`` of ``route``'s table goes to (none: it maps to no keyspace id)."""
        if route.reference:
            return self.targets
        assert route.vindex is not None and route.vindex_column is not None
        value = row.get(route.vindex_column)
        if value is None:
            value = next((v for k, v in row.items() if k.lower() == route.vindex_column.lower()), None)
        return self.targets_of_value(route, value)

    def targets_of_value(self, route: TableRoute, value: Any) -> Sequence[str]:
        """The target a row of a sharded table goes to, from its primary vindex column's value."""
        assert route.vindex is not None
        return self.targets_of_keyspace_id(route.vindex.keyspace_id(value))

    def targets_of_values(self, route: TableRoute, values: Sequence[Any]) -> list[Sequence[str]]:
        """``targets_of_value`` of many rows at once (the vindex maps them in one call)."""
        assert route.vindex is not None
        return [self.targets_of_keyspace_id(k) for k in route.vindex.map(values)]

    def targets_of_keyspace_id(self, ksid: bytes | None) -> Sequence[str]:
        if ksid is None:
            return ()
        for name, rng in self._ranges:
            if rng.contains(ksid):
                return (name,)
        return ()

    def split(self, route: TableRoute, rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
        """Rows grouped by target (every target present, maybe with no rows)."""
        out: dict[str, list[Mapping[str, Any]]] = {t: [] for t in self.targets}
        for row in rows:
            for target in self.targets_of(route, row):
                out[target].append(row)
        return out


def value_literal(value: Any) -> str:
    """A SQL literal for a value read by PyMySQL or decoded from the binlog."""
    if isinstance(value, dict | list):  # a JSON column as the binlog decoder gives it
        return sql_literal(json.dumps(_json_ready(value)))
    if isinstance(value, set | frozenset):  # a SET column
        return sql_literal(",".join(sorted(str(v) for v in value)))
    return sql_literal(value)


def _json_ready(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_json_ready(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(v) for v in value]
    return value


def replace_sql(table: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """One multi-row ``REPLACE`` (idempotent: a row copied or applied twice ends the same)."""
    names = ", ".join(quote_identifier(c) for c in columns)
    values = ", ".join("(" + ", ".join(value_literal(row[c]) for c in columns) + ")" for row in rows)
    return f"replace into {quote_identifier(table)} ({names}) values {values}"


def delete_sql(table: str, pk_columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    names = ", ".join(quote_identifier(c) for c in pk_columns)
    keys = ", ".join("(" + ", ".join(value_literal(row[c]) for c in pk_columns) + ")" for row in rows)
    return f"delete from {quote_identifier(table)} where ({names}) in ({keys})"
