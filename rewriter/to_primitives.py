"""The last planning step: a rewritten operator tree (``rewriter.rules``) -> the engine
primitives of ``rewriter.nodes`` (Vitess's ``transformToPrimitive``).

- A lone Route took the whole statement: one ``nodes.Route`` (behind a
  ``VindexLookup`` when its vindex needs one) sending the client's own text when the
  tables needed no renaming (so result columns are named as MySQL names them).
- A scatter Route under the operators the rules split or pushed (partial
  aggregation, merge-sorted ORDER BY, shard-side LIMIT, DISTINCT, HAVING): the shard
  query with partials and sort keys and the proxy primitives above it (``Aggregate``,
  ``Filter``, ``Projection``, ``Distinct``, ``MemorySort``, ``Limit``, ``Truncate``)
  as ``scatter_layout.plan_scatter_select`` lays them out.
- A Union left at the proxy: ``Concatenate`` of its arms' primitives (each arm
  through these rules, or planned as a statement of its own, ``Planning.plan_statement``), under
  ``Distinct`` for UNION.
- A Route carrying a whole statement (``operator_builder.whole_statement``): the
  statement as it is, or over a scatter the same layout as the operators split.
- A Route that took a derived table (``merge_derived``): the statement regenerated.
- A derived table left on its own (``Derived``): its query planned alone, the outer
  filter, projection and LIMIT at the proxy (``derived_layout``).
- A WHERE subquery not merged into the outer route: pulled out, run first
  (``subquery_planner.pullout``: ``UncorrelatedSubquery``, each statement planned by
  ``Planning.plan_statement``); a correlated [NOT] EXISTS /
  IN of the narrow shape: ``semijoin_planner`` (``SemiJoin``).
- Joins left at the proxy between Routes: the nested-loop / batched / hash joins
  ``join_planner.plan_join`` lays out (strategy from ``join_strategy``'s cost model).
- A WITH statement whose inlined tree is one single-shard Route: the WITH text.
- Window functions left at the proxy over one scatter Route: ``window_planner``
  (Route sorted by the partition and order keys -> Window -> ...).
- Anything else: None (the caller tries the whole statement as one Route, else
  computes it at the proxy).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.context import PlanContext, to_sql
from rewriter.derived_layout import plan_over_derived
from rewriter.join_planner import plan_join
from rewriter.nodes import SINGLE_SHARD, Concatenate, Distinct, MemorySort, Plan
from rewriter.nodes import Limit as LimitPrimitive
from rewriter.operator_builder import union_arms
from rewriter.operators import (
    Aggregator,
    ApplyJoin,
    Derived,
    Filter,
    Limit,
    Operator,
    Ordering,
    Projection,
    Route,
    SubQuery,
    Union,
    Window,
)
from rewriter.operators import Distinct as DistinctOp
from rewriter.route_primitive import field_query_of, make_route, strip_qualifiers
from rewriter.routing import RouteInfo
from rewriter.rules.planning import Planning
from rewriter.scatter_layout import (
    check_scatter_safe,
    needs_proxy_work,
    only_order_by,
    plan_scatter_select,
)
from rewriter.select_items import limit_values, named_as_written
from rewriter.semantics import base_tables
from rewriter.semijoin_planner import plan_semi_join
from rewriter.subquery_planner import pullout
from rewriter.tables import resolve_table
from rewriter.union_ordering import union_order_keys
from rewriter.window_planner import plan_window_select


def to_primitives(op: Operator, sel: exp.Expression, planning: Planning) -> Plan | None:
    """The primitives of ``op`` (rewritten from ``sel``), or None when some operator
    has no primitive here yet. ``sel``'s table names are rewritten for the shards
    (in place) only once the answer is not None."""
    ctx = planning.ctx
    if isinstance(sel, exp.SetOperation):  # UNION, or INTERSECT / EXCEPT on one route whole
        return _union(op, sel, planning)
    assert isinstance(sel, exp.Select)
    if sel.args.get("with_") or sel.args.get("with"):
        return _with_statement(op, sel, planning)
    above: list[Operator] = []
    while not isinstance(op, Route):
        if isinstance(op, ApplyJoin):
            return plan_join(sel, ctx) if _routes_only(op) else None
        if isinstance(op, SubQuery):  # not merged: run first (subquery_planner.pullout), or correlated:
            # filtered at the proxy when the narrow SemiJoin shape (semijoin_planner)
            if planning.plan_statement is None:
                return None
            if not _pullouts_only(op):
                return plan_semi_join(sel, ctx, planning.plan_statement)
            return plan_semi_join(sel, ctx, planning.plan_statement) or pullout(sel, ctx, planning.plan_statement)
        if isinstance(op, Derived):  # not merged into a route (rules.merge_derived)
            if planning.plan_statement is None:
                return None
            return plan_over_derived(sel, ctx, planning.plan_statement)
        if isinstance(op, Window):  # not pushed (rules.push_window): computed at the proxy
            return _window_at_proxy(op, sel, above, planning)
        if not isinstance(op, Aggregator | DistinctOp | Filter | Limit | Ordering | Projection):
            return None
        above.append(op)
        op = op.input
    info = planning.routing(op)
    if "derived" in op.absorbed and op.vindexed_tables():
        return _over_derived_table(sel, op, info, planning, bool(above))
    if "whole" in op.absorbed and not planning.one_shard(op):
        check_scatter_safe(sel, ctx)
        if needs_proxy_work(sel):
            strip_qualifiers(sel, info.tables, ctx)
            return plan_scatter_select(sel, info, ctx)
    if not above:
        changed = strip_qualifiers(sel, info.tables, ctx)
        named = named_as_written(sel, ctx)
        sql = to_sql(named) if changed or not ctx.source else ctx.source
        return make_route(info, sql, field_query_of(named, disposable=named is not sel))
    if not all(_at_proxy(o) for o in above):
        return None
    strip_qualifiers(sel, info.tables, ctx)
    return plan_scatter_select(sel, info, ctx)


def _with_statement(op: Operator, sel: exp.Select, planning: Planning) -> Plan | None:
    """A WITH statement whose inlined tree is one Route to one shard: that shard runs the
    statement as written (MySQL evaluates the CTEs). Over no vindexed table it is
    planned like any one-route SELECT (the client's text); else regenerated, keyspace
    qualifiers dropped (``read_planner`` plans the same)."""
    if not isinstance(op, Route):
        return None
    info = planning.routing(op)
    if info.opcode not in SINGLE_SHARD or (info.choice is not None and info.choice.needs_lookup):
        return None
    ctx = planning.ctx
    if not op.vindexed_tables():
        refs = [resolve_table(t, ctx.vschema, ctx.keyspace) for t in base_tables(sel)]
        changed = strip_qualifiers(sel, refs, ctx)
        named = named_as_written(sel, ctx)
        sql = to_sql(named) if changed or not ctx.source else ctx.source
        info = RouteInfo(info.opcode, info.keyspace, info.sharded, info.choice, refs, info.target_ksid)
        return make_route(info, sql, field_query_of(named, disposable=named is not sel))
    original = sel.copy()
    keyspaces = set(ctx.vschema.keyspaces)
    for t in original.find_all(exp.Table):
        if t.args.get("db") is not None and t.args["db"].name in keyspaces:
            t.set("db", None)  # a shard names its own database
    return make_route(info, to_sql(original), field_query_of(original, disposable=True))


def _over_derived_table(sel: exp.Select, route: Route, info: RouteInfo, planning: Planning,
                        proxy_work: bool) -> Plan:
    """A SELECT over a derived table merged into its sharded route (``merge_derived``):
    the statement regenerated for the shards, the derived table's ORDER BY dropped,
    the outer query's grouping, ordering and limits at the proxy over a scatter."""
    ctx = planning.ctx
    derived = sel.args["from_"].this if sel.args.get("from_") else sel.args["from"].this
    if isinstance(derived.this, exp.Select) and only_order_by(derived.this):
        derived.this.set("order", None)  # ordering inside a derived table has no meaning in SQL
    strip_qualifiers(sel, info.tables, ctx)
    if proxy_work and not planning.one_shard(route):
        return plan_scatter_select(sel, info, ctx)
    return make_route(info, to_sql(sel), field_query_of(sel))


def _window_at_proxy(op: Window, sel: exp.Select, above: list[Operator], planning: Planning) -> Plan | None:
    """Window functions over the rows of one scatter Route, under nothing but the
    select list, ORDER BY and LIMIT (``window_planner``)."""
    if not isinstance(op.input, Route) or planning.one_shard(op.input) \
            or not all(isinstance(o, Projection | Ordering | Limit) for o in above):
        return None
    info = planning.routing(op.input)
    if "derived" in op.input.absorbed:
        return None
    if plan_window_select(sel, info, planning.ctx) is None:
        return None  # sel left as it is (the caller tries it whole, else Compute)
    strip_qualifiers(sel, info.tables, planning.ctx)
    return plan_window_select(sel, info, planning.ctx)


def _pullouts_only(op: Operator) -> bool:
    while isinstance(op, SubQuery):
        if not op.pullout:
            return False
        op = op.outer
    return True


def _routes_only(op: Operator) -> bool:
    if isinstance(op, Route):
        return True
    return isinstance(op, ApplyJoin | Filter) and all(_routes_only(i) for i in op.inputs())


def _at_proxy(op: Operator) -> bool:
    """Whether ``op``, left above a scatter Route, has a proxy primitive."""
    if isinstance(op, Aggregator | Ordering | Limit):
        return op.pushed
    return isinstance(op, Projection | DistinctOp) or (isinstance(op, Filter) and op.clause == "having")


def _union(op: Operator, u: exp.SetOperation, planning: Planning) -> Plan | None:
    ctx = planning.ctx
    if isinstance(op, Route):  # rules.merge_union: the UNION goes whole to one place
        info = planning.routing(op)
        changed = strip_qualifiers(u, info.tables, ctx)
        return make_route(info, to_sql(u) if changed or not ctx.source else ctx.source, "")
    # ORDER BY / LIMIT over the whole UNION (operator_builder): at the proxy
    limit = op if isinstance(op, Limit) else None
    op = op.input if isinstance(op, Limit) else op
    ordering = op if isinstance(op, Ordering) else None
    op = op.input if isinstance(op, Ordering) else op
    if not isinstance(op, Union) or not isinstance(u, exp.Union):
        return None
    found = union_arms(u)
    assert found is not None  # the builder built this Union from them
    arms, distinct = found
    keys = union_order_keys(ordering.keys, arms, ctx) if ordering is not None else None
    if ordering is not None and keys is None:
        return None  # before the arms are planned: they rewrite their tables in place
    sources: list[Plan] = []
    for arm_op, arm in zip(op.sources, arms, strict=True):
        # an arm is its own statement: its columns are named by its regenerated text
        sub = PlanContext(ctx.vschema, ctx.keyspace, ctx.list_vars, "", ctx.schema, ctx.counter)
        sub_planning = planning.for_context(sub)
        planned = to_primitives(arm_op, arm, sub_planning)
        if planned is None:
            if planning.plan_statement is None:
                return None
            planned = planning.plan_statement(arm, sub)
        sources.append(planned)
    plan: Plan = Concatenate(sources)
    if distinct:
        plan = Distinct(plan)
    if keys is not None:
        plan = MemorySort(keys, plan)
    if limit is not None:
        count, offset = limit_values(u, ctx)  # type: ignore[arg-type]  # a UNION holds LIMIT as a SELECT does
        if count is None:
            return None  # OFFSET without a row count: MySQL has no such statement
        plan = LimitPrimitive(count, offset, plan)
    return plan
