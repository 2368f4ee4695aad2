"""Route: a query sent to the shards of one keyspace (Vitess's ``operators.Route``).

It holds the tables it reads (``TableRef``: keyspace, vindexes), the predicates known
to hold for its rows (what its routing reads: vindex values, shard set), and the
clauses of the statement the shards evaluate (``absorbed``: ``where``, ``group``,
``having``, ``select``, ``distinct``, ``order``, ``limit``). When every clause is
absorbed the statement is sent as it is, to the shards its routing picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from rewriter.nodes import SINGLE_SHARD, Opcode
from rewriter.operators.base import Operator
from rewriter.routing import RouteInfo, sharded_route
from rewriter.tables import TableRef

# Variants whose shard set is at most one shard: the shard computes the whole statement.
ONE_SHARD = SINGLE_SHARD | {Opcode.ByDestination, Opcode.None_}


@dataclass(frozen=True, slots=True)
class Route(Operator):
    keyspace: str
    sharded: bool
    tables: tuple[TableRef, ...]
    predicates: tuple[exp.Expression, ...] = ()
    absorbed: frozenset[str] = field(default_factory=frozenset)
    # routing fixed when merging routes whose predicates cannot show it together
    # (two UNION arms on the same vindex value: ``rules.merge_union``)
    fixed: RouteInfo | None = None

    @property
    def system_only(self) -> bool:
        return bool(self.tables) and all(t.system for t in self.tables)

    def vindexed_tables(self) -> list[TableRef]:
        """The tables whose rows the vindex places (not reference or system tables)."""
        return [t for t in self.tables if self.sharded and not t.is_reference and not t.system]

    def routing(self, list_vars: frozenset[str]) -> RouteInfo:
        """Where this route goes: its variant and vindex values from its predicates."""
        if self.fixed is not None:
            return self.fixed
        tables = list(self.tables)
        if not tables:
            return RouteInfo(Opcode.Reference, self.keyspace, self.sharded)
        if self.system_only:
            return RouteInfo(Opcode.DBA, tables[0].keyspace, tables[0].sharded, tables=tables)
        if any(t.system for t in tables) or not self.sharded:
            return RouteInfo(Opcode.Unsharded, self.keyspace, False, tables=tables)
        vindexed = self.vindexed_tables()
        if not vindexed:
            return RouteInfo(Opcode.Reference, self.keyspace, True, tables=tables)
        return sharded_route(self.keyspace, tables, vindexed, list(self.predicates), list_vars)
