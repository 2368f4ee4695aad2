"""The in-memory vschema: keyspaces, their tables and vindexes, and name resolution.

Built by ``vschema.loader`` from Vitess vschema JSON; read by the planner and the
engine. Everything here is immutable in use (rebuild to change), so it can be shared
by every session without locking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vschema.errors import (
    AmbiguousTable,
    KeyspaceNotFound,
    TableDisabled,
    TableNotFound,
    VSchemaError,
)
from vschema.keyrange import ShardMap
from vschema.vindexes.base import Vindex

TABLE_TYPE_NORMAL = ""
TABLE_TYPE_SEQUENCE = "sequence"
TABLE_TYPE_REFERENCE = "reference"
TABLE_TYPES = (TABLE_TYPE_NORMAL, TABLE_TYPE_SEQUENCE, TABLE_TYPE_REFERENCE)


@dataclass(frozen=True)
class Column:
    """A column declared in the vschema (``columns``), with its optional SQL type."""

    name: str
    type: str | None = None


@dataclass
class ColumnVindex:
    """A vindex applied to columns of a table; the first one of a table is its primary."""

    columns: list[str]
    name: str
    vindex: Vindex
    owned: bool = False

    @property
    def type_name(self) -> str:
        return self.vindex.type_name

    @property
    def cost(self) -> int:
        return self.vindex.cost

    @property
    def unique(self) -> bool:
        return self.vindex.unique

    @property
    def needs_lookup(self) -> bool:
        return self.vindex.needs_lookup

    def covers(self, column: str) -> bool:
        """Whether ``column`` is the (first) column of this vindex; case-insensitive."""
        return self.columns[0].lower() == column.lower()


@dataclass
class AutoIncrement:
    """``auto_increment``: ``column`` is filled from the ``sequence`` table."""

    column: str
    sequence: str  # as written in the vschema: "seq" or "ks.seq"
    sequence_table: Table | None = None  # resolved by build_vschema


@dataclass
class Table:
    name: str
    keyspace: str
    type: str = TABLE_TYPE_NORMAL
    column_vindexes: list[ColumnVindex] = field(default_factory=list)
    auto_increment: AutoIncrement | None = None
    pinned: bytes | None = None
    columns: list[Column] = field(default_factory=list)
    column_list_authoritative: bool = False
    source: str | None = None  # reference tables: "ks.table" they mirror
    # True for tables not listed in the vschema but valid because their keyspace is
    # unsharded (and for ``dual``): they have no vindexes and route to the only shard.
    implicit: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.keyspace}.{self.name}"

    @property
    def primary_vindex(self) -> ColumnVindex | None:
        return self.column_vindexes[0] if self.column_vindexes else None

    @property
    def owned_vindexes(self) -> list[ColumnVindex]:
        return [cv for cv in self.column_vindexes if cv.owned]

    @property
    def ordered_vindexes(self) -> list[ColumnVindex]:
        """Column vindexes cheapest first (stable: definition order breaks ties)."""
        return sorted(self.column_vindexes, key=lambda cv: cv.cost)

    @property
    def is_sequence(self) -> bool:
        return self.type == TABLE_TYPE_SEQUENCE

    @property
    def is_reference(self) -> bool:
        return self.type == TABLE_TYPE_REFERENCE

    def vindexes_on(self, column: str) -> list[ColumnVindex]:
        """Column vindexes whose first column is ``column`` (case-insensitive)."""
        return [cv for cv in self.column_vindexes if cv.covers(column)]


@dataclass
class Keyspace:
    name: str
    sharded: bool
    vindexes: dict[str, Vindex]
    tables: dict[str, Table]
    shard_map: ShardMap
    require_explicit_routing: bool = False
    foreign_key_mode: str | None = None

    @property
    def shard_names(self) -> list[str]:
        """Shard names in key-range order."""
        return self.shard_map.names

    def shard_for(self, ksid: bytes) -> str:
        return self.shard_map.shard_for(ksid)

    def table(self, name: str) -> Table | None:
        """The table listed in this keyspace's vschema, an implicit one if the keyspace
        is unsharded, else None."""
        table = self.tables.get(name)
        if table is None and not self.sharded:
            return Table(name=name, keyspace=self.name, implicit=True)
        return table


@dataclass
class RoutingRule:
    """One ``from_table`` entry of the routing rules, resolved to its target tables.

    A rule that could not be resolved keeps its error and raises it when used, as
    Vitess does; an empty ``tables`` list disables the table.
    """

    from_table: str
    to_tables: list[str]
    tables: list[Table] = field(default_factory=list)
    error: VSchemaError | None = None


class VSchema:
    """All keyspaces plus routing rules, with Vitess's table name resolution."""

    def __init__(
        self,
        keyspaces: Mapping[str, Keyspace],
        routing_rules: Mapping[str, RoutingRule] | None = None,
    ) -> None:
        self.keyspaces: dict[str, Keyspace] = dict(keyspaces)
        self.routing_rules: dict[str, RoutingRule] = dict(routing_rules or {})
        # Names that more than one keyspace defines -> those keyspaces.
        self._ambiguous: dict[str, list[str]] = {}
        self._global_tables = self._build_global_tables()

    def _build_global_tables(self) -> dict[str, Table | None]:
        """Unqualified names usable with no keyspace selected; None marks ambiguity.

        A reference table and the table it mirrors (``source``) do not make a name
        ambiguous: the source table wins, as in Vitess.
        """
        out: dict[str, Table | None] = {}
        for ks_name in sorted(self.keyspaces):
            ks = self.keyspaces[ks_name]
            if ks.require_explicit_routing:
                continue
            for tname, table in ks.tables.items():
                if tname not in out:
                    out[tname] = table
                    continue
                current = out[tname]
                if current is None:
                    self._ambiguous[tname].append(ks_name)
                elif table.source == current.qualified_name:
                    continue  # this is a reference copy of the stored table
                elif current.source == table.qualified_name:
                    out[tname] = table  # the stored one was the copy; keep the source
                elif tname == "dual":
                    continue  # dual resolves to the first keyspace by name
                else:
                    out[tname] = None
                    self._ambiguous[tname] = [current.keyspace, ks_name]
        return out

    # -- keyspaces and shards ---------------------------------------------------------
    def keyspace(self, name: str) -> Keyspace:
        ks = self.keyspaces.get(name)
        if ks is None:
            raise KeyspaceNotFound(name)
        return ks

    def is_sharded(self, keyspace: str) -> bool:
        return self.keyspace(keyspace).sharded

    def is_unsharded(self, keyspace: str) -> bool:
        """Unsharded keyspaces accept any table name, listed in the vschema or not."""
        return not self.keyspace(keyspace).sharded

    def shards(self, keyspace: str) -> list[str]:
        return self.keyspace(keyspace).shard_names

    def shard_for(self, keyspace: str, ksid: bytes) -> str:
        return self.keyspace(keyspace).shard_for(ksid)

    # -- tables -----------------------------------------------------------------------
    def find_table(self, name: str, keyspace: str | None = None) -> Table:
        """Resolve a table name the way vtgate does.

        ``name`` may be qualified (``ks.t``), which overrides ``keyspace`` (the
        session's selected keyspace, if any). Routing rules apply first, keyed by
        ``ks.t`` when a keyspace is known and by ``t`` otherwise. Then: with a keyspace,
        the table must be in it (any name is valid in an unsharded keyspace); without
        one, the name must be unique across keyspaces, except that a vschema with a
        single unsharded keyspace accepts any name.
        """
        if "." in name:
            keyspace, name = name.split(".", 1)
        keyspace = keyspace or None
        qualified = f"{keyspace}.{name}" if keyspace else name
        rule = self.routing_rules.get(qualified)
        if rule is not None:
            if rule.error is not None:
                raise rule.error
            if not rule.tables:
                raise TableDisabled(name)
            return rule.tables[0]
        return self.find_table_without_routing(name, keyspace)

    def find_table_without_routing(self, name: str, keyspace: str | None = None) -> Table:
        """``find_table`` ignoring routing rules (Vitess's ``FindTable``)."""
        if keyspace is None:
            if name in self._global_tables:
                table = self._global_tables[name]
                if table is None:
                    raise AmbiguousTable(name, self._ambiguous[name])
                return table
            if len(self.keyspaces) == 1:
                only = next(iter(self.keyspaces.values()))
                if not only.sharded:
                    return Table(name=name, keyspace=only.name, implicit=True)
            raise TableNotFound(name)
        table = self.keyspace(keyspace).table(name)
        if table is None:
            raise TableNotFound(name, keyspace)
        return table

    def find_vindex(self, name: str, keyspace: str | None = None) -> Vindex | None:
        """A vindex by name (unique across keyspaces when no keyspace is given)."""
        if keyspace is not None:
            return self.keyspace(keyspace).vindexes.get(name)
        found = [ks.vindexes[name] for ks in self.keyspaces.values() if name in ks.vindexes]
        if len(found) > 1:
            raise VSchemaError(f"ambiguous vindex reference: {name}")
        return found[0] if found else None
