"""Uncorrelated subqueries in WHERE that cannot ride along with the outer route.

``x [NOT] IN (SELECT ...)``, ``[NOT] EXISTS (SELECT ...)`` and ``x <op> (SELECT ...)``
whose subquery does not stay on the outer query's route are planned on their own
and run first (``PulloutSubquery``); the outer query gets bind variables instead:

- ``x IN (q)``      -> ``(:__sq_has_values1 = 1 AND x IN (:__sq1))``
- ``x NOT IN (q)``  -> ``(:__sq_has_values1 = 0 OR x NOT IN (:__sq1))``
- ``EXISTS (q)``    -> ``:__sq_has_values1 = 1`` (``NOT EXISTS``: ``= 0``)
- ``x = (q)``       -> ``x = :__sq1``

With no rows the list holds one NULL (valid SQL) and the has-values flag keeps the
result exactly as MySQL's (``IN`` false, ``NOT IN`` true). The IN form over a vindex
column routes like any IN list. A subquery that mentions a table alias of the outer
query (correlated) is refused: running it alone would change its meaning.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import PlanContext
from rewriter.errors import unsupported
from rewriter.nodes import Plan, PulloutSubquery
from rewriter.rules.planning import StatementPlanner
from rewriter.whole_route import from_sources

SQ_PREFIX = "__sq"
HAS_PREFIX = "__sq_has_values"


def outer_aliases(sel: exp.Select) -> set[str]:
    out = set()
    for src in from_sources(sel):
        out.add(src.alias_or_name)
    return out


def _inner_aliases(q: exp.Expression) -> set[str]:
    return {t.alias_or_name for t in q.find_all(exp.Table)} | {
        s.alias_or_name for s in q.find_all(exp.Subquery) if s.alias_or_name}


def correlated(q: exp.Expression, outer: set[str]) -> bool:
    """Whether subquery ``q`` names a table of the enclosing query (by alias)."""
    inner = _inner_aliases(q)
    return any(col.table and col.table not in inner and col.table in outer for col in q.find_all(exp.Column))


def _check_uncorrelated(q: exp.Expression, outer: set[str]) -> None:
    if correlated(q, outer):
        raise unsupported("correlated subquery across shards")


def candidates(where: exp.Expression) -> list[exp.Expression]:
    """Subquery-bearing predicates in WHERE, outermost first, not inside other subqueries."""
    out: list[exp.Expression] = []
    stack = [where]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            out.append(node)
            continue
        if isinstance(node, exp.Exists):
            out.append(node)
            continue
        if isinstance(node, exp.Any | exp.All):
            # a comparison with every row of a subquery: not a value to pull out
            raise unsupported("ANY/ALL subquery across shards")
        if isinstance(node, exp.Subquery):
            out.append(node)  # scalar
            continue
        stack.extend(node.iter_expressions())
    return out


def pullout(sel: exp.Select, ctx: PlanContext, plan_statement: StatementPlanner) -> Plan | None:
    """``sel`` with its WHERE subqueries run first (each planned by ``plan_statement``,
    then the outer query with their values bound), or None when it has none."""
    where = sel.args.get("where")
    if where is None:
        return None
    for e in sel.expressions:
        if any(True for _ in e.find_all(exp.Subquery, exp.Exists)):
            return None  # subqueries in the select list: not handled here
    found = candidates(where.this)
    if not found:
        return None
    sel = sel.copy()
    found = candidates(sel.args["where"].this)
    outer = outer_aliases(sel)
    pulled: list[tuple[str, str, str, Plan]] = []
    list_vars = set(ctx.list_vars)
    for node in found:
        n = ctx.new_var("")
        values_var, has_var = f"{SQ_PREFIX}{n}", f"{HAS_PREFIX}{n}"
        if isinstance(node, exp.In):
            query = node.args["query"]
            inner = query.this if isinstance(query, exp.Subquery) else query
            kind = "in"
        elif isinstance(node, exp.Exists):
            inner = node.this
            kind = "exists"
        else:
            inner = node.this
            kind = "value"
        _check_uncorrelated(inner, outer)
        sub_ctx = PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema, ctx.counter)
        sub_plan = plan_statement(inner, sub_ctx)
        has = exp.Placeholder(this=has_var)
        if kind == "in":
            if isinstance(node.this, exp.Tuple):
                raise unsupported("tuple IN subquery across shards")
            list_vars.add(values_var)
            in_list = exp.In(this=node.this.copy(), expressions=[exp.Placeholder(this=values_var)])
            negated = isinstance(node.parent, exp.Not)
            if negated:
                repl = exp.Paren(this=exp.Or(this=exp.EQ(this=has, expression=exp.Literal.number(0)),
                                             expression=exp.Not(this=in_list)))
                node.parent.replace(repl)  # type: ignore[union-attr]  # a subquery predicate always has a parent
            else:
                repl = exp.Paren(this=exp.And(this=exp.EQ(this=has, expression=exp.Literal.number(1)),
                                              expression=in_list))
                node.replace(repl)
        elif kind == "exists":
            negated = isinstance(node.parent, exp.Not)
            flag = exp.EQ(this=has, expression=exp.Literal.number(0 if negated else 1))
            (node.parent if negated else node).replace(flag)  # type: ignore[union-attr]  # a subquery predicate always has a parent
        else:
            node.replace(exp.Placeholder(this=values_var))
        pulled.append((kind, values_var, has_var, sub_plan))
    outer_ctx = PlanContext(ctx.vschema, ctx.keyspace, frozenset(list_vars), "", ctx.schema, ctx.counter,
                            names_from=ctx.names_source)
    plan = plan_statement(sel, outer_ctx)
    for kind, values_var, has_var, sub_plan in reversed(pulled):
        plan = PulloutSubquery(kind, values_var, has_var, sub_plan, plan)
    return plan
