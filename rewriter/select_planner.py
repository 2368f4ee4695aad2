"""Planning SELECT (and UNION) statements.

1. Resolve the FROM tables; decide whether the whole statement (subqueries included)
   fits one route: same unsharded keyspace, system tables, reference tables alongside
   anything in their keyspace, sharded tables joined on the same vindex.
2. One route: choose the variant from the WHERE clause (``rewriter.routing``). A
   single-shard route gets the statement whole (the client's own text, so result
   column names are MySQL's). A multi-shard route gets it whole too unless the result
   needs work at the proxy: then the pushed query is rewritten (aggregates split into
   partials, GROUP BY keys ordered at the shards for a streaming merge, LIMIT as
   ``offset+count``, ORDER BY helper columns appended) and Aggregate / Filter (HAVING)
   / Projection (expressions over aggregates) / Distinct / MemorySort / Limit /
   Truncate nodes are placed above the route.
3. Not one route:
   - uncorrelated subqueries in WHERE run first (``rewriter.subquery_planner``);
   - ``SELECT ... FROM (<derived>) t``: a simple derived table rides along with its
     route; any other is planned on its own with the outer filter/projection at the
     proxy (Spark's ``SELECT * FROM (<q>) SPARK_GEN_SUBQ_0 WHERE 1=0``);
   - otherwise a nested-loop join (``rewriter.join_planner``).
Anything else that cannot be answered exactly raises ``Unsupported`` (VT12001).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors
from rewriter.aggregates import has_aggregate
from rewriter.context import PlanContext, select_item_texts, to_sql
from rewriter.errors import unsupported
from rewriter.evaluate import compile_expr
from rewriter.nodes import (
    SINGLE_SHARD,
    Concatenate,
    Distinct,
    Filter,
    Limit,
    Opcode,
    Plan,
    ProjectNames,
    Val,
)
from rewriter.route_primitive import field_query_of, make_route, strip_qualifiers
from rewriter.routing import value_of
from rewriter.scatter_layout import (
    check_scatter_safe,
    needs_proxy_work,
    only_order_by,
    plan_scatter_select,
)
from rewriter.select_items import limit_values, named_as_written
from rewriter.whole_route import all_tables_in, from_sources, single_route

# ---------------------------------------------------------------- SELECT


def plan_select(sel: exp.Expression, ctx: PlanContext) -> Plan:
    if isinstance(sel, exp.Union):
        return _plan_union(sel, ctx)
    if isinstance(sel, exp.Subquery):
        return plan_select(sel.this, ctx)
    if not isinstance(sel, exp.Select):
        raise unsupported(f"statement {type(sel).__name__}")
    if sel.args.get("into") is not None:
        raise unsupported("SELECT INTO")
    if sel.args.get("with_") or sel.args.get("with"):
        info = single_route(sel, None, ctx)
        if info is None or info.opcode not in SINGLE_SHARD:
            raise unsupported("WITH expression in a query spanning shards")
    info = single_route(sel, sel, ctx)
    if info is None:
        from rewriter.subquery_planner import pullout

        pulled = pullout(sel, ctx)
        if pulled is not None:
            return pulled
        derived = _derived_passthrough(sel, ctx)
        if derived is not None:
            return derived
        derived = _derived_over_plan(sel, ctx)
        if derived is not None:
            return derived
        from rewriter.join_planner import plan_join

        return plan_join(sel, ctx)
    changed = strip_qualifiers(sel, info.tables, ctx)
    single = info.opcode in SINGLE_SHARD or (info.opcode is Opcode.ByDestination) or info.opcode is Opcode.None_
    if single:
        named = named_as_written(sel, ctx)
        sql = to_sql(named) if changed or not ctx.source else ctx.source
        return make_route(info, sql, field_query_of(named))
    check_scatter_safe(sel, ctx)
    if not needs_proxy_work(sel):
        named = named_as_written(sel, ctx)
        sql = to_sql(named) if changed or not ctx.source else ctx.source
        return make_route(info, sql, field_query_of(named))
    return plan_scatter_select(sel, info, ctx)


def _derived_passthrough(sel: exp.Select, ctx: PlanContext) -> Plan | None:
    """``SELECT ... FROM (<inner>) alias ...`` where inner is a simple one-table select on a
    sharded table (no aggregation, LIMIT, DISTINCT): each shard can evaluate the derived
    table over its own rows, so the outer query is planned as over that route."""
    sources = from_sources(sel)
    if len(sources) != 1 or not isinstance(sources[0], exp.Subquery) or sel.args.get("joins"):
        return None
    inner = sources[0].this
    if not isinstance(inner, exp.Select):
        return None
    if needs_proxy_work(inner) and not only_order_by(inner):
        return None  # the inner result needs the proxy: _derived_over_plan
    inner_info = single_route(inner, inner, ctx)
    if inner_info is None:
        return None
    if all_tables_in(sel, ctx) != [] and len(all_tables_in(sel, ctx)) != len(inner_info.tables):
        return None  # subqueries elsewhere in the outer query
    if only_order_by(inner):
        inner.set("order", None)  # ordering inside a derived table has no meaning in SQL
    strip_qualifiers(sel, inner_info.tables, ctx)
    single = inner_info.opcode in SINGLE_SHARD or inner_info.opcode in (Opcode.ByDestination, Opcode.None_)
    if single:
        return make_route(inner_info, to_sql(sel), field_query_of(sel))
    check_scatter_safe(sel, ctx)
    check_scatter_safe(inner, ctx)
    if not needs_proxy_work(sel):
        return make_route(inner_info, to_sql(sel), field_query_of(sel))
    return plan_scatter_select(sel, inner_info, ctx)


def _derived_over_plan(sel: exp.Select, ctx: PlanContext) -> Plan | None:
    """``SELECT cols FROM (<any plannable query>) alias [WHERE ...] [LIMIT n]``: the inner
    query is planned on its own (aggregation, joins, ...) and the outer projection and
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
    inner_plan = plan_select(sources[0].this, sub_ctx)

    def own_column(col: exp.Column) -> str:
        if col.table and col.table != alias:
            raise errors.PlanningError(f"Unknown column '{col.table}.{col.name}' in 'field list'")
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

        plan = Filter(compile_expr(where.this, resolve), plan, text=to_sql(where.this), names=names)
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


def _plan_union(u: exp.Union, ctx: PlanContext) -> Plan:
    info = single_route(u, None, ctx)
    if info is not None and info.opcode in SINGLE_SHARD:
        changed = strip_qualifiers(u, info.tables, ctx)
        sql = to_sql(u) if changed or not ctx.source else ctx.source
        return make_route(info, sql, "")
    if u.args.get("order") or u.args.get("limit") or u.args.get("offset"):
        raise unsupported("ORDER BY or LIMIT on a UNION across shards")
    sources: list[Plan] = []
    distinct = False

    def walk(node: exp.Expression, under_all: bool = False) -> None:
        nonlocal distinct
        if isinstance(node, exp.Union) and not isinstance(node, exp.Except | exp.Intersect):
            if node.args.get("distinct"):
                if under_all:
                    # (A UNION B) UNION ALL C: C keeps its duplicates; one Distinct over
                    # every arm would drop them
                    raise unsupported("UNION DISTINCT followed by UNION ALL across shards")
                distinct = True
            all_here = under_all or not node.args.get("distinct")
            walk(node.this, all_here)
            walk(node.expression, all_here)
        elif isinstance(node, exp.Except | exp.Intersect):
            raise unsupported("EXCEPT/INTERSECT across shards")
        else:
            sub = PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema, ctx.counter)
            sources.append(plan_select(node, sub))

    walk(u)
    plan: Plan = Concatenate(sources)
    if distinct:
        plan = Distinct(plan)
    return plan


