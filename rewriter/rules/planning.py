"""What the rewrite rules share while planning one statement: the planning context
and each Route's routing, computed once per Route (rules ask for it repeatedly)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from rewriter.context import PlanContext
from rewriter.nodes import Plan
from rewriter.operators import Operator, Route
from rewriter.operators.route import ONE_SHARD
from rewriter.routing import RouteInfo
from rewriter.tables import TableRef

# Plans a statement the emitted primitives run on their own (a pulled-out subquery, a
# UNION arm, a derived table's query): ``read_planner``'s entry, refusing (Unsupported)
# what only Compute answers, so the enclosing statement goes to Compute whole.
StatementPlanner = Callable[[exp.Expression, PlanContext], Plan]


@dataclass(slots=True)
class Planning:
    ctx: PlanContext
    # None: primitives that plan a statement of their own are not emitted (to_primitives
    # answers None for them)
    plan_statement: StatementPlanner | None = None
    # routing by what it depends on (tables, predicates, fixed routing), so a Route
    # rebuilt with more clauses absorbed is not routed again; the Route is kept so
    # the ids in the key stay unique
    _routings: dict[tuple[int, ...], tuple[Route, RouteInfo]] = field(default_factory=dict)

    def routing(self, route: Route) -> RouteInfo:
        key = (id(route.fixed), *map(id, route.tables), -1, *map(id, route.predicates))
        hit = self._routings.get(key)
        if hit is not None:
            return hit[1]
        info = route.routing(self.ctx.list_vars)
        self._routings[key] = (route, info)
        return info

    def for_context(self, ctx: PlanContext) -> Planning:
        """The same routings under another context (a UNION arm's own statement)."""
        return Planning(ctx, self.plan_statement, self._routings)

    def one_shard(self, route: Route) -> bool:
        """Whether ``route`` reaches at most one shard (so it computes everything)."""
        return self.routing(route).opcode in ONE_SHARD


def tables_of(op: Operator) -> list[TableRef]:
    """The tables every Route under ``op`` reads."""
    if isinstance(op, Route):
        return list(op.tables)
    return [t for i in op.inputs() for t in tables_of(i)]


def side_of(pred: exp.Expression, left: list[TableRef], right: list[TableRef]) -> str:
    """``left`` / ``right`` when every column of ``pred`` names (by qualifier) a table
    of that side, else ``both`` (columns of both, none, or unqualified ones)."""
    left_aliases = {t.alias for t in left}
    right_aliases = {t.alias for t in right}
    sides = set()
    for col in pred.find_all(exp.Column):
        q = col.table
        if q in left_aliases and q not in right_aliases:
            sides.add("left")
        elif q in right_aliases and q not in left_aliases:
            sides.add("right")
        else:
            return "both"
    return sides.pop() if len(sides) == 1 else "both"
