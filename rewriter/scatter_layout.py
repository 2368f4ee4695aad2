"""The layout of a statement over one multi-shard route whose result needs the proxy
(Vitess's ``transformToPrimitive`` for a Route under Ordering / Limit / Distinct /
Aggregator): the shard query rewritten (ORDER BY keys merge-sorted at the proxy, helper
columns appended and truncated, LIMIT as ``offset+count`` on every shard) and the
proxy primitives above the route. Aggregation is laid out by
``rewriter.aggregation_layout``.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter import errors
from rewriter.aggregates import has_aggregate
from rewriter.aggregation_layout import aggregate_over_route
from rewriter.context import DIALECT, PlanContext, to_sql
from rewriter.errors import unsupported
from rewriter.nodes import UPPER_LIMIT, Distinct, Limit, OrderKey, Plan
from rewriter.route_primitive import field_query_of, innermost_route, make_route
from rewriter.routing import RouteInfo
from rewriter.select_items import (
    SelectItem,
    limit_values,
    name_as_written,
    named_as_written,
    positional,
    same_expression,
    select_items,
)
from rewriter.window_pushdown import windows_within_shards


def needs_proxy_work(sel: exp.Select) -> bool:
    if sel.args.get("group") or sel.args.get("having") or sel.args.get("distinct"):
        return True
    if sel.args.get("order") or sel.args.get("limit") or sel.args.get("offset"):
        return True
    return any(has_aggregate(e) for e in sel.expressions)


def check_scatter_safe(sel: exp.Select, ctx: PlanContext) -> None:
    """Constructs whose per-shard results cannot be combined into the right answer."""
    windows_local = None
    for node in sel.walk():
        if isinstance(node, exp.Window):
            if windows_local is None:
                windows_local = windows_within_shards(sel, ctx)
            if not windows_local:
                raise unsupported("window functions across shards")
        if isinstance(node, exp.PropertyEQ):
            raise unsupported("user variable assignment across shards")
    if any(str(m.this).upper() == "SQL_CALC_FOUND_ROWS" for m in sel.args.get("operation_modifiers") or []):
        raise unsupported("SQL_CALC_FOUND_ROWS across shards")
    group = sel.args.get("group")
    if group is not None and (group.args.get("rollup") or group.args.get("cube") or group.args.get("totals")):
        raise unsupported("GROUP BY WITH ROLLUP across shards")



def only_order_by(sel: exp.Select) -> bool:
    """Whether ``sel`` needs the proxy only for its ORDER BY."""
    if not sel.args.get("order"):
        return False
    s = sel.copy()
    s.set("order", None)
    return not needs_proxy_work(s)



def plan_scatter_select(sel: exp.Select, info: RouteInfo, ctx: PlanContext) -> Plan:
    items = select_items(sel, ctx)
    having, order = sel.args.get("having"), sel.args.get("order")
    # HAVING without GROUP BY or aggregates filters single rows: the shards can do it
    has_agg = (bool(sel.args.get("group")) or any(has_aggregate(i.expr) for i in items)
               or (having is not None and has_aggregate(having.this))
               or (order is not None and any(has_aggregate(o.this) for o in order.expressions)))
    if has_agg:
        return aggregate_over_route(sel, items, info, ctx)
    return _plan_ordered_scatter(sel, items, info, ctx)


def _plan_ordered_scatter(sel: exp.Select, items: list[SelectItem], info: RouteInfo, ctx: PlanContext) -> Plan:
    pushed = sel.copy()
    name_as_written(pushed, items)
    count, offset = limit_values(sel, ctx)
    pushed.set("limit", None)
    pushed.set("offset", None)
    hidden: list[exp.Expression] = []
    keys: list[tuple[str, int, bool, str]] = []  # (kind, pos, desc, text)
    order = sel.args.get("order")
    for o in (order.expressions if order else []):
        e = o.this
        desc = bool(o.args.get("desc"))
        pos = positional(e)
        if pos is not None:
            if pos < 1 or pos > len(items) and not any(i.star for i in items):
                raise errors.UnknownColumn(f"Unknown column '{pos}' in 'order clause'")
            keys.append(("abs", pos - 1, desc, e.sql(dialect=DIALECT)))
            continue
        found = None
        for idx, it in enumerate(items):
            if it.star:
                continue
            if (isinstance(e, exp.Column) and not e.table and it.alias and it.alias.lower() == e.name.lower()) or same_expression(e, it.expr):
                found = idx
                break
        if found is not None:
            keys.append(("item", found, desc, to_sql(e)))
        else:
            hidden.append(e.copy())
            keys.append(("hidden", len(hidden) - 1, desc, to_sql(e)))
    if hidden and sel.args.get("distinct"):
        raise unsupported("ORDER BY expression not in the select list of a DISTINCT query across shards")
    for h in hidden:
        pushed.append("expressions", h)
    n_hidden = len(hidden)
    star_at = next((i for i, it in enumerate(items) if it.star), None)
    order_keys = []
    for kind, pos, desc, text in keys:
        if kind == "abs":
            idx = pos
        elif kind == "item":
            idx = pos if star_at is None or pos < star_at else pos - len(items) - n_hidden
        else:
            idx = -(n_hidden - pos)
        order_keys.append(OrderKey(idx, desc, text))
    if count is not None:
        pushed.set("limit", exp.Limit(expression=exp.Placeholder(this=UPPER_LIMIT)))
    # the field query has the hidden columns too: a route to no shard (a lookup finding
    # nothing) answers with its fields, truncated like rows are
    fields = named_as_written(sel, ctx)
    if hidden:
        fields = fields.copy() if fields is sel else fields
        for h in hidden:
            fields.append("expressions", h.copy())
    plan: Plan = make_route(info, to_sql(pushed), field_query_of(fields, disposable=fields is not sel))
    route = innermost_route(plan)
    route.order_by = order_keys
    route.truncate = n_hidden
    if sel.args.get("distinct"):
        plan = Distinct(plan)
    if count is not None:
        plan = Limit(count, offset, plan)
    return plan

