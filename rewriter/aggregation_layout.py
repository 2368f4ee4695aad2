"""Aggregation split between the shards and the proxy (Vitess's ``Aggregate`` primitive
over partial aggregates): each shard groups its rows and sends partials (``COUNT`` ->
summed, ``AVG`` -> ``SUM`` and ``COUNT``, ``COUNT(DISTINCT x)`` -> ``x`` added to the
shard's GROUP BY), sorted by the group keys for a streaming merge; the proxy combines
them, then HAVING, expressions over aggregates, DISTINCT, ORDER BY and LIMIT.

Over the rows of a cross-shard join (no route to push partials to) the caller passes
``rows``, which plans the join of "partial" rows (``COUNT(*)`` -> 1, ``COUNT(x)`` ->
``x IS NOT NULL``, ``SUM/MIN/MAX(x)`` -> ``x``), sorted at the proxy by the group keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from rewriter import errors
from rewriter.aggregates import AGGREGATE_TYPES, has_aggregate, is_aggregate_call
from rewriter.context import PlanContext, to_sql
from rewriter.errors import unsupported
from rewriter.evaluate import compile_condition, compile_expr, compile_kind
from rewriter.nodes import (
    AGG_ANY_VALUE,
    AGG_AVG,
    AGG_COMPUTED,
    AGG_COUNT_DISTINCT,
    AGG_MAX,
    AGG_MIN,
    AGG_SUM,
    AGG_SUM_COUNT,
    AGG_SUM_COUNT_STAR,
    AGG_SUM_DISTINCT,
    Aggregate,
    AggSpec,
    Computed,
    Distinct,
    Filter,
    Limit,
    MemorySort,
    OrderKey,
    Plan,
    Projection,
    Truncate,
)
from rewriter.route_primitive import field_query_of, innermost_route, make_route
from rewriter.routing import RouteInfo
from rewriter.select_items import (
    SelectItem,
    limit_values,
    positional,
    same_expression,
    select_items,
)

# Plans the rows of a cross-shard join for aggregation at the proxy (join_planner.plan_join).
RowsPlanner = Callable[[exp.Select, PlanContext], Plan]


@dataclass(slots=True)
class _AggBuilder:
    pushed: list[exp.Expression] = field(default_factory=list)
    pushed_sql: dict[str, int] = field(default_factory=dict)
    specs: list[AggSpec] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    # COUNT/SUM(DISTINCT x) columns: added to the shards' GROUP BY, so each shard sends
    # each distinct value once per group (the proxy keeps a set per group)
    distinct_exprs: list[exp.Expression] = field(default_factory=list)

    def push(self, e: exp.Expression) -> int:
        key = to_sql(e).lower()
        idx = self.pushed_sql.get(key)
        if idx is None:
            idx = len(self.pushed)
            self.pushed.append(e.copy())
            self.pushed_sql[key] = idx
        return idx


def _agg_spec(b: _AggBuilder, e: exp.Expression, name: str) -> AggSpec:
    """Split one aggregate call into shard partials."""
    if isinstance(e, exp.Count):
        arg = e.this
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise unsupported("COUNT(DISTINCT) of several expressions across shards")
            return AggSpec(AGG_COUNT_DISTINCT, _distinct_col(b, arg.expressions[0]), name)
        if isinstance(arg, exp.Star) or arg is None:
            return AggSpec(AGG_SUM_COUNT_STAR, b.push(e), name)
        return AggSpec(AGG_SUM_COUNT, b.push(e), name)
    if isinstance(e, exp.Sum):
        if isinstance(e.this, exp.Distinct):
            return AggSpec(AGG_SUM_DISTINCT, _distinct_col(b, e.this.expressions[0]), name)
        return AggSpec(AGG_SUM, b.push(e), name)
    if isinstance(e, exp.Min | exp.Max):
        if isinstance(e.this, exp.Distinct):
            e = e.__class__(this=e.this.expressions[0])
        return AggSpec(AGG_MIN if isinstance(e, exp.Min) else AGG_MAX, b.push(e), name)
    if isinstance(e, exp.Avg):
        if isinstance(e.this, exp.Distinct):
            raise unsupported("AVG(DISTINCT) across shards")
        s = b.push(exp.Sum(this=e.this.copy()))
        c = b.push(exp.Count(this=e.this.copy()))
        return AggSpec(AGG_AVG, s, name, c)
    raise unsupported(f"aggregate {to_sql(e)} across shards")


def _distinct_col(b: _AggBuilder, e: exp.Expression) -> int:
    if not any(same_expression(d, e) for d in b.distinct_exprs):
        b.distinct_exprs.append(e)
    return b.push(e)


def _raw_partial(e: exp.Expression) -> exp.Expression:
    """The per-row value whose sum/min/max over rows equals the aggregate ``e``."""
    if isinstance(e, exp.Count):
        arg = e.this
        if arg is None or isinstance(arg, exp.Star):
            return exp.Literal.number(1)
        return exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null()))
    if isinstance(e, exp.Sum | exp.Min | exp.Max):
        return e.this.copy()
    return e.copy()


def aggregate_over_join(sel: exp.Select, ctx: PlanContext, rows: RowsPlanner) -> Plan:
    """Aggregation at the proxy over the rows of a cross-shard join (``rows`` plans them)."""
    return _plan_aggregation(sel, select_items(sel, ctx), None, ctx, rows)


def aggregate_over_route(sel: exp.Select, items: list[SelectItem], info: RouteInfo, ctx: PlanContext) -> Plan:
    """Aggregation split between the shards of a multi-shard route (``info``) and the proxy."""
    return _plan_aggregation(sel, items, info, ctx, None)


def _plan_aggregation(sel: exp.Select, items: list[SelectItem], info: RouteInfo | None, ctx: PlanContext,
                      rows: RowsPlanner | None) -> Plan:
    if any(i.star for i in items):
        raise unsupported("'*' in an aggregated query across shards")
    b = _AggBuilder()
    group = sel.args.get("group")
    group_exprs: list[exp.Expression] = []
    for g in (group.expressions if group else []):
        pos = positional(g)
        if pos is not None:
            if not 1 <= pos <= len(items):
                raise errors.UnknownColumn(f"Unknown column '{pos}' in 'group statement'")
            g = items[pos - 1].expr
        elif isinstance(g, exp.Column) and not g.table:
            for it in items:
                if it.alias and it.alias.lower() == g.name.lower():
                    g = it.expr
                    break
        if has_aggregate(g):
            raise errors.WrongGroupField(f"Can't group on '{to_sql(g)}'")
        group_exprs.append(g)
    group_idx = [b.push(g) for g in group_exprs]

    computed_items: list[int] = []

    def output_for(e: exp.Expression, name: str, visible_at: int | None = None) -> AggSpec:
        if isinstance(e, AGGREGATE_TYPES):
            return _agg_spec(b, e, name)
        if is_aggregate_call(e):
            raise unsupported(f"aggregate function {to_sql(e)} across shards")
        if has_aggregate(e):
            if visible_at is None:
                raise unsupported(f"expression over aggregates across shards: {to_sql(e)}")
            # computed at the proxy from the aggregates it uses (Projection above)
            computed_items.append(visible_at)
            return AggSpec(AGG_COMPUTED, 0, name)
        return AggSpec(AGG_ANY_VALUE, b.push(e), name)

    for i, it in enumerate(items):
        b.specs.append(output_for(it.expr, it.name, visible_at=i))
        b.names.append(it.name)
    n_visible = len(b.specs)

    def find_output(e: exp.Expression) -> int | None:
        if isinstance(e, exp.Column) and not e.table:
            for i, it in enumerate(items):
                if it.alias and it.alias.lower() == e.name.lower() and i not in computed_items:
                    return i
        for i, it in enumerate(items):
            if same_expression(e, it.expr) and i not in computed_items:
                return i
        return None

    def computed_item_for(e: exp.Expression) -> int | None:
        """The computed select item ``e`` names (by alias) or repeats, if any."""
        for i in computed_items:
            alias = items[i].alias
            if isinstance(e, exp.Column) and not e.table and alias and alias.lower() == e.name.lower():
                return i
            if same_expression(e, items[i].expr):
                return i
        return None

    def expand_computed_aliases(e: exp.Expression) -> exp.Expression:
        def swap(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and not node.table:
                for i in computed_items:
                    alias = items[i].alias
                    if alias and alias.lower() == node.name.lower():
                        return items[i].expr.copy()
            return node

        return e.copy().transform(swap)

    def resolve_or_add(e: exp.Expression) -> int | None:
        if isinstance(e, exp.Literal | exp.Placeholder | exp.Null):
            return None
        idx = find_output(e)
        if idx is not None:
            return idx
        for i in range(n_visible, len(b.specs)):
            if same_expression(e, hidden_exprs[i - n_visible]):
                return i
        if isinstance(e, AGGREGATE_TYPES) or (isinstance(e, exp.Column)):
            b.specs.append(output_for(e, to_sql(e)))
            b.names.append(to_sql(e))
            hidden_exprs.append(e)
            return len(b.specs) - 1
        return None

    hidden_exprs: list[exp.Expression] = []
    computed: list[Computed] = []
    for i in computed_items:
        it = items[i]
        computed.append(Computed(i, compile_expr(it.expr, resolve_or_add),
                                 compile_kind(it.expr, resolve_or_add), it.name, to_sql(it.expr)))
    having = sel.args.get("having")
    predicate = None
    if having is not None:
        predicate = compile_condition(expand_computed_aliases(having.this), resolve_or_add)
    def hidden_computed(e: exp.Expression) -> int:
        """An ORDER BY expression that is no select item (``sum(a) / count(*)``,
        ``datediff(max(d), min(d))``): computed at the proxy into a hidden column (the
        aggregates it reads added as hidden outputs), sorted on, then truncated."""
        expr = expand_computed_aliases(e)
        fn = compile_expr(expr, resolve_or_add)
        kind = compile_kind(expr, resolve_or_add)
        b.specs.append(AggSpec(AGG_COMPUTED, 0, to_sql(e)))
        b.names.append(to_sql(e))
        hidden_exprs.append(e)
        computed.append(Computed(len(b.specs) - 1, fn, kind, to_sql(e), to_sql(e)))
        return len(b.specs) - 1

    order_keys: list[OrderKey] = []
    order = sel.args.get("order")
    for o in (order.expressions if order else []):
        e = o.this
        pos = positional(e)
        if pos is not None:
            if not 1 <= pos <= n_visible:
                raise errors.UnknownColumn(f"Unknown column '{pos}' in 'order clause'")
            idx = pos - 1
        else:
            idx = computed_item_for(e)  # type: ignore[assignment]  # checked for None on the next line
            if idx is None:
                idx = resolve_or_add(e)
            if idx is None:
                idx = hidden_computed(e)  # raises Unsupported for what the evaluator cannot compute
        order_keys.append(OrderKey(idx, bool(o.args.get("desc")), to_sql(e)))

    # the pushed query: partials, grouped and ordered by the group keys (+ distinct column)
    shard_group = list(group_idx)
    for d in b.distinct_exprs:
        idx = b.push(d)
        if idx not in shard_group:
            shard_group.append(idx)
    pushed = sel.copy()
    for key in ("having", "order", "limit", "offset", "distinct"):
        pushed.set(key, None)
    plan: Plan
    if info is None:
        # a cross-shard join: it returns single rows, each turned into "partials"
        # (COUNT(*) -> 1, COUNT(x) -> x IS NOT NULL, SUM/MIN/MAX(x) -> x), sorted at
        # the proxy by the group keys
        assert rows is not None  # aggregate_over_join passes it
        pushed.set("expressions", [_raw_partial(p) for p in b.pushed])
        pushed.set("group", None)
        plan = rows(pushed, ctx)
        if group_idx:
            plan = MemorySort([OrderKey(i, False, to_sql(b.pushed[i])) for i in group_idx], plan)
    else:
        pushed.set("expressions", [p.copy() for p in b.pushed])
        if shard_group:
            pushed.set("group", exp.Group(expressions=[b.pushed[i].copy() for i in shard_group]))
            pushed.set("order", exp.Order(expressions=[exp.Ordered(this=b.pushed[i].copy(), nulls_first=True)
                                                       for i in shard_group]))
        else:
            pushed.set("group", None)
        plan = make_route(info, to_sql(pushed), field_query_of(pushed))
        route = innermost_route(plan)
        route.order_by = [OrderKey(i, False, to_sql(b.pushed[i])) for i in shard_group]
    variant = "Ordered" if group_idx else "Scalar"
    plan = Aggregate(variant, group_idx, list(b.specs), plan, output_names=list(b.names))
    if predicate is not None:
        plan = Filter(predicate, plan, text=to_sql(having.this))  # type: ignore[union-attr]  # having is set on this path
    if computed:
        plan = Projection(computed, plan)
    n_hidden = len(b.specs) - n_visible
    if sel.args.get("distinct"):
        if n_hidden:
            plan = Truncate(n_hidden, plan)
            n_hidden = 0
            if any(k.column >= n_visible for k in order_keys):
                raise unsupported("ORDER BY on a column outside a DISTINCT select list across shards")
        plan = Distinct(plan)
    count, offset = limit_values(sel, ctx)
    if order_keys:
        plan = MemorySort(order_keys, plan)
    if count is not None:
        plan = Limit(count, offset, plan)
    if n_hidden:
        plan = Truncate(n_hidden, plan)
    return plan
