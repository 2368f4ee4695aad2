"""The last planning step: a rewritten operator tree (``rewriter.rules``) -> the engine
primitives of ``rewriter.nodes`` (Vitess's ``transformToPrimitive``).

- A lone Route took the whole statement: one ``nodes.Route`` (behind a
  ``VindexLookup`` when its vindex needs one) sending the client's own text when the
  tables needed no renaming (so result columns are named as MySQL names them).
- A scatter Route under the operators the rules split or pushed (partial
  aggregation, merge-sorted ORDER BY, shard-side LIMIT, DISTINCT, HAVING): the shard
  query with partials and sort keys and the proxy primitives above it (``Aggregate``,
  ``Filter``, ``Projection``, ``Distinct``, ``MemorySort``, ``Limit``, ``Truncate``)
  as ``select_planner.plan_scatter_select`` lays them out.
- Anything else (joins left at the proxy): None, for the route planners.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import to_sql
from rewriter.nodes import Plan
from rewriter.operators import (
    Aggregator,
    Distinct,
    Filter,
    Limit,
    Operator,
    Ordering,
    Projection,
    Route,
)
from rewriter.route_primitive import field_query_of, make_route, strip_qualifiers
from rewriter.rules.planning import Planning
from rewriter.select_items import named_as_written
from rewriter.select_planner import plan_scatter_select


def to_primitives(op: Operator, sel: exp.Select, planning: Planning) -> Plan | None:
    """The primitives of ``op`` (rewritten from ``sel``), or None when some operator
    has no primitive here yet. ``sel``'s table names are rewritten for the shards
    (in place) only once the answer is not None."""
    ctx = planning.ctx
    above: list[Operator] = []
    while not isinstance(op, Route):
        if not isinstance(op, Aggregator | Distinct | Filter | Limit | Ordering | Projection):
            return None
        above.append(op)
        op = op.input
    info = planning.routing(op)
    if not above:
        changed = strip_qualifiers(sel, info.tables, ctx)
        named = named_as_written(sel, ctx)
        sql = to_sql(named) if changed or not ctx.source else ctx.source
        return make_route(info, sql, field_query_of(named))
    if not all(_at_proxy(o) for o in above):
        return None
    strip_qualifiers(sel, info.tables, ctx)
    return plan_scatter_select(sel, info, ctx)


def _at_proxy(op: Operator) -> bool:
    """Whether ``op``, left above a scatter Route, has a proxy primitive."""
    if isinstance(op, Aggregator | Ordering | Limit):
        return op.pushed
    return isinstance(op, Projection | Distinct) or (isinstance(op, Filter) and op.clause == "having")
