"""Rule: a derived table whose rows each shard can produce alone — its query only
filters and projects the rows of its route (an ORDER BY inside it means nothing in
SQL), or its route reaches one shard, which computes all of it — merges with that route: the outer query reads the derived table on each shard
(Vitess merges a derived table into its route the same way).

The outer query's predicates name the derived table's columns, not the tables', so
they are never routing predicates of the merged route (``push_filter``).
"""

from __future__ import annotations

import dataclasses

from rewriter.operators import Derived, Operator, Ordering, Route
from rewriter.rules.planning import Planning

# The clauses of a derived table's query that keep it row by row.
ROW_BY_ROW = frozenset({"where", "select", "order"})


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Derived):
        return None
    inner = op.input
    if isinstance(inner, Ordering) and isinstance(inner.input, Route):
        inner = inner.input  # a scatter's ORDER BY, dropped with the derived table's
    if isinstance(inner, Route) and p.one_shard(inner):
        # one shard computes the whole derived table (grouped, limited, a statement
        # carried whole): the outer query over it runs there too
        return dataclasses.replace(inner, absorbed=frozenset({"derived"}))
    if not isinstance(inner, Route) or not inner.absorbed <= ROW_BY_ROW:
        return None
    return dataclasses.replace(inner, absorbed=frozenset({"derived"}))
