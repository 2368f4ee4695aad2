"""A SELECT over a derived table that stays its own statement (not merged into a route,
``rules.merge_derived``): the derived table's query planned on its own, the outer
query's filter, projection (by column name), DISTINCT and LIMIT at the proxy over its
rows. Aggregation, ORDER BY, subqueries or windows over such a derived table are left
to Compute.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors
from rewriter.aggregates import has_aggregate
from rewriter.context import PlanContext, select_item_texts, to_sql
from rewriter.errors import unsupported
from rewriter.evaluate import compile_condition
from rewriter.nodes import Distinct, Filter, Limit, Plan, ProjectNames, Val
from rewriter.routing import value_of
from rewriter.rules.planning import StatementPlanner
from rewriter.select_items import limit_values
from rewriter.whole_route import from_sources


def plan_over_derived(sel: exp.Select, ctx: PlanContext, plan_statement: StatementPlanner) -> Plan | None:
    """``SELECT cols FROM (<any plannable query>) alias [WHERE ...] [LIMIT n]``: the inner
    query is planned on its own (``plan_statement``: aggregation, joins, ...) and the outer projection and
    filter run at the proxy over its rows, by column name. This is what Spark's JDBC
    ``query`` option sends (``SELECT * FROM (<q>) SPARK_GEN_SUBQ_0 WHERE 1=0``)."""
    sources = from_sources(sel)
    if len(sources) != 1 or not isinstance(sources[0], exp.Subquery) or sel.args.get("joins"):
        return None
    if (sel.args.get("group") or sel.args.get("having") or sel.args.get("order")
            or any(has_aggregate(e) for e in sel.expressions)):
        raise unsupported("aggregation or ORDER BY over a derived table that spans shards")
    alias = sources[0].alias_or_name
    where = sel.args.get("where")
    for node in [*sel.expressions, *([where] if where is not None else [])]:
        for sub in node.find_all(exp.Subquery, exp.Select, exp.Window):
            raise unsupported(f"subquery or window in a query over a derived table: {to_sql(sub)}")
    sub_ctx = PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema, ctx.counter)
    inner_plan = plan_statement(sources[0].this, sub_ctx)

    def own_column(col: exp.Column) -> str:
        if col.table and col.table != alias:
            raise errors.UnknownColumn(f"Unknown column '{col.table}.{col.name}' in 'field list'")
        return col.name

    plan: Plan = inner_plan
    if where is not None:
        names: list[str] = []

        def resolve(e: exp.Expression) -> int | None:
            if isinstance(e, exp.Column):
                name = own_column(e).lower()
                if name not in names:
                    names.append(name)
                return names.index(name)
            return None

        plan = Filter(compile_condition(where.this, resolve), plan, text=to_sql(where.this), names=names)
    columns: list[str | Val | None] = []
    aliases: list[str | None] = []
    texts = select_item_texts(ctx.names_source, len(sel.expressions)) if ctx.names_source else None
    for k, e in enumerate(sel.expressions):
        out_alias = e.alias if isinstance(e, exp.Alias) else None
        inner_e = e.this if isinstance(e, exp.Alias) else e
        if isinstance(inner_e, exp.Star) or (isinstance(inner_e, exp.Column) and isinstance(inner_e.this, exp.Star)):
            columns.append(None)
        elif isinstance(inner_e, exp.Column):
            columns.append(own_column(inner_e))
        elif (const := value_of(inner_e, ctx.list_vars)) is not None:
            columns.append(const)
            if out_alias is None:
                out_alias = texts[k] if texts is not None else to_sql(inner_e)
        else:
            raise unsupported(f"expression {to_sql(inner_e)} over a derived table that spans shards")
        aliases.append(out_alias)
    plan = ProjectNames(columns, aliases, plan)
    if sel.args.get("distinct"):
        plan = Distinct(plan)
    count, offset = limit_values(sel, ctx)
    if count is not None:
        plan = Limit(count, offset, plan)
    return plan
