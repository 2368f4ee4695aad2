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

from dataclasses import dataclass, field

from sqlglot import exp

from rewriter import errors
from rewriter.aggregates import AGGREGATE_TYPES, has_aggregate, is_aggregate_call
from rewriter.context import DIALECT, PlanContext, select_item_texts, to_sql
from rewriter.errors import unsupported
from rewriter.evaluate import compile_expr, compile_kind
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
    SINGLE_SHARD,
    UPPER_LIMIT,
    Aggregate,
    AggSpec,
    Computed,
    Concatenate,
    Distinct,
    Filter,
    Limit,
    MemorySort,
    Opcode,
    OrderKey,
    Plan,
    Projection,
    ProjectNames,
    Truncate,
    Val,
)
from rewriter.route_primitive import field_query_of, innermost_route, make_route, strip_qualifiers
from rewriter.routing import (
    RouteInfo,
    column_table,
    conjuncts,
    sharded_route,
    value_of,
    vindex_identity,
)
from rewriter.select_items import (
    SelectItem,
    limit_values,
    name_as_written,
    named_as_written,
    positional,
    same_expression,
    select_items,
)
from rewriter.tables import TableRef, ambient_keyspace, names_cte, resolve_table
from rewriter.window_pushdown import windows_within_shards

# ---------------------------------------------------------------- table scopes


@dataclass(slots=True)
class Scope:
    """The tables of one SELECT's FROM clause (not of nested subqueries)."""

    refs: list[TableRef]
    derived: list[exp.Subquery] = field(default_factory=list)


def from_sources(sel: exp.Select) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    frm = sel.args.get("from_") or sel.args.get("from")
    if frm is not None:
        out.append(frm.this)
        out.extend(frm.expressions or [])
    for j in sel.args.get("joins") or []:
        out.append(j.this)
    return out


def resolve_scope(sel: exp.Select, ctx: PlanContext) -> Scope:
    refs: list[TableRef] = []
    derived: list[exp.Subquery] = []
    for src in from_sources(sel):
        if isinstance(src, exp.Table):
            if src.name.lower() == "dual" and not src.args.get("db"):
                continue
            refs.append(resolve_table(src, ctx.vschema, ctx.keyspace))
        elif isinstance(src, exp.Subquery):
            derived.append(src)
        else:
            raise unsupported(f"table expression {to_sql(src)}")
    return Scope(refs, derived)


# ---------------------------------------------------------------- route of a statement


def _all_tables_in(node: exp.Expression, ctx: PlanContext) -> list[TableRef]:
    """Every table in the statement, subqueries included (for the single-route check)."""
    refs = []
    for t in node.find_all(exp.Table):
        if t.name.lower() == "dual" and not t.args.get("db"):
            continue
        if isinstance(t.parent, exp.Schema) or names_cte(t):
            continue
        refs.append(resolve_table(t, ctx.vschema, ctx.keyspace))
    return refs


def _merged_sharded_components(sel: exp.Select, sharded: list[TableRef], ctx: PlanContext) -> bool:
    """True when all sharded tables of this SELECT are joined on the same primary vindex
    (so each shard can compute the join alone)."""
    if len(sharded) <= 1:
        return True
    parent = {id(r): id(r) for r in sharded}

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    preds = conjuncts(sel.args.get("where").this if sel.args.get("where") else None)  # type: ignore[union-attr]  # the conditional tests the same get()
    for j in sel.args.get("joins") or []:
        preds.extend(conjuncts(j.args.get("on")))
        using = j.args.get("using")
        if using:
            right = j.this
            for ident in using:
                for r in sharded:
                    if r.node is right:
                        continue
                    lcol = exp.column(ident.name, table=None)
                    rcol = exp.column(ident.name, table=right.alias_or_name)
                    lcol.set("table", None)
                    preds.append(exp.EQ(this=lcol, expression=rcol))
    for p in preds:
        if not isinstance(p, exp.EQ):
            continue
        a, b = p.this, p.expression
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        ra, rb = column_table(a, sharded), column_table(b, sharded)
        if ra is None or rb is None or ra is rb:
            continue
        va, vb = ra.primary_vindex(), rb.primary_vindex()
        if va is None or vb is None:
            continue
        if len(va.columns) != 1 or len(vb.columns) != 1:
            continue
        if va.columns[0].lower() != a.name.lower() or vb.columns[0].lower() != b.name.lower():
            continue
        if vindex_identity(va) != vindex_identity(vb):
            continue
        parent[find(id(ra))] = find(id(rb))
    roots = {find(id(r)) for r in sharded}
    return len(roots) == 1


def _primary_vindex_column(r: TableRef) -> str | None:
    cv = r.primary_vindex()
    if cv is None or len(cv.columns) != 1:
        return None
    return cv.columns[0].lower()


def _same_vindex(a: TableRef, b: TableRef) -> bool:
    va, vb = a.primary_vindex(), b.primary_vindex()
    return va is not None and vb is not None and vindex_identity(va) == vindex_identity(vb)


def _subqueries_merge(sel: exp.Select, top: list[TableRef], inner: list[TableRef],
                      ctx: PlanContext) -> bool:
    """True when every sharded table of a subquery is tied to an outer sharded table by
    equal primary vindex values (Vitess merges such subqueries into the outer route):
    ``WHERE inner.v = outer.v`` inside the subquery (any subquery kind, EXISTS and NOT
    IN included: every row it may read lives on the outer row's shard), or
    ``outer.v IN (SELECT inner.v ...)`` (not negated)."""
    anchored = {id(r.node): r for r in top}
    pending = list(inner)
    progress = True
    while pending and progress:
        progress = False
        for r in list(pending):
            if _anchored(r, anchored, ctx):
                anchored[id(r.node)] = r
                pending.remove(r)
                progress = True
    return not pending


def _anchored(r: TableRef, anchored: dict[int, TableRef], ctx: PlanContext) -> bool:
    col = _primary_vindex_column(r)
    if col is None or r.pinned is not None:
        return False
    sub = r.node.find_ancestor(exp.Select)
    if sub is None:
        return False
    if any(not isinstance(t, exp.Table) for t in from_sources(sub)):
        return False
    own = [x for x in resolve_scope(sub, ctx).refs]
    outer = list(anchored.values())
    where = sub.args.get("where")
    for p in conjuncts(where.this if where is not None else None):
        if not isinstance(p, exp.EQ):
            continue
        a, b = p.this, p.expression
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        for mine, theirs in ((a, b), (b, a)):
            mine_ref = column_table(mine, own)
            if mine_ref is None or mine_ref.node is not r.node or mine.name.lower() != col:
                continue
            if any(x.alias == theirs.table for x in own):
                continue  # not correlated: names a table of the subquery itself
            o = next((x for x in outer if x.alias == theirs.table), None)
            if o is not None and _primary_vindex_column(o) == theirs.name.lower() and _same_vindex(r, o):
                return True
    # outer.v IN (SELECT r.v FROM r ...)
    subquery = sub.parent
    if isinstance(subquery, exp.Subquery):
        subquery = subquery.parent
    if isinstance(subquery, exp.In) and subquery.args.get("query") is not None \
            and not isinstance(subquery.parent, exp.Not) and len(sub.expressions) == 1:
        left, item = subquery.this, sub.expressions[0]
        if isinstance(item, exp.Alias):
            item = item.this
        item_ref = column_table(item, own) if isinstance(item, exp.Column) else None
        if isinstance(left, exp.Column) and item_ref is not None and item_ref.node is r.node \
                and item.name.lower() == col:
            o = next((x for x in outer if x.alias == left.table), None)
            if o is not None and _primary_vindex_column(o) == left.name.lower() and _same_vindex(r, o):
                return True
    return False


def _reference_rows_padded_per_shard(sel: exp.Select, ctx: PlanContext) -> bool:
    """An outer join whose preserved side reads only reference tables and whose other
    side a sharded one: sent whole to every shard, each would pad the reference rows
    without a match on that shard (rewriter.rules.merge_joins refuses the same)."""
    joins = sel.args.get("joins") or []
    sources = from_sources(sel)
    sides = [""] * (len(sources) - len(joins)) + [(j.args.get("side") or "").upper() for j in joins]
    seen_sharded = False
    for src, side in zip(sources, sides, strict=True):
        ref = resolve_table(src, ctx.vschema, ctx.keyspace) if isinstance(src, exp.Table) else None
        sharded = ref is not None and ref.sharded and not ref.is_reference and not ref.system
        if side == "LEFT" and sharded and not seen_sharded or side == "RIGHT" and not sharded and seen_sharded:
            return True
        seen_sharded |= sharded
    return False


def single_route(sel: exp.Expression, scope_sel: exp.Select | None, ctx: PlanContext) -> RouteInfo | None:
    """The one route that can run ``sel`` whole, or None."""
    refs = _all_tables_in(sel, ctx)
    if not refs:
        ks = ambient_keyspace(ctx.vschema, ctx.keyspace)
        return RouteInfo(Opcode.Reference, ks, ctx.vschema.keyspaces[ks].sharded)
    if all(r.system for r in refs):
        return RouteInfo(Opcode.DBA, refs[0].keyspace, refs[0].sharded, tables=refs)
    if any(r.system for r in refs):
        # system schemas exist on every MySQL server: fine next to one unsharded keyspace
        user = [r for r in refs if not r.system]
        if len({r.keyspace for r in user}) == 1 and not user[0].sharded:
            return RouteInfo(Opcode.Unsharded, user[0].keyspace, False, tables=refs)
        return None
    keyspaces = {r.keyspace for r in refs}
    if len(keyspaces) != 1:
        return None
    ks = refs[0].keyspace
    if not refs[0].sharded:
        return RouteInfo(Opcode.Unsharded, ks, False, tables=refs)
    sharded = [r for r in refs if not r.is_reference]
    if not sharded:
        return RouteInfo(Opcode.Reference, ks, True, tables=refs)
    if scope_sel is None:
        return None
    top_scope = {id(r.node) for r in resolve_scope(scope_sel, ctx).refs}
    top = [r for r in sharded if id(r.node) in top_scope]
    # sharded tables inside subqueries would see only one shard's rows, unless the
    # subquery only reads rows that share the outer row's vindex value
    inner = [r for r in sharded if id(r.node) not in top_scope]
    if inner and not _subqueries_merge(scope_sel, top, inner, ctx):
        return None
    if not _merged_sharded_components(scope_sel, top, ctx):
        return None
    if len(top) > 1 and any(r.pinned is not None for r in top):
        return None
    if _reference_rows_padded_per_shard(scope_sel, ctx):
        return None
    where = scope_sel.args.get("where")
    preds = conjuncts(where.this if where else None)
    # for inner joins ON conditions restrict rows like WHERE does
    for j in scope_sel.args.get("joins") or []:
        if not j.args.get("side"):
            preds.extend(conjuncts(j.args.get("on")))
    return sharded_route(ks, refs, top, preds, ctx.list_vars)


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
    _check_scatter_safe(sel, ctx)
    if not needs_proxy_work(sel):
        named = named_as_written(sel, ctx)
        sql = to_sql(named) if changed or not ctx.source else ctx.source
        return make_route(info, sql, field_query_of(named))
    return plan_scatter_select(sel, info, ctx)


def needs_proxy_work(sel: exp.Select) -> bool:
    if sel.args.get("group") or sel.args.get("having") or sel.args.get("distinct"):
        return True
    if sel.args.get("order") or sel.args.get("limit") or sel.args.get("offset"):
        return True
    return any(has_aggregate(e) for e in sel.expressions)


def _check_scatter_safe(sel: exp.Select, ctx: PlanContext) -> None:
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
    if _all_tables_in(sel, ctx) != [] and len(_all_tables_in(sel, ctx)) != len(inner_info.tables):
        return None  # subqueries elsewhere in the outer query
    if only_order_by(inner):
        inner.set("order", None)  # ordering inside a derived table has no meaning in SQL
    strip_qualifiers(sel, inner_info.tables, ctx)
    single = inner_info.opcode in SINGLE_SHARD or inner_info.opcode in (Opcode.ByDestination, Opcode.None_)
    if single:
        return make_route(inner_info, to_sql(sel), field_query_of(sel))
    _check_scatter_safe(sel, ctx)
    _check_scatter_safe(inner, ctx)
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


def only_order_by(sel: exp.Select) -> bool:
    """Whether ``sel`` needs the proxy only for its ORDER BY."""
    if not sel.args.get("order"):
        return False
    s = sel.copy()
    s.set("order", None)
    return not needs_proxy_work(s)


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


# ---------------------------------------------------------------- scatter SELECT


def plan_scatter_select(sel: exp.Select, info: RouteInfo, ctx: PlanContext) -> Plan:
    items = select_items(sel, ctx)
    having, order = sel.args.get("having"), sel.args.get("order")
    # HAVING without GROUP BY or aggregates filters single rows: the shards can do it
    has_agg = (bool(sel.args.get("group")) or any(has_aggregate(i.expr) for i in items)
               or (having is not None and has_aggregate(having.this))
               or (order is not None and any(has_aggregate(o.this) for o in order.expressions)))
    if has_agg:
        return _plan_aggregation(sel, items, info, ctx)
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


def plan_aggregation(sel: exp.Select, ctx: PlanContext, info: RouteInfo | None) -> Plan:
    """Aggregation at the proxy over a multi-shard route (``info``) or, with ``info``
    None, over the rows of a cross-shard join."""
    return _plan_aggregation(sel, select_items(sel, ctx), info, ctx)


def _plan_aggregation(sel: exp.Select, items: list[SelectItem], info: RouteInfo | None, ctx: PlanContext) -> Plan:
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
        predicate = compile_expr(expand_computed_aliases(having.this), resolve_or_add)
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
                raise unsupported(f"ORDER BY {to_sql(e)} in an aggregated query across shards")
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
        from rewriter.join_planner import plan_join

        pushed.set("expressions", [_raw_partial(p) for p in b.pushed])
        pushed.set("group", None)
        plan = plan_join(pushed, ctx)
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
